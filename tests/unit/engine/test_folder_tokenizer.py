"""A model folder's tokenizer read with `tokenizers` and jinja2 (webui.engine.folder_tokenizer, what a
model on vLLM is prompted with) gives exactly transformers' prompt and token ids: the same rendered
text, the same ids, the same count, on the tiny model, on each place a folder may keep its chat
template and special tokens, and on both demo models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from webui.config import PACKAGE_DIR
from webui.engine.folder_tokenizer import FolderTokenizer, read_folder
from webui.engine.templates import PromptBuilder
from webui.models.loading import LoadError, model_folder
from webui.models.specs import ModelSpec, load_specs, parse_specs
from webui.types import Message, SamplingParams

CONVERSATIONS = [
    [Message("user", "hello world")],
    [Message("system", "Be brief."), Message("user", "what is the capital of france")],
    [
        Message("user", '  Où est <b>Paris</b> & "why"?  '),
        Message("assistant", "In France. <|end|> <|im_end|> <eos>"),  # special tokens written in the text
        Message("user", "And Rome?\n\n\ttabs 12345 😀"),
    ],
]
RAW = ["hello world", "<s> the cat </s>", " leading space  and\ttabs\n\n\nnewlines 12345 😀"]


def _transformers(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def assert_same_prompts(spec: ModelSpec, ours: Any, theirs: Any, context: int = 2048) -> None:
    """Every conversation renders to the same text and ids through both tokenizers, and raw text to
    the same ids (with and without the tokenizer's own special tokens)."""
    mine, reference = PromptBuilder(spec, ours, context), PromptBuilder(spec, theirs, context)
    assert mine.template.name == reference.template.name
    if not isinstance(theirs.chat_template, dict):  # named templates: transformers keeps them all, we the default
        assert mine.template.source == reference.template.source  # what the fingerprint hashes
    params = SamplingParams(max_new_tokens=16)
    for messages in CONVERSATIONS:
        assert mine.prepare(messages, params) == reference.prepare(messages, params), messages
        assert mine.count(messages) == reference.count(messages)
    for text in RAW:
        for special in (True, False):
            assert ours(text, add_special_tokens=special)["input_ids"] == list(
                theirs(text, add_special_tokens=special)["input_ids"]
            ), (text, special)


def _spec(folder: Path, **keys: Any) -> ModelSpec:
    return parse_specs({"models": [{"name": "m", "source": str(folder), **keys}]})[0]


def test_the_tiny_models_prompts_and_ids_are_transformers(tiny_model_dir: Path) -> None:
    ours = read_folder(tiny_model_dir)
    assert isinstance(ours, FolderTokenizer)
    theirs = _transformers(tiny_model_dir)
    assert ours.special_tokens == theirs.special_tokens_map
    assert_same_prompts(_spec(tiny_model_dir, template="chat_template"), ours, theirs)
    assert_same_prompts(_spec(tiny_model_dir, template="fschat:zero_shot"), ours, theirs)


def _variant(tiny_model_dir: Path, tmp_path: Path, change: str) -> Path:
    """A copy of the tiny model's tokenizer keeping its template or special tokens another way."""
    folder = tmp_path / change
    shutil.copytree(tiny_model_dir, folder)
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    template = (folder / "chat_template.jinja").read_text()
    if change != "jinja file":
        (folder / "chat_template.jinja").unlink()
    if change == "template in the config":
        config["chat_template"] = template
    if change == "named templates":
        config["chat_template"] = [{"name": "tool_use", "template": "TOOLS"}, {"name": "default", "template": template}]
    if change == "chat_template.json":  # a processor's file: the tokenizer has no template (transformers')
        (folder / "chat_template.json").write_text(json.dumps({"chat_template": template}))
    if change == "add_eos_token":  # transformers' generic backend keeps tokenizer.json's BOS, adds no EOS
        config.update(chat_template=template, add_bos_token=False, add_eos_token=True)
    if change == "special_tokens_map.json":  # an older folder: no added_tokens_decoder, the map file says
        config["chat_template"] = template.replace("{{ m['content'] }}", "{{ bos_token }}{{ m['content'] }}")
        (folder / "special_tokens_map.json").write_text(json.dumps({"bos_token": {"content": "<|system|>"}}))
        config.pop("added_tokens_decoder", None)
    config_file.write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    "change",
    [
        "jinja file",
        "template in the config",
        "named templates",
        "chat_template.json",
        "add_eos_token",
        "special_tokens_map.json",
    ],
)
def test_every_place_a_folder_keeps_its_template_and_tokens_is_read_as_transformers_reads_it(
    tiny_model_dir: Path, tmp_path: Path, change: str
) -> None:
    folder = _variant(tiny_model_dir, tmp_path, change)
    ours, theirs = read_folder(folder), _transformers(folder)
    assert (
        ours.chat_template == theirs.chat_template if change != "named templates" else "TOOLS" not in ours.chat_template
    )
    assert ours.special_tokens == theirs.special_tokens_map
    assert_same_prompts(_spec(folder, template="chat_template" if ours.chat_template else "auto"), ours, theirs)


def test_a_broken_tokenizer_config_is_a_load_error_naming_the_file(tiny_model_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(LoadError, match=r"tokenizer_config.json: cannot read the tokenizer's settings"):
        read_folder(folder)


@pytest.mark.demo
def test_the_demo_models_prompts_and_ids_are_transformers(demo_registry: Any) -> None:
    """SmolLM2's own chat template and Gemma's fschat template, rendered and tokenized both ways, on
    the folder vLLM serves each demo model from (the dequantised cache that loading them wrote):
    what vLLM receives for the demo models is what it received when transformers tokenized."""
    for spec in load_specs(PACKAGE_DIR.parent / "assets" / "models.yaml"):
        folder = model_folder(spec, Path(demo_registry.settings.cache_dir))
        ours, theirs = read_folder(folder), _transformers(folder)
        assert ours.special_tokens == theirs.special_tokens_map
        assert_same_prompts(spec, ours, theirs, context=spec.context_length or 2048)

"""The tokenizer of a Hugging Face model folder, read with `tokenizers` alone, and its chat template
rendered with jinja2 (webui.engine.jinja_chat): the prompt and token ids of a model on an engine
server of ours that loads folders (vLLM).

Why not transformers: the app needs only the text and the ids of the prompt, and importing
transformers (with torch) for that took seconds and 700 MB in a process that runs no model itself.
A fast tokenizer's `tokenizer.json` is the tokenizer transformers runs: its generic backend wraps
the file as it is, post-processor (BOS) included, whatever `add_bos_token` the config says; a
model's own class (GemmaTokenizer) rebuilds it from the same vocabulary and merges, to the same ids
for a folder that transformers wrote. The chat template and the special tokens a template may name
are read where transformers reads them. tests/unit/engine/test_folder_tokenizer.py holds the two side by
side, ids and rendered prompts, on the tiny model and both demo models.

A folder without `tokenizer.json` (a slow, SentencePiece-only tokenizer) is read by transformers
as before (`read_folder` says so in the log).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webui.engine.jinja_chat import ChatTemplateText
from webui.models.loading import LoadError

log = logging.getLogger(__name__)
# The special tokens transformers hands a chat template (its `special_tokens_map`)
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class FolderTokenizer(ChatTemplateText):
    """Offers what webui.engine.templates.PromptBuilder asks of a tokenizer: `chat_template`,
    `apply_chat_template(..., tokenize=False)` and `tokenizer(text, add_special_tokens=...)["input_ids"]`.
    Special tokens written in the text (`<|im_start|>`) become their ids, as transformers makes them."""

    def __init__(self, tokenizer: Any, chat_template: str | None, special_tokens: Mapping[str, Any]) -> None:
        self._tokenizer = tokenizer  # a tokenizers.Tokenizer
        self.chat_template = chat_template or None
        self.special_tokens = dict(special_tokens)

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": list(self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)}


def read_folder(folder: Path) -> Any:
    """The folder's tokenizer: a FolderTokenizer where it has `tokenizer.json`, else transformers'."""
    if not (folder / "tokenizer.json").is_file():
        log.info("%s has no tokenizer.json: reading its tokenizer with transformers", folder)
        from webui.models.loading import import_transformers

        import_transformers()
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(folder)
    from tokenizers import Tokenizer

    config = _json(folder / "tokenizer_config.json")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return FolderTokenizer(tokenizer, chat_template(folder, config), special_tokens(folder, config))


def chat_template(folder: Path, config: Mapping[str, Any]) -> str | None:
    """The default chat template, where transformers' tokenizer finds it: `chat_template.jinja`
    first, then the tokenizer's config (a text, or a list of named templates). A processor's
    `chat_template.json` is not the tokenizer's, as transformers has it."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    found: Any = config.get("chat_template")
    if isinstance(found, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
        named = {t.get("name"): t.get("template") for t in found if isinstance(t, Mapping)}
        found = named.get("default")
    return found if isinstance(found, str) and found else None


def special_tokens(folder: Path, config: Mapping[str, Any]) -> dict[str, str]:
    """The special tokens by name, as a chat template sees them (`bos_token`: "<s>"): the standard
    names and a model's own (`extra_special_tokens` given by name), from the tokenizer's config, or
    from `special_tokens_map.json` in an older folder whose config lists no `added_tokens_decoder`."""
    extra = config.get("extra_special_tokens")
    names = [*SPECIAL_TOKENS, *(extra if isinstance(extra, Mapping) else ())]
    sources = [config] if "added_tokens_decoder" in config else [config, _json(folder / "special_tokens_map.json")]
    found: dict[str, str] = {}
    for source in sources:
        named = {**source, **(source.get("extra_special_tokens") or {})} if isinstance(extra, Mapping) else source
        for name in names:
            value = named.get(name)
            text = value.get("content") if isinstance(value, Mapping) else value
            if isinstance(text, str):
                found[name] = text
    return found


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise LoadError(f"{path}: cannot read the tokenizer's settings ({exc})") from None
    return value if isinstance(value, dict) else {}

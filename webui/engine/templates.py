"""Messages -> prompt text.

The tokenizer's own chat template comes first. A model without one (a base model) uses an fschat
conversation template named in the models file. We never ask fschat to guess a template from the
model's name: for unknown names it silently answers with a canned few-shot example ("one_shot").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webui.errors import ConfigError, ParamError, PromptTooLong
from webui.types import Message, SamplingParams

if TYPE_CHECKING:
    from webui.models.specs import ModelSpec

log = logging.getLogger(__name__)
FALLBACK_FSCHAT = "zero_shot"  # plain "### Human: / ### Assistant:" turns, stop string "###"


@dataclass(frozen=True)
class Rendered:
    text: str
    token_ids: list[int]
    dropped_messages: int  # oldest turns left out so the prompt fits the context


class Template:
    """Renders a conversation for one model entry. `name` says which template was chosen."""

    def __init__(
        self,
        name: str,
        render: Callable[[list[Message]], str],
        stop: Sequence[str] = (),
        *,
        add_special_tokens: bool = False,
        source: str = "",
    ) -> None:
        self.name = name
        self.source = source or name  # what the model fingerprint hashes: the template's own text
        self._render = render
        self.stop = tuple(stop)
        # Chat templates write BOS and friends themselves; plain-text templates need the tokenizer's.
        self.add_special_tokens = add_special_tokens

    def render(self, messages: Sequence[Message], system_prompt: str | None = None) -> str:
        return self._render(with_system(messages, system_prompt))


def with_system(messages: Sequence[Message], system_prompt: str | None) -> list[Message]:
    """The entry's system prompt applies unless the conversation brings its own."""
    messages = list(messages)
    if system_prompt and not (messages and messages[0].role == "system"):
        messages.insert(0, Message("system", system_prompt))
    return messages


def build_template(choice: str, tokenizer: Any, model_name: str) -> Template:
    if choice == "auto":
        if getattr(tokenizer, "chat_template", None):
            choice = "chat_template"
        else:
            log.info(
                "%s has no chat template; using fschat:%s (set 'template' to choose another)",
                model_name,
                FALLBACK_FSCHAT,
            )
            choice = f"fschat:{FALLBACK_FSCHAT}"
    if choice == "chat_template":
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                f"{model_name}: template 'chat_template' was asked for but the tokenizer has none; "
                f"use fschat:NAME (e.g. fschat:{FALLBACK_FSCHAT}) or jinja:PATH"
            )
        return Template(
            "chat_template",
            lambda msgs: _apply_chat_template(tokenizer, msgs, None),
            source=str(tokenizer.chat_template),
        )
    if choice.startswith("jinja:"):
        source = Path(choice[len("jinja:") :]).read_text(encoding="utf-8")
        return Template(choice, lambda msgs: _apply_chat_template(tokenizer, msgs, source), source=source)
    if choice.startswith("fschat:"):
        return fschat_template(choice[len("fschat:") :])
    raise ConfigError(f"{model_name}: unknown template {choice!r}")


def _apply_chat_template(tokenizer: Any, messages: list[Message], source: str | None) -> str:
    return tokenizer.apply_chat_template(
        [m.as_dict() for m in messages], chat_template=source, tokenize=False, add_generation_prompt=True
    )


def fschat_template(name: str) -> Template:
    from fastchat.conversation import conv_templates

    if name not in conv_templates:
        raise ConfigError(
            f"unknown fschat template {name!r}; known ones include {', '.join(sorted(conv_templates)[:12])}, ..."
        )
    base = conv_templates[name]
    stop = base.stop_str if isinstance(base.stop_str, list) else [base.stop_str] if base.stop_str else []
    roles = base.roles

    def render(messages: list[Message]) -> str:
        conv = base.copy()
        conv.messages = []
        for message in messages:
            if message.role == "system":
                conv.set_system_message(message.content)
            else:
                conv.append_message(roles[0] if message.role == "user" else roles[1], message.content)
        conv.append_message(roles[1], None)
        return conv.get_prompt()

    # A base model also tends to write the next user turn itself; stop there too.
    return Template(f"fschat:{name}", render, stop=[*stop, f"\n{roles[0]}:"], add_special_tokens=True)


def fit_to_context(
    messages: Sequence[Message],
    template: Template,
    encode: Callable[[str], list[int]],
    *,
    system_prompt: str | None,
    budget: int,
) -> Rendered:
    """Drop the oldest turns (never the system prompt, never the newest message) until the prompt
    has at most `budget` tokens; `PromptTooLong` when the newest message alone is too long."""
    convo = with_system(messages, system_prompt)
    system = convo[:1] if convo and convo[0].role == "system" else []
    turns = convo[len(system) :]
    dropped = 0
    while True:
        text = template.render(system + turns)
        ids = encode(text)
        if len(ids) <= budget:
            return Rendered(text, ids, dropped)
        if len(turns) <= 1:
            raise PromptTooLong(len(ids), budget)
        # drop one message, and keep the conversation starting with a user turn
        cut = 1
        while cut < len(turns) - 1 and turns[cut].role != "user":
            cut += 1
        turns = turns[cut:]
        dropped += cut


class PromptBuilder:
    """Messages -> the exact prompt and its token ids, for one models-file entry on one tokenizer.

    Shared by every engine that runs weights on this machine (transformers in-process, vLLM in a
    server of its own), so that the prompt shown under "Show prompt" is exactly what the model
    receives whichever engine serves it."""

    def __init__(self, spec: ModelSpec, tokenizer: Any, context_length: int) -> None:
        self.spec = spec
        self.tokenizer = tokenizer
        self.template: Template = build_template(spec.template, tokenizer, spec.name)
        self.context_length = context_length

    def render(self, messages: Sequence[Message]) -> str:
        return self.template.render(messages, self.spec.system_prompt)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=self.template.add_special_tokens)["input_ids"])

    def prepare(self, messages: Sequence[Message], params: SamplingParams) -> Rendered:
        """Validate and render: everything that can be refused before any work starts."""
        params.validate(self.context_length)
        return fit_to_context(
            messages,
            self.template,
            self.encode,
            system_prompt=self.spec.system_prompt,
            budget=self.context_length - params.max_new_tokens,
        )

    def raw(self, prompt: str, params: SamplingParams) -> Rendered:
        """Raw completion: the text tokenized as is, with the tokenizer's own special tokens (such
        as BOS) and no template. Nothing can be dropped, so a prompt that does not fit is refused."""
        params.validate(self.context_length)
        if not isinstance(prompt, str) or not prompt:
            raise ParamError("prompt", "must be a non-empty string")
        token_ids = list(self.tokenizer(prompt, add_special_tokens=True)["input_ids"])
        budget = self.context_length - params.max_new_tokens
        if len(token_ids) > budget:
            raise PromptTooLong(len(token_ids), budget)
        return Rendered(prompt, token_ids, 0)

    def count(self, prompt: Sequence[Message] | str) -> int:
        """Tokens the prompt takes: raw text as is, messages rendered with the template."""
        if isinstance(prompt, str):
            return len(self.tokenizer(prompt, add_special_tokens=True)["input_ids"])
        return len(self.encode(self.render(prompt)))

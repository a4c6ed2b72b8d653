"""Request bodies of the OpenAI-compatible routes, validated with pydantic.

Unknown fields are refused (`extra="forbid"`): a client that sends `logit_bias` or `tools` expects
them to change the answer, and silently ignoring them would hand back something else. OpenAI
fields that cannot change the answer (`user`, `metadata`, `logprobs: false`, `stream_options`)
are accepted and ignored. Types are strict (a string or a boolean is not a number); ranges are
checked once, by `SamplingParams.validate` against `webui.types.RANGES`, so that the API, the UI and
the models file agree on them.

`check_json` runs before pydantic, on the parsed body: it refuses what JSON allows but no model can
take (a lone surrogate such as "\\ud800": valid JSON, not encodable text) and nesting deeper than
any field here needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, field_validator

from webui.errors import ParamError
from webui.types import Message

MAX_STOP = 4  # OpenAI's limit on stop sequences per request
MAX_DEPTH = 16  # nesting a body may have; the deepest field (messages.0.content.0.text) needs 4


def check_json(data: Any) -> None:
    """Raise ParamError naming the first field that holds a lone surrogate or is nested deeper
    than MAX_DEPTH. Iterative, so that depth cannot exhaust the stack here."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise ParamError(path[0], f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, str):
            if not _encodable(value):
                raise ParamError(_dotted(path), "contains a lone surrogate (text that is not valid Unicode)")
        elif isinstance(value, dict):
            for key, item in value.items():
                if not _encodable(str(key)):  # never echo the key itself: it cannot be encoded
                    raise ParamError(_dotted(path), "has a field name with a lone surrogate (not valid Unicode)")
                stack.append((item, (*path, str(key))))
        elif isinstance(value, list):
            stack.extend((item, (*path, str(i))) for i, item in reversed(list(enumerate(value))))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _dotted(path: Sequence[str]) -> str:
    return ".".join(path) or "body"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextPart(_Strict):
    """A content part; only text parts exist here (no images, no audio)."""

    type: Literal["text"]
    text: str


class ChatMessage(_Strict):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]
    name: str | None = None  # accepted and ignored, as most servers do

    def to_message(self) -> Message:
        text = self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)
        # "developer" is OpenAI's newer name for the system role.
        return Message("system" if self.role == "developer" else self.role, text)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")  # e.g. include_obfuscation: harmless here

    include_usage: StrictBool = False


class SamplingFields(_Strict):
    """Fields shared by both routes. None means "not given": the model entry's default applies."""

    model: str
    max_tokens: StrictInt | None = None
    temperature: StrictFloat | None = None
    top_p: StrictFloat | None = None
    seed: StrictInt | None = None
    stop: str | list[str] | None = None
    n: StrictInt | None = None
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    # Hugging Face / vLLM extras (send them with the openai client's `extra_body`)
    top_k: StrictInt | None = None
    repetition_penalty: StrictFloat | None = None
    ignore_eos: StrictBool | None = None
    # OpenAI fields accepted only at the value that changes nothing
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: StrictBool | None = None
    presence_penalty: Literal[0] | None = Field(None, description="only 0 (the default)")
    frequency_penalty: Literal[0] | None = Field(None, description="only 0 (the default)")
    logit_bias: dict[str, Any] | None = None

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and len(value) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop sequences, got {len(value)}")
        return value

    @field_validator("logit_bias")
    @classmethod
    def _no_logit_bias(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value:
            raise ValueError("logit_bias is not supported")
        return value

    def check_common(self) -> None:
        """Rules pydantic cannot say well: raised as ParamError naming the field."""
        if self.n is not None and self.n != 1:
            raise ParamError("n", f"only n=1 is supported, got {self.n}; send separate requests")
        if self.stream_options is not None and not self.stream:
            raise ParamError("stream_options", "only allowed when stream is true")

    def overrides(self) -> dict[str, Any]:
        """The sampling settings this request gives, in SamplingParams' names."""
        given = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "max_new_tokens": self.max_tokens,
            "repetition_penalty": self.repetition_penalty,
            "ignore_eos": self.ignore_eos,
        }
        result = {k: v for k, v in given.items() if v is not None}
        if self.seed is not None:
            result["seed"] = self.seed
        return result

    def stop_list(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: StrictInt | None = None  # OpenAI's newer name for max_tokens
    logprobs: Literal[False] | None = None
    top_logprobs: Literal[0] | None = None
    response_format: dict[str, Any] | None = None
    tools: list[Any] | None = None
    tool_choice: Literal["none"] | None = None

    @field_validator("response_format")
    @classmethod
    def _text_only(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and value != {"type": "text"}:
            raise ValueError('only {"type": "text"} is supported')
        return value

    @field_validator("tools")
    @classmethod
    def _no_tools(cls, value: list[Any] | None) -> list[Any] | None:
        if value:
            raise ValueError("tools are not supported")
        return value

    def check(self) -> None:
        self.check_common()
        if self.max_completion_tokens is not None:
            if self.max_tokens is not None and self.max_tokens != self.max_completion_tokens:
                raise ParamError("max_completion_tokens", "differs from max_tokens; send one of them")
            self.max_tokens = self.max_completion_tokens

    def to_messages(self) -> list[Message]:
        return [m.to_message() for m in self.messages]


class CompletionRequest(SamplingFields):
    prompt: str | list[str]
    echo: Literal[False] | None = None
    suffix: None = None
    best_of: Literal[1] | None = None
    logprobs: Literal[0] | None = None

    def check(self) -> None:
        self.check_common()
        if isinstance(self.prompt, list) and len(self.prompt) != 1:
            raise ParamError("prompt", f"one prompt per request, got a list of {len(self.prompt)}")
        if not self.prompt_text():
            raise ParamError("prompt", "must not be empty")

    def prompt_text(self) -> str:
        return self.prompt if isinstance(self.prompt, str) else self.prompt[0]

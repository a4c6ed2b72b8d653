"""Small value types shared by every layer: messages, sampling parameters and stream events."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from webui.errors import ParamError

Role = Literal["system", "user", "assistant"]
ROLES: tuple[str, ...] = ("system", "user", "assistant")


@dataclass(frozen=True)
class Message:
    role: Role
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ParamError("role", f"must be one of {', '.join(ROLES)}, got {self.role!r}")
        if not isinstance(self.content, str):
            raise ParamError("content", "must be a string")

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings for one request. `validate` checks the ranges; construction does not, so
    that defaults from a models file can be merged first and checked once against the context."""

    temperature: float = 0.7
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 256
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def replace(self, **changes: Any) -> SamplingParams:
        """Copy with changes; None values keep the current setting (except seed, which may be None)."""
        unknown = set(changes) - set(self.field_names())
        if unknown:
            raise ParamError(sorted(unknown)[0], f"unknown sampling parameter; known: {', '.join(self.field_names())}")
        kept = {k: v for k, v in changes.items() if v is not None or k == "seed"}
        if "stop" in kept:
            kept["stop"] = _as_stop_tuple(kept["stop"])
        return dataclasses.replace(self, **kept)

    def validate(self, context_length: int | None = None) -> SamplingParams:
        _check_number("temperature", self.temperature, 0.0, 2.0)
        _check_number("top_p", self.top_p, 0.0, 1.0, low_open=True)
        _check_int("top_k", self.top_k, 0, None)
        high = context_length if context_length else None
        _check_int("max_new_tokens", self.max_new_tokens, 1, high)
        _check_number("repetition_penalty", self.repetition_penalty, 0.0, 2.0, low_open=True)
        if self.seed is not None:
            _check_int("seed", self.seed, 0, 2**63 - 1)
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise ParamError("stop", "stop strings must be non-empty strings")
        if not isinstance(self.ignore_eos, bool):
            raise ParamError("ignore_eos", "must be true or false")
        return self

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["stop"] = list(self.stop)
        return data


def _as_stop_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    raise ParamError("stop", "must be a string or a list of strings")


def _check_number(name: str, value: Any, low: float, high: float, *, low_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ParamError(name, f"must be a number, got {value!r}")
    too_low = value <= low if low_open else value < low
    if too_low or value > high:
        interval = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise ParamError(name, f"must be in {interval}, got {value}")


def _check_int(name: str, value: Any, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParamError(name, f"must be a whole number, got {value!r}")
    if value < low or (high is not None and value > high):
        upper = f"..{high}" if high is not None else " or more"
        raise ParamError(name, f"must be {low}{upper}, got {value}")


class FinishReason(str, enum.Enum):
    STOP = "stop"  # end-of-sequence token or a stop string
    LENGTH = "length"  # max_new_tokens reached
    CANCELLED = "cancelled"  # Stop button, closed tab, dropped client
    ERROR = "error"  # the model raised; `Finished.error` says what


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class Finished:
    reason: FinishReason
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ttft_s: float | None = None  # request start to first text
    tokens_per_s: float | None = None  # completion tokens over decode time (after the first token)
    error: str | None = None
    prompt: str = ""  # the exact rendered prompt
    extra: Mapping[str, Any] = field(default_factory=dict)

    def stats(self) -> dict[str, Any]:
        return {
            "finish_reason": self.reason.value,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "ttft_s": self.ttft_s,
            "tokens_per_s": self.tokens_per_s,
        }


StreamEvent = TextDelta | Finished

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
class Route:
    """Which conversation a request belongs to and for whom, as a router in front of a remote
    server may read it to keep the conversation on one replica (webui.engine.remote_backend).
    Both are opaque keyed hashes made by the caller (webui.access.routes), never a name or an
    address; "" when not known."""

    session: str = ""
    user: str = ""


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
        for name, limits in RANGES.items():
            value = getattr(self, name)
            if name == "seed" and value is None:
                continue
            high = context_length if name == "max_new_tokens" and context_length else limits.high
            limits.check(name, value, high)
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise ParamError("stop", "stop strings must be non-empty strings")
        if not isinstance(self.ignore_eos, bool):
            raise ParamError("ignore_eos", "must be true or false")
        return self

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW

    def effective(self) -> SamplingParams:
        """The settings an engine runs with: a temperature too small to divide by is greedy, and a
        repetition penalty acts no smaller than REPETITION_PENALTY_FLOOR. Both are in range, and
        both overflowed the logits to inf (a crash while sampling) when taken literally."""
        return dataclasses.replace(
            self,
            temperature=0.0 if self.greedy else self.temperature,
            repetition_penalty=max(self.repetition_penalty, REPETITION_PENALTY_FLOOR),
        )

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


@dataclass(frozen=True)
class Range:
    """The values one sampling setting accepts: a whole number or a finite number (never a string or
    a boolean) from `low` to `high` (None: no upper bound here; max_new_tokens' is the context)."""

    low: float
    high: float | None
    low_open: bool = False  # `low` itself is refused
    whole: bool = False

    def check(self, name: str, value: Any, high: float | None = None) -> None:
        high = self.high if high is None else high
        if self.whole and (isinstance(value, bool) or not isinstance(value, int)):
            raise ParamError(name, f"must be a whole number, got {value!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ParamError(name, f"must be a number, got {value!r}")
        too_low = value <= self.low if self.low_open else value < self.low
        if too_low or (high is not None and value > high):
            raise ParamError(name, f"must be {self.describe(high)}, got {value}")

    def describe(self, high: float | None = None) -> str:
        high = self.high if high is None else high
        if self.whole:
            return f"{int(self.low)}..{int(high)}" if high is not None else f"{int(self.low)} or more"
        return f"in {'(' if self.low_open else '['}{self.low}, {high}]"


# The longest model name: the models file refuses a longer one, and a vote whose log names one
# (a damaged or hostile log) is unreadable ("invalid") on the board, never a row that long.
MODEL_NAME_MAX_CHARS = 200

# The one table of sampling ranges: the models file, the UI and the HTTP API are all checked
# against it (SamplingParams.validate); docs/api.md quotes it.
GREEDY_BELOW = 1e-5  # a temperature below this samples greedily, as in vLLM
REPETITION_PENALTY_FLOOR = 0.01  # a smaller penalty acts as this one (see SamplingParams.effective)
TOP_K_MAX = 1_000_000  # any value over the vocabulary size means "off"; the bound keeps it an engine integer
RANGES: Mapping[str, Range] = {
    "temperature": Range(0.0, 2.0),
    "top_p": Range(0.0, 1.0, low_open=True),
    "top_k": Range(0, TOP_K_MAX, whole=True),
    "max_new_tokens": Range(1, None, whole=True),
    "repetition_penalty": Range(0.0, 2.0, low_open=True),
    "seed": Range(0, 2**63 - 1, whole=True),
}


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


@dataclass(frozen=True)
class Vote:
    """One kind of vote: how it is logged, shown, named and counted."""

    kind: str  # the record type in the log, as FastChat writes it
    on_pair: bool  # compares two panes (else judges one reply)
    button: str  # the button's text: says in words what it does, for screen readers and emoji-less fonts
    api_name: str  # suffix of the button's event api_name
    key: str  # keyboard shortcut
    winner: str | None = None  # FastChat's `winner` for a vote on a pair


# Every vote there is; the lists below (and the UI's buttons, storage's checks and the leaderboard's
# winners) are derived from it.
VOTES: tuple[Vote, ...] = (
    Vote("leftvote", True, "👈 A is better", "a", "1", "model_a"),
    Vote("rightvote", True, "👉 B is better", "b", "2", "model_b"),
    Vote("tievote", True, "🤝 Tie", "tie", "3", "tie"),
    Vote("bothbad_vote", True, "👎 Both are bad", "bad", "4", "tie (bothbad)"),
    Vote("upvote", False, "👍 Good", "up", "1"),
    Vote("downvote", False, "👎 Bad", "down", "2"),
    Vote("flag", False, "⚑ Flag", "flag", "3"),
)
VOTES_BY_KIND: Mapping[str, Vote] = {vote.kind: vote for vote in VOTES}
PAIR_VOTES: tuple[Vote, ...] = tuple(vote for vote in VOTES if vote.on_pair)
SINGLE_VOTES: tuple[Vote, ...] = tuple(vote for vote in VOTES if not vote.on_pair)

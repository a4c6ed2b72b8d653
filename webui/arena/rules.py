"""Pure arena logic: one browser tab's conversation state and the rules that govern it.

Everything a user may or may not do is decided here, on the server, from plain data: drawing a
battle pair by the models-file weights, when a message is accepted, when a vote is allowed (one per
turn, only after every reply finished, only by the session that owns the battle), and when the
names of an anonymous battle are revealed. No Gradio, no registry: the handlers in
`webui.arena.handlers` bring the models, and the tests drive these functions directly.
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webui.errors import ArenaError, ParamError
from webui.records.events import Mode
from webui.types import Finished, FinishReason, Message, SamplingParams

PAIR_VOTES: dict[str, str] = {"leftvote": "A is better", "rightvote": "B is better", "tievote": "Tie",
                              "bothbad_vote": "Both are bad"}
SINGLE_VOTES: dict[str, str] = {"upvote": "👍", "downvote": "👎", "flag": "flag"}
PANE_LABELS = ("Model A", "Model B")


class Refused(ArenaError):
    """A request the rules do not allow. The message is shown to the user as is, so it never names
    a model that is still hidden."""


def new_id() -> str:
    return uuid.uuid4().hex


# ---- drawing a battle pair ---------------------------------------------------------------

def draw_pair(weights: Mapping[str, float], rng: random.Random) -> tuple[str, str]:
    """Two different models, the first drawn by weight, the second by weight among the rest, then
    put on random sides. Weight 0 (or a weight that is not a finite number) keeps a model out.
    Refuses, rather than crashing, when fewer than two models can take part."""
    eligible = {name: float(w) for name, w in weights.items()
                if isinstance(w, (int, float)) and math.isfinite(w) and w > 0}
    if len(eligible) < 2:
        raise Refused("A battle needs two models that are ready. Some are still loading: "
                      "try again in a moment.")
    names = sorted(eligible)  # a stable order, so that a seeded rng gives a reproducible draw
    first = rng.choices(names, weights=[eligible[n] for n in names])[0]
    rest = [n for n in names if n != first]
    second = rng.choices(rest, weights=[eligible[n] for n in rest])[0]
    pair = [first, second]
    rng.shuffle(pair)
    return pair[0], pair[1]


# ---- sampling settings from the pane controls ------------------------------------------------

@dataclass(frozen=True)
class PaneSettings:
    """What a pane's parameter controls hold. `own_defaults` (battle) means: ignore the controls
    and use the model's own settings from the models file, which cannot be shown before the vote."""

    temperature: float = 0.7
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 256
    repetition_penalty: float = 1.0
    seed: int | None = None  # None (or negative, from the controls): a fresh random seed
    system_prompt: str = ""
    own_defaults: bool = False

    FIELDS = ("temperature", "top_p", "top_k", "max_new_tokens", "repetition_penalty", "seed", "system_prompt")

    @classmethod
    def from_values(cls, values: Sequence[Any], own_defaults: Any = False) -> PaneSettings:
        """From the raw control values (in FIELDS order), as they arrive from a browser or a raw
        HTTP call: anything malformed is refused with the control's name."""
        if len(values) != len(cls.FIELDS):
            raise Refused(f"Parameters: expected {len(cls.FIELDS)} values, got {len(values)}.")
        raw = dict(zip(cls.FIELDS, values, strict=True))
        return cls(
            temperature=_number("temperature", raw["temperature"]), top_p=_number("top_p", raw["top_p"]),
            top_k=_whole("top_k", raw["top_k"]), max_new_tokens=_whole("max_new_tokens", raw["max_new_tokens"]),
            repetition_penalty=_number("repetition_penalty", raw["repetition_penalty"]), seed=_seed(raw["seed"]),
            system_prompt=_text("system prompt", raw["system_prompt"]), own_defaults=bool(own_defaults),
        )

    @classmethod
    def from_spec(cls, sampling: SamplingParams, system_prompt: str | None) -> PaneSettings:
        seed = sampling.seed if sampling.seed is not None else -1  # the controls show -1 for "random"
        return cls(sampling.temperature, sampling.top_p, sampling.top_k, sampling.max_new_tokens,
                   sampling.repetition_penalty, seed, system_prompt or "")

    def values(self) -> list[Any]:
        return [getattr(self, name) for name in self.FIELDS]

    def apply(self, defaults: SamplingParams) -> tuple[SamplingParams, str | None]:
        """The request's parameters and system prompt (None: the model's own applies). Ranges are
        checked here; the model's context length is checked by the backend."""
        if self.own_defaults:
            return defaults, None
        try:
            params = defaults.replace(
                temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, max_new_tokens=self.max_new_tokens,
                repetition_penalty=self.repetition_penalty, seed=self.seed,
            ).validate()
        except ParamError as exc:
            raise Refused(f"Parameters: {exc}") from None
        return params, (self.system_prompt.strip() or None)


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Refused(f"Parameters: {name} must be a number.")
    return float(value)


def _whole(name: str, value: Any) -> int:
    number = _number(name, value)
    if number != int(number):
        raise Refused(f"Parameters: {name} must be a whole number.")
    return int(number)


def _seed(value: Any) -> int | None:
    if value is None or value == "" or (isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0):
        return None  # empty or negative: a fresh random seed per request
    return _whole("seed", value)


def _text(name: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Refused(f"Parameters: {name} must be text.")
    return value


# ---- conversation state ----------------------------------------------------------------------

@dataclass
class Reply:
    text: str = ""
    final: Finished | None = None
    error: str | None = None  # a short generic message for the user; details are in the server log
    started: float = field(default_factory=time.time)

    @property
    def done(self) -> bool:
        return self.final is not None or self.error is not None

    @property
    def stopped(self) -> bool:
        return self.final is not None and self.final.reason is FinishReason.CANCELLED

    @property
    def ok(self) -> bool:
        return self.final is not None and self.final.reason is not FinishReason.ERROR and self.error is None


@dataclass
class Turn:
    user: str
    params: SamplingParams
    system_prompt: str | None  # None: the model's own system prompt applies
    reply: Reply = field(default_factory=Reply)


@dataclass
class Pane:
    model: str | None = None
    conv_id: str = field(default_factory=new_id)
    turns: list[Turn] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return bool(self.turns) and not self.turns[-1].reply.done

    def clear(self) -> None:
        self.turns = []
        self.conv_id = new_id()

    def messages(self) -> list[Message]:
        """What the model is sent for the newest turn: the pane's system prompt when one was set,
        the earlier turns whose replies did not fail (a stopped reply stays, as the user saw it),
        and the newest user message."""
        if not self.turns:
            return []
        newest = self.turns[-1]
        out = [Message("system", newest.system_prompt)] if newest.system_prompt else []
        for turn in self.turns[:-1]:
            if turn.reply.ok:
                out += [Message("user", turn.user), Message("assistant", turn.reply.text)]
        out.append(Message("user", newest.user))
        return out


@dataclass(frozen=True)
class Owner:
    """Who a session belongs to: Gradio's session hash, a random secret of the browser tab. (The
    client address is not part of it: behind proxies it can change between two requests of one
    person, and a vote refused for that would be worse than useless.)"""

    session_hash: str | None


@dataclass
class Session:
    mode: Mode
    owner: Owner
    panes: list[Pane]
    battle_id: str | None = None
    revealed: bool = False
    turn_no: int = 0  # bumped by every send and regenerate: a vote belongs to one set of replies
    votes: dict[int, set[str]] = field(default_factory=dict)
    running: threading.Event | None = None  # the cancel signal of the generation in progress
    idle: threading.Event = field(default_factory=threading.Event, repr=False)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def __post_init__(self) -> None:
        self.idle.set()

    @property
    def anonymous(self) -> bool:
        return self.mode == "battle" and not self.revealed

    @property
    def busy(self) -> bool:
        return self.running is not None or any(p.busy for p in self.panes)

    def replies_done(self) -> bool:
        return all(p.turns and p.turns[-1].reply.done for p in self.panes) and self.running is None


def new_session(mode: Mode, owner: Owner) -> Session:
    panes = [Pane()] if mode == "direct" else [Pane(), Pane()]
    return Session(mode=mode, owner=owner, panes=panes, battle_id=new_id() if mode == "battle" else None)


def check_owner(session: Session | None, owner: Owner, *, what: str = "conversation") -> Session:
    if session is None:
        raise Refused(f"There is no {what} in this session yet: send a message first.")
    if session.owner != owner:
        raise Refused(f"This {what} belongs to another session. Reload the page to start your own.")
    return session


def clean_message(text: Any, max_chars: int) -> str | None:
    """The message to send, None when there is nothing to send (empty or only whitespace). Too long
    is refused with the limit, never silently cut."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise Refused("The message must be text.")
    if not text.strip():
        return None
    if len(text) > max_chars:
        raise Refused(f"Your message is {len(text):,} characters long; the limit is {max_chars:,}. "
                      "Please shorten it.")
    return text


def check_can_send(session: Session, max_turns: int) -> None:
    if session.busy:
        raise Refused("Please wait for the replies to finish, or press Stop.")
    if session.mode == "battle" and session.revealed:
        raise Refused("This battle is over. Press “New round” to start another one.")
    if any(len(p.turns) >= max_turns for p in session.panes):
        raise Refused(f"This conversation reached the limit of {max_turns} turns. "
                      "Start a new round to keep going.")


def add_turn(session: Session, text: str, requests: Sequence[tuple[SamplingParams, str | None]]) -> None:
    """Append the user's message to every pane, with each pane's parameters."""
    for pane, (params, system) in zip(session.panes, requests, strict=True):
        pane.turns.append(Turn(text, params, system))
    session.turn_no += 1


def check_can_regenerate(session: Session, panes: Sequence[int]) -> None:
    if session.busy:
        raise Refused("Please wait for the replies to finish, or press Stop.")
    if session.mode == "battle" and session.revealed:
        raise Refused("This battle is over. Press “New round” to start another one.")
    if any(not session.panes[i].turns for i in panes):
        raise Refused("There is nothing to regenerate yet.")


def reset_replies(session: Session, panes: Sequence[int],
                  requests: Mapping[int, tuple[SamplingParams, str | None]]) -> None:
    """Drop the newest reply of the given panes so that they are generated again."""
    for i in panes:
        last = session.panes[i].turns[-1]
        params, system = requests[i]
        session.panes[i].turns[-1] = Turn(last.user, params, system)
    session.turn_no += 1


# ---- votes ----------------------------------------------------------------------------------

def check_vote(session: Session | None, kind: str, owner: Owner) -> Session:
    """The rules, enforced whatever the buttons show: the caller's own session, a vote kind that
    fits the mode, every reply of the newest turn finished (and none failed), one vote per turn."""
    what = "battle" if session is not None and session.mode == "battle" else "conversation"
    session = check_owner(session, owner, what=what)
    allowed = SINGLE_VOTES if session.mode == "direct" else PAIR_VOTES
    if kind not in allowed:
        raise Refused(f"Unknown vote {kind!r} here; expected one of {', '.join(allowed)}.")
    if session.turn_no == 0 or not all(p.turns for p in session.panes):
        raise Refused("There is nothing to vote on yet: send a message first.")
    if not session.replies_done():
        raise Refused("Please wait until every reply has finished before voting.")
    if any(not p.turns[-1].reply.ok and not p.turns[-1].reply.stopped for p in session.panes):
        raise Refused("A reply failed, so this turn cannot be judged. Regenerate it or start a new round.")
    if session.mode == "battle" and session.revealed:
        raise Refused("You already voted in this battle. Press “New round” to start another one.")
    cast = session.votes.get(session.turn_no, set())
    if kind in cast or (kind != "flag" and cast - {"flag"}):
        raise Refused("You already voted on this turn.")
    return session


def mark_voted(session: Session, kind: str) -> None:
    """Count the vote (after it was recorded); a battle then shows its names."""
    session.votes.setdefault(session.turn_no, set()).add(kind)
    if session.mode == "battle":
        session.revealed = True


def can_vote(session: Session | None) -> bool:
    """Whether the vote buttons should be enabled (the same rules, for the view)."""
    if session is None:
        return False
    try:
        kind = "upvote" if session.mode == "direct" else "leftvote"
        check_vote(session, kind, session.owner)
    except Refused:
        return False
    return True


def start_run(session: Session) -> threading.Event:
    """A fresh cancel signal for one generation; Stop sets the one in `session.running`."""
    if session.running is not None:
        raise Refused("The replies are already being generated.")
    session.running = threading.Event()
    session.idle.clear()
    return session.running


def end_run(session: Session) -> None:
    session.running = None
    session.idle.set()

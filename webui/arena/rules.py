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
import re
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webui.errors import ArenaError, ParamError
from webui.records.events import Mode
from webui.records.prepared import PreparedPair
from webui.types import PAIR_VOTES, SINGLE_VOTES, Finished, FinishReason, Message, SamplingParams

PANE_LABELS = ("Model A", "Model B", "Model C", "Model D")
# How many panes each mode has: battles stay pairwise (votes and the leaderboard are pairwise);
# side by side compares up to four named models (votes only with two).
PANE_COUNTS: dict[str, tuple[int, ...]] = {"battle": (2,), "side_by_side": (2, 3, 4), "direct": (1,)}
MAX_PANES = max(n for counts in PANE_COUNTS.values() for n in counts)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class Refused(ArenaError):
    """A request the rules do not allow. The message is shown to the user as is, so it never names
    a model that is still hidden."""


def new_id() -> str:
    return uuid.uuid4().hex


# ---- drawing a battle pair ---------------------------------------------------------------


def eligible_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """The models that may be drawn, with their weights. Weight 0 (or a weight that is not a
    finite number) keeps a model out. Refuses, rather than crashing, when fewer than two remain."""
    eligible = {
        name: float(w) for name, w in weights.items() if isinstance(w, (int, float)) and math.isfinite(w) and w > 0
    }
    if len(eligible) < 2:
        raise Refused("A battle needs two models that are ready. Some are still loading: try again in a moment.")
    return eligible


def draw_pair(weights: Mapping[str, float], rng: random.Random) -> tuple[str, str]:
    """Two different models, the first drawn by weight, the second by weight among the rest, then
    put on random sides (`eligible_weights` says who takes part)."""
    eligible = eligible_weights(weights)
    names = sorted(eligible)  # a stable order, so that a seeded rng gives a reproducible draw
    first = rng.choices(names, weights=[eligible[n] for n in names])[0]
    rest = [n for n in names if n != first]
    second = rng.choices(rest, weights=[eligible[n] for n in rest])[0]
    pair = [first, second]
    rng.shuffle(pair)
    return pair[0], pair[1]


# ---- sampling settings from the pane controls ------------------------------------------------

SAMPLING_CONTROLS = ("temperature", "top_p", "top_k", "max_new_tokens", "repetition_penalty", "seed")


@dataclass(frozen=True)
class PaneSettings:
    """What a pane's parameter controls hold: the SamplingParams fields they show, and a system
    prompt. `own_defaults` (battle) means: ignore the controls and use the model's own settings
    from the models file, which cannot be shown before the vote."""

    sampling: SamplingParams = field(default_factory=SamplingParams)
    system_prompt: str = ""
    own_defaults: bool = False

    FIELDS = (*SAMPLING_CONTROLS, "system_prompt")  # the controls, in order

    @classmethod
    def of(cls, system_prompt: str = "", own_defaults: bool = False, **sampling: Any) -> PaneSettings:
        """Shorthand: PaneSettings.of(temperature=0.1, system_prompt="...")."""
        return cls(SamplingParams(**sampling), system_prompt, own_defaults)

    @classmethod
    def from_values(cls, values: Sequence[Any], own_defaults: Any = False) -> PaneSettings:
        """From the raw control values (in FIELDS order), as they arrive from a browser or a raw
        HTTP call: anything malformed is refused with the control's name."""
        if len(values) != len(cls.FIELDS):
            raise Refused(f"Parameters: expected {len(cls.FIELDS)} values, got {len(values)}.")
        raw = dict(zip(cls.FIELDS, values, strict=True))
        sampling = SamplingParams(
            temperature=_number("temperature", raw["temperature"]),
            top_p=_number("top_p", raw["top_p"]),
            top_k=_whole("top_k", raw["top_k"]),
            max_new_tokens=_whole("max_new_tokens", raw["max_new_tokens"]),
            repetition_penalty=_number("repetition_penalty", raw["repetition_penalty"]),
            seed=_seed(raw["seed"]),
        )
        return cls(sampling, _text("system prompt", raw["system_prompt"]), bool(own_defaults))

    @classmethod
    def from_spec(cls, sampling: SamplingParams, system_prompt: str | None) -> PaneSettings:
        return cls(sampling, system_prompt or "")

    def values(self) -> list[Any]:
        """What the controls show, in FIELDS order (a random seed shows as -1)."""
        shown = [getattr(self.sampling, name) for name in SAMPLING_CONTROLS]
        shown[SAMPLING_CONTROLS.index("seed")] = -1 if self.sampling.seed is None else self.sampling.seed
        return [*shown, self.system_prompt]

    def apply(self, defaults: SamplingParams, *, length_cap: int | None = None) -> tuple[SamplingParams, str | None]:
        """The request's parameters and system prompt (None: the model's own applies). Ranges are
        checked here; the model's context length is checked by the backend. `length_cap` (a battle)
        replaces the model's own length settings when its own defaults are used."""
        if self.own_defaults:
            return (defaults if length_cap is None else same_length(defaults, length_cap)), None
        try:
            params = defaults.replace(**{name: getattr(self.sampling, name) for name in SAMPLING_CONTROLS}).validate()
        except ParamError as exc:
            raise Refused(f"Parameters: {exc}") from None
        return params, (self.system_prompt.strip() or None)


def battle_length_cap(cap: int, context_lengths: Sequence[int | None]) -> int:
    """The one length cap of a battle's panes: the configured one, or half the smaller context of
    the two models where that is less (the conversation needs the rest). It depends on the pair,
    never on the side, so it tells nobody which model is which."""
    known = [c for c in context_lengths if c]
    return max(1, min([cap, *(c // 2 for c in known)]))


def same_length(defaults: SamplingParams, cap: int) -> SamplingParams:
    """A battle pane on its model's own settings keeps them all except the ones that would show on
    screen before the vote: a reply cut at 256 tokens can only come from the model whose default
    is 256, and a model that ignores end-of-sequence always runs to its limit. Both panes get the
    battle's one length cap, and both stop at end-of-sequence."""
    return defaults.replace(max_new_tokens=cap, ignore_eos=False)


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
    return clean_text(value)


def clean_text(text: str) -> str:
    """Lone surrogates (JSON from a browser can carry half of an emoji) become U+FFFD: no tokenizer,
    log file or export downstream could encode them, and one would fail a reply before it starts."""
    return _LONE_SURROGATE.sub("\ufffd", text)


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
    model_system_prompt: str = ""  # the model's own (what None means), shown after a battle's vote
    reply: Reply = field(default_factory=Reply)

    @property
    def system_used(self) -> str:
        return self.system_prompt if self.system_prompt is not None else self.model_system_prompt


# What one pane is asked: (parameters, system prompt or None, the model's own system prompt).
PaneRequest = tuple[SamplingParams, str | None] | tuple[SamplingParams, str | None, str]


@dataclass
class Pane:
    model: str | None = None
    conv_id: str = field(default_factory=new_id)
    turns: list[Turn] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return bool(self.turns) and not self.turns[-1].reply.done

    @property
    def chosen(self) -> str:
        """The model, for a pane that must have one by now (it has a turn, or is being sent)."""
        if self.model is None:
            raise Refused("Choose a model first.")
        return self.model

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
    prepared: PreparedPair | None = None  # a battle on stored replies (webui.records.prepared)
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


def new_session(mode: Mode, owner: Owner, panes: int | None = None) -> Session:
    count = check_pane_count(mode, panes if panes is not None else PANE_COUNTS[mode][0])
    return Session(
        mode=mode, owner=owner, panes=[Pane() for _ in range(count)], battle_id=new_id() if mode == "battle" else None
    )


def check_pane_count(mode: Mode, count: Any) -> int:
    allowed = PANE_COUNTS[mode]
    if (
        isinstance(count, bool)
        or not isinstance(count, (int, float, str))
        or str(count).strip() not in map(str, allowed)
    ):
        raise Refused(f"This tab has {' or '.join(map(str, allowed))} panes, not {count!r}.")
    return int(count)


def set_pane_count(session: Session, count: Any) -> bool:
    """Show `count` panes. A different count starts a new conversation in every pane (a pane that
    joins half-way would answer a conversation it never saw); the models chosen so far stay.
    Returns whether anything changed."""
    count = check_pane_count(session.mode, count)
    if count == len(session.panes):
        return False
    if session.busy:
        raise Refused("Please stop the replies before changing the number of panes.")
    session.panes = session.panes[:count] + [Pane() for _ in range(count - len(session.panes))]
    for pane in session.panes:
        pane.clear()
    session.votes.clear()
    return True


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
        raise Refused(f"Your message is {len(text):,} characters long; the limit is {max_chars:,}. Please shorten it.")
    return clean_text(text)


PREPARED_ONE_TURN = (
    "This battle's question was prepared: vote on these replies, then press “New round” to ask your own."
)


def check_can_send(session: Session, max_turns: int) -> None:
    if session.busy:
        raise Refused("Please wait for the replies to finish, or press Stop.")
    if session.mode == "battle" and session.revealed:
        raise Refused("This battle is over. Press “New round” to start another one.")
    if session.prepared is not None:  # its replies exist for the first turn only
        raise Refused(PREPARED_ONE_TURN)
    if any(len(p.turns) >= max_turns for p in session.panes):
        raise Refused(f"This conversation reached the limit of {max_turns} turns. Start a new round to keep going.")


def add_turn(session: Session, text: str, requests: Sequence[PaneRequest]) -> None:
    """Append the user's message to every pane, with each pane's parameters."""
    for pane, request in zip(session.panes, requests, strict=True):
        pane.turns.append(Turn(text, *request))
    session.turn_no += 1


def check_can_regenerate(session: Session, panes: Sequence[int]) -> None:
    if session.busy:
        raise Refused("Please wait for the replies to finish, or press Stop.")
    if session.mode == "battle" and session.revealed:
        raise Refused("This battle is over. Press “New round” to start another one.")
    if session.prepared is not None:
        raise Refused(PREPARED_ONE_TURN)
    if any(not session.panes[i].turns for i in panes):
        raise Refused("There is nothing to regenerate yet.")


def reset_replies(session: Session, panes: Sequence[int], requests: Mapping[int, PaneRequest]) -> None:
    """Drop the newest reply of the given panes so that they are generated again."""
    for i in panes:
        session.panes[i].turns[-1] = Turn(session.panes[i].turns[-1].user, *requests[i])
    session.turn_no += 1


# ---- votes ----------------------------------------------------------------------------------


def check_vote(session: Session | None, kind: str, owner: Owner) -> Session:
    """The rules, enforced whatever the buttons show: the caller's own session, a vote kind that
    fits the mode, every reply of the newest turn finished (and none failed), one vote per turn."""
    what = "battle" if session is not None and session.mode == "battle" else "conversation"
    session = check_owner(session, owner, what=what)
    allowed = [vote.kind for vote in (SINGLE_VOTES if session.mode == "direct" else PAIR_VOTES)]
    if kind not in allowed:
        raise Refused(f"Unknown vote {kind!r} here; expected one of {', '.join(allowed)}.")
    if len(session.panes) > 2:
        raise Refused("Votes compare two models: with more than two panes there is nothing to vote on.")
    _check_turn_judgeable(session)
    if session.mode == "battle" and session.revealed:
        raise Refused("You already voted in this battle. Press “New round” to start another one.")
    cast = session.votes.get(session.turn_no, set())
    if kind in cast or (kind != "flag" and cast - {"flag"}):
        raise Refused("You already voted on this turn.")
    return session


def _check_turn_judgeable(session: Session) -> None:
    if session.turn_no == 0 or not all(p.turns for p in session.panes):
        raise Refused("There is nothing to vote on yet: send a message first.")
    if not session.replies_done():
        raise Refused("Please wait until every reply has finished before voting.")
    if any(not p.turns[-1].reply.ok and not p.turns[-1].reply.stopped for p in session.panes):
        raise Refused("A reply failed, so this turn cannot be judged. Regenerate it or start a new round.")


def mark_voted(session: Session, kind: str) -> None:
    """Count the vote (after it was recorded); a battle then shows its names."""
    session.votes.setdefault(session.turn_no, set()).add(kind)
    if session.mode == "battle":
        session.revealed = True


def can_vote(session: Session | None, kind: str | None = None) -> bool:
    """Whether a vote button should be enabled (the same rules, for the view): `kind`, or any
    vote of the mode when None. In direct chat the flag stays open after a thumb, as the rules say."""
    if session is None:
        return False
    kind = kind or ("upvote" if session.mode == "direct" else "leftvote")
    try:
        check_vote(session, kind, session.owner)
    except Refused:
        return False
    return True


def stopped_in_turn(session: Session | None) -> bool:
    """Whether a reply of the newest turn was stopped before it ended: the leaderboard leaves such
    battles out (Settings.leaderboard_drop_stopped), and the voter is told so at the vote."""
    return session is not None and any(p.turns and p.turns[-1].reply.stopped for p in session.panes)


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

"""A replay: each prompt answered by the new model and the baseline, then judged in both orders.

Guarantees: generation goes through the arena's own engines (each model's own sampling settings,
as visitors get them, a reply at most `max_tokens` long where the caller caps it), as many
requests at once as each engine's slots (a judge that is one of the two models shares its
slots; its questions go first); a baseline reply is taken from the logs instead where `logged`
finds one (a battle's reply by what serves the baseline now, as one more draw from the same
model and settings); a reply or a judge's answer that fails is reported and its prompt left out
of the figures, never judged on half a reply nor on one order alone; nothing is written to the
vote logs or the judge files (the report holds everything); `cancel` stops the requests in
flight.

The figure: for each prompt, the new model's score is its mean over the judge's parsed orders
(a win 1, a tie 0.5, a loss 0); the paired win rate is the mean over prompts, with a 95% interval
from a bootstrap over prompts. 0.5 is no difference.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from webui.engine.base import Backend, collect
from webui.judge.records import ORDERS, Asked
from webui.judge.run import Battle, Cancelled, Judge
from webui.replay.lanes import Lanes
from webui.replay.prompts import Prompt
from webui.types import FinishReason, Message

SCORE = {"model_a": 1.0, "tie": 0.5, "tie (bothbad)": 0.5, "model_b": 0.0}  # the new model is model_a


@dataclass
class Reply:
    text: str
    error: str | None
    seconds: float
    logged: bool = False  # read from a logged battle, not generated


@dataclass
class Replayed:
    prompt: Prompt
    new: Reply
    baseline: Reply
    verdicts: list[str | None] = field(default_factory=list)  # per order, in the battles table's words
    answers: list[str] = field(default_factory=list)
    error: str | None = None  # why this prompt is not in the figures
    judge_seconds: list[float] = field(default_factory=list)  # per order, each answer's latency

    @property
    def score(self) -> float | None:
        """The new model's score on this prompt (None: no parsed verdict)."""
        scores = [SCORE[v] for v in self.verdicts if v in SCORE]
        return sum(scores) / len(scores) if scores else None


def generate(backend: Backend, prompt: str, cancel: threading.Event, max_tokens: int | None = None) -> Reply:
    """One reply with the model's own settings, at most `max_tokens` long where that is shorter."""
    start = time.monotonic()
    params = backend.default_params()
    if max_tokens is not None:
        params = params.replace(max_new_tokens=min(params.max_new_tokens, max_tokens))
    try:
        text, final = collect(backend.stream([Message("user", prompt)], params, cancel))
    except Exception as exc:  # a refusal before streaming (a prompt too long for the model...)
        return Reply("", str(exc) or type(exc).__name__, time.monotonic() - start)
    error = None
    if final.reason is FinishReason.ERROR:
        error = final.error or "the model failed"
    elif final.reason is FinishReason.CANCELLED:
        error = "stopped"
    return Reply(text, error, time.monotonic() - start)


def replay(
    prompts: Sequence[Prompt],
    new: Backend,
    baseline: Backend,
    judge: Judge,
    *,
    cancel: threading.Event | None = None,
    on_progress: Callable[[int, int], None] = lambda done, total: None,
    logged: Callable[[Prompt], str | None] = lambda prompt: None,
    max_tokens: int | None = None,
) -> list[Replayed]:
    """Both replies for every prompt (the baseline's from `logged` where it has one; each at most
    `max_tokens` long where that is shorter than the model's own limit), then the judge's verdicts
    in both orders; in the prompts' order. Every request goes to its engine's lane
    (webui.replay.lanes): every prompt in flight up to each engine's slots, both models' replies
    at once, and each prompt judged as soon as its two replies are in."""
    cancel = cancel or threading.Event()
    lanes = Lanes("replay")
    run = _Run(prompts, {"new": new, "baseline": baseline}, judge, lanes, cancel, on_progress, max_tokens)
    try:
        for i, prompt in enumerate(prompts):
            run.start(i, logged(prompt))
        while not run.all_done.wait(0.5):  # a timed wait: Ctrl-C's handler runs meanwhile
            pass
    finally:
        if not run.all_done.is_set():  # an exception ended the wait: nothing in flight outlives it
            cancel.set()
        lanes.close()
    return [r for r in run.results if r is not None]


JUDGE_FIRST, REPLY = 0, 1  # lane priorities: a judge's question goes before any reply waiting
NO_REPLY = Reply("", "not generated", 0.0)


@dataclass
class _Pending:
    """One prompt on its way: the replies in so far, and the judge's answers."""

    prompt: Prompt
    replies: dict[str, Reply] = field(default_factory=dict)  # "new", "baseline"
    asked: dict[str, Asked] = field(default_factory=dict)  # per order


class _Run:
    """The steps of one replay, run on the engines' lanes; each prompt ends in `results` once."""

    def __init__(
        self,
        prompts: Sequence[Prompt],
        models: dict[str, Backend],
        judge: Judge,
        lanes: Lanes,
        cancel: threading.Event,
        on_progress: Callable[[int, int], None],
        max_tokens: int | None,
    ) -> None:
        self.pending = [_Pending(p) for p in prompts]
        self.results: list[Replayed | None] = [None] * len(prompts)
        self.models, self.judge, self.lanes, self.cancel = models, judge, lanes, cancel
        self.on_progress, self.max_tokens = on_progress, max_tokens
        self.lock = threading.Lock()
        self.finished = 0
        self.all_done = threading.Event()
        if not prompts:
            self.all_done.set()

    def start(self, i: int, reused: str | None) -> None:
        if reused is not None:
            self.pending[i].replies["baseline"] = Reply(reused, None, 0.0, logged=True)
        for side in ("new", "baseline") if reused is None else ("new",):
            self.lanes.submit(self.models[side], (REPLY, i), partial(self._guarded, i, partial(self._reply, i, side)))

    def _guarded(self, i: int, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as exc:  # a step's own failure ends its prompt, never the whole replay
            self._finish(i, f"failed: {exc}")

    def _reply(self, i: int, side: str) -> None:
        item = self.pending[i]
        if self.cancel.is_set():
            reply = Reply("", "stopped", 0.0)
        else:
            reply = generate(self.models[side], item.prompt.text, self.cancel, self.max_tokens)
        with self.lock:
            item.replies[side] = reply
            if len(item.replies) < 2:
                return
        ours, theirs = item.replies["new"], item.replies["baseline"]
        if ours.error or theirs.error:
            self._finish(i, f"a reply failed: {ours.error or theirs.error}")
            return
        self.lanes.submit(self.judge.backend, (JUDGE_FIRST, i), partial(self._guarded, i, partial(self._judge, i)))

    def _judge(self, i: int) -> None:
        item = self.pending[i]
        user = {"role": "user", "content": item.prompt.text}
        battle = Battle(
            "replay",
            {},
            [user, {"role": "assistant", "content": item.replies["new"].text}],
            [user, {"role": "assistant", "content": item.replies["baseline"].text}],
        )
        # The two orders one after the other on one slot, not at once on two: with every slot
        # busy that costs no throughput, and the second question starts with the same
        # instructions and user turns as the first, which an engine's prefix cache may still hold.
        for order in ORDERS:
            try:
                if self.cancel.is_set():
                    raise Cancelled
                item.asked[order] = self.judge.ask(battle, order, self.cancel)
            except Cancelled:
                self._finish(i, "stopped")
                return
            except Exception as exc:  # JudgeFailed, or a refusal before streaming (a prompt too long...)
                self._finish(i, f"the judge failed: {exc}")
                return
        self._finish(i, None)

    def _finish(self, i: int, error: str | None) -> None:
        """The prompt's result: with both orders' answers, or with why it is left out (then no
        verdict of it counts: never judged on half its questions)."""
        item = self.pending[i]
        done = Replayed(item.prompt, item.replies.get("new", NO_REPLY), item.replies.get("baseline", NO_REPLY))
        done.error = error
        if error is None:
            answers = [item.asked[order] for order in ORDERS]
            done.answers = [a.answer for a in answers]
            done.verdicts = [a.as_dict()["verdict"] for a in answers]
            done.judge_seconds = [a.latency_s for a in answers]
        with self.lock:
            if self.results[i] is not None:
                return
            self.results[i] = done
            self.finished += 1
            self.on_progress(self.finished, len(self.results))
            if self.finished == len(self.results):
                self.all_done.set()


@dataclass(frozen=True)
class WinRate:
    value: float
    lower: float
    upper: float
    prompts: int

    def text(self) -> str:
        if not self.prompts:
            return "n/a (no prompt with a verdict)"
        return f"{self.value:.0%} ({self.lower:.0%} to {self.upper:.0%}; {self.prompts} prompts)"


def win_rate(scores: Sequence[float], rounds: int = 1000, seed: int = 0) -> WinRate:
    """The mean score with a percentile-bootstrap 95% interval over prompts."""
    values = np.asarray(scores, dtype=float)
    if not len(values):
        return WinRate(math.nan, math.nan, math.nan, 0)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (rounds, len(values)))].mean(axis=1) if rounds else values[:0]
    lower, upper = (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))) if rounds else (math.nan,) * 2
    return WinRate(float(values.mean()), lower, upper, len(values))


def summary(results: Sequence[Replayed]) -> dict[str, Any]:
    """The report's figures: overall and per category."""
    scored = [(r.prompt.category, r.score) for r in results if r.score is not None]
    overall = win_rate([s for _, s in scored])
    categories = {}
    for name in sorted({c for c, _ in scored}):
        categories[name] = win_rate([s for c, s in scored if c == name])
    return {"overall": overall, "categories": categories}

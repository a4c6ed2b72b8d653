"""A replay: each prompt answered by the new model and the baseline, then judged in both orders.

Guarantees: generation goes through the arena's own engines (each model's own sampling settings,
as visitors get them), as many requests at once as each model's slots; a baseline reply is taken
from the logs instead where `logged` finds one (a battle's reply by what serves the baseline now,
as one more draw from the same model and settings); a reply that fails is
reported and its prompt left out of the figures, never judged on half a reply; nothing is written
to the vote logs or the judge files (the report holds everything); `cancel` stops the requests
in flight.

The figure: for each prompt, the new model's score is its mean over the judge's parsed orders
(a win 1, a tie 0.5, a loss 0); the paired win rate is the mean over prompts, with a 95% interval
from a bootstrap over prompts. 0.5 is no difference.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from webui.engine.base import Backend, collect
from webui.judge.records import ORDERS
from webui.judge.run import Battle, Cancelled, Judge, JudgeFailed
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

    @property
    def score(self) -> float | None:
        """The new model's score on this prompt (None: no parsed verdict)."""
        scores = [SCORE[v] for v in self.verdicts if v in SCORE]
        return sum(scores) / len(scores) if scores else None


def generate(backend: Backend, prompt: str, cancel: threading.Event) -> Reply:
    start = time.monotonic()
    params = backend.default_params()
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
    width: int = 1,
    cancel: threading.Event | None = None,
    on_progress: Callable[[int, int], None] = lambda done, total: None,
    logged: Callable[[Prompt], str | None] = lambda prompt: None,
) -> list[Replayed]:
    """Both replies for every prompt (the baseline's from `logged` where it has one), then the
    judge's verdicts; in the prompts' order."""
    cancel = cancel or threading.Event()
    results: list[Replayed | None] = [None] * len(prompts)
    done = [0]
    lock = threading.Lock()

    def one(i: int) -> None:
        prompt = prompts[i]
        ours = generate(new, prompt.text, cancel)
        reused = logged(prompt)
        theirs = (
            Reply(reused, None, 0.0, logged=True) if reused is not None else generate(baseline, prompt.text, cancel)
        )
        item = Replayed(prompt, ours, theirs)
        if ours.error or theirs.error:
            item.error = f"a reply failed: {ours.error or theirs.error}"
        else:
            _judge(judge, item, cancel)
        results[i] = item
        with lock:
            done[0] += 1
            on_progress(done[0], len(prompts))

    with ThreadPoolExecutor(max_workers=max(1, width), thread_name_prefix="replay") as pool:
        for future in [pool.submit(one, i) for i in range(len(prompts))]:
            future.result()
    return [r for r in results if r is not None]


def _judge(judge: Judge, item: Replayed, cancel: threading.Event) -> None:
    user = {"role": "user", "content": item.prompt.text}
    battle = Battle(
        "replay",
        {},
        [user, {"role": "assistant", "content": item.new.text}],
        [user, {"role": "assistant", "content": item.baseline.text}],
    )
    for order in ORDERS:
        try:
            asked = judge.ask(battle, order, cancel)
        except (JudgeFailed, Cancelled) as exc:
            item.error = f"the judge failed: {exc}" if isinstance(exc, JudgeFailed) else "stopped"
            return
        item.answers.append(asked.answer)
        item.verdicts.append(asked.as_dict()["verdict"])


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

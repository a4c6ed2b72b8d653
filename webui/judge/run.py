"""A judging run: the counted human battle votes a judge has not answered yet, each asked in both
orders, as many at once as the judge's slots, each verdict written the moment both answers are in.

Guarantees:
- **Resumable.** Verdicts already on disk (this judge, this prompt version) are skipped; a verdict
  is one durable line (webui.judge.records), so a run killed at any point and started again
  judges no battle twice and loses none.
- **A failure is not a verdict.** A request that fails (the judge's server down or answering 500,
  a timeout) writes nothing for its battle, which the next run asks again; an answer that cannot be
  parsed is a verdict of its own kind ("unparsed") and is kept.
- **Stop is prompt.** `cancel` (Ctrl-C in the CLI) stops the requests in flight at the judge's
  next token; their battles are left for the next run.
- **Cheap for the arena.** The battles come from the vote index (one catch-up, then each chosen
  vote's own line), never from re-reading every log per verdict.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pandas as pd

from webui.engine.base import Backend
from webui.judge.prompt import JudgePrompt, parse_verdict, verdict_line_end
from webui.judge.records import ORDERS, Asked, VerdictLog, verdict_record, vote_keys
from webui.leaderboard.votes.index import VoteIndex
from webui.leaderboard.votes.rows import counted, drop_reasons
from webui.progress import Progress
from webui.types import Finished, FinishReason, Message, SamplingParams, StreamEvent, TextDelta

T = TypeVar("T")


class JudgeFailed(RuntimeError):
    """A request to the judge failed (not an answer it gave): the battle is left for a later run."""


class Cancelled(RuntimeError):
    pass


@dataclass(frozen=True)
class Battle:
    """One battle vote to judge: what its verdict line says about it, and both conversations."""

    key: str
    about: dict[str, Any]  # battle_id, turn, vote_tstamp, file, offset, model_a, model_b, human winner
    conversation_a: list[dict[str, str]]
    conversation_b: list[dict[str, str]]


def battles_to_judge(
    index: VoteIndex,
    model_names: Sequence[str],
    skip: set[str],
    *,
    since: float | None = None,
    limit: int | None = None,
    progress: Progress | None = None,
) -> list[Battle]:
    """The counted anonymous battle votes in the index (as the board counts them), oldest first,
    without the ones in `skip`, from `since` (a UNIX time) on, at most `limit`; `progress` counts
    the index's catch-up first."""
    index.catch_up(model_names, progress=progress)
    rows = index.rows()
    if rows.empty:
        return []
    rows = counted_rows(rows)
    if since is not None:
        rows = rows[rows["tstamp"] >= since]
    keys = pd.Series(vote_keys(rows), index=rows.index, dtype=object)
    rows = rows[~keys.isin(skip)].sort_values("tstamp", kind="stable")
    chosen: list[Battle] = []
    # Each vote's own line, a few hundred at a time: a limit stops the reading early.
    for start in range(0, len(rows), 500):
        part = rows.iloc[start : start + 500]
        details = index.details(part)
        for (_, row), (_, more) in zip(part.iterrows(), details.iterrows(), strict=True):
            if not more["conversation_a"] or not more["conversation_b"]:
                continue  # the vote's line is not in this folder any more
            chosen.append(_battle(keys[row.name], row, more))
            if limit is not None and len(chosen) >= limit:
                return chosen
    return chosen


def counted_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The vote index's `rows` the board counts by default: no drop reason, anonymous."""
    return counted(rows.assign(drop_reason=drop_reasons(rows, drop_stopped=True)))


def _battle(key: str, row: pd.Series, more: pd.Series) -> Battle:
    about = {
        "vote": key,
        "battle_id": more["battle_id"],
        "turn": int(row["turn"]),
        "vote_tstamp": float(row["tstamp"]),
        "file": row["file"],
        "offset": int(row["offset"]),
        "model_a": row["model_a"],
        "model_b": row["model_b"],
        "human": row["winner"],
    }
    return Battle(key, about, list(more["conversation_a"]), list(more["conversation_b"]))


@dataclass
class Judge:
    """A model of the arena asked for verdicts."""

    name: str
    backend: Backend
    prompt: JudgePrompt
    params: SamplingParams
    fingerprint: str | None = None

    @classmethod
    def greedy(
        cls,
        name: str,
        backend: Backend,
        prompt: JudgePrompt,
        fingerprint: str | None = None,
        max_tokens: int | None = None,
    ) -> Judge:
        """Temperature 0, as Arena-Hard and MT-Bench ask their judges: the same battle, the same
        verdict; at most `max_tokens` per answer (None: the entry's own max_new_tokens)."""
        params = backend.default_params().replace(temperature=0.0, max_new_tokens=max_tokens)
        return cls(name, backend, prompt, params, fingerprint)

    def ask(self, battle: Battle, order: str, cancel: threading.Event) -> Asked:
        shown = (battle.conversation_a, battle.conversation_b)
        if order == "ba":
            shown = shown[::-1]
        text, latency_s = self.answer(self.prompt.messages(*shown), cancel, until=verdict_line_end)
        return Asked(order, text, parse_verdict(text), latency_s)

    def answer(
        self, messages: list[Message], cancel: threading.Event, *, until: Callable[[str], int | None] | None = None
    ) -> tuple[str, float]:
        """The judge's reply to `messages` and the seconds it took; Cancelled when stopped,
        JudgeFailed when the request failed (no answer to keep). With `until`, the reply ends
        where `until(text so far)` first says (the end of a verdict line): the judge is stopped
        there, and what it would write after it is never generated."""
        start = time.monotonic()
        text, final = read_until(self.backend.stream(messages, self.params, cancel), until)
        if cancel.is_set() or (final is not None and final.reason is FinishReason.CANCELLED):
            raise Cancelled
        if final is not None and final.reason is FinishReason.ERROR:
            raise JudgeFailed(final.error or "the judge's request failed")
        return text, time.monotonic() - start


def read_until(events: Iterator[StreamEvent], until: Callable[[str], int | None] | None) -> tuple[str, Finished | None]:
    """The streamed text and its final event; or, as soon as `until(text)` returns an end (it is
    asked after each piece that ends a line), the text up to that end and None, the stream closed
    (which stops the request in flight: webui.engine.base). On a small judge that rambles on after
    its verdict, most of the time an answer took."""
    parts: list[str] = []
    try:
        for event in events:
            if not isinstance(event, TextDelta):
                return "".join(parts), event
            parts.append(event.text)
            if until is not None and "\n" in event.text and (end := until(text := "".join(parts))) is not None:
                return text[:end], None
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    raise RuntimeError("stream ended without a Finished event")


@dataclass
class RunReport:
    chosen: int = 0  # battles this run set out to judge
    judged: int = 0  # verdict lines written
    unparsed: int = 0  # of those, with an order whose answer held no verdict mark
    failed: int = 0  # battles left for a later run: a request failed
    errors: list[str] = field(default_factory=list)  # the distinct failures, in order
    stopped: bool = False


def judge_battles(
    judge: Judge,
    battles: Iterable[Battle],
    log: VerdictLog,
    *,
    workers: int = 1,
    cancel: threading.Event | None = None,
    on_progress: Callable[[RunReport], None] = lambda report: None,
) -> RunReport:
    """Judge `battles` in both orders, `workers` at a time; write each verdict as it completes."""
    return run_each(
        battles,
        lambda battle, stop: _verdict(judge, battle, log.clock, stop),
        log.write,
        lambda record: any(o["mark"] is None for o in record["orders"]),
        workers=workers,
        cancel=cancel,
        on_progress=on_progress,
        name=f"judge:{judge.name}",
    )


def run_each(
    items: Iterable[T],
    work: Callable[[T, threading.Event], dict[str, Any]],
    write: Callable[[dict[str, Any]], None],
    unparsed: Callable[[dict[str, Any]], bool],
    *,
    workers: int = 1,
    cancel: threading.Event | None = None,
    on_progress: Callable[[RunReport], None] = lambda report: None,
    name: str = "judge",
) -> RunReport:
    """`work(item, cancel)` for each item, `workers` at a time, each record `write`n as it
    completes (a verdict, a label): the loop every judging run shares. `work` raises Cancelled
    when stopped and JudgeFailed when a request failed (nothing written, left for a later run)."""
    cancel = cancel or threading.Event()
    pending = list(items)
    report = RunReport(chosen=len(pending))
    width = max(1, workers)
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix=name) as pool:
        running: set[Future[dict[str, Any]]] = set()
        try:
            while running or (pending and not cancel.is_set()):
                while pending and len(running) < width and not cancel.is_set():
                    running.add(pool.submit(work, pending.pop(0), cancel))
                done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    running.discard(future)
                    _settle(future, write, unparsed, report)
                    on_progress(report)
        finally:
            if running:  # an exception (Ctrl-C) ended the loop: nothing in flight outlives it
                cancel.set()
                for future in running:
                    _settle(future, write, unparsed, report)
    report.stopped = bool(pending) or report.judged + report.failed < report.chosen
    return report


def _verdict(judge: Judge, battle: Battle, clock: Callable[[], float], cancel: threading.Event) -> dict[str, Any]:
    asked = [judge.ask(battle, order, cancel) for order in ORDERS]
    return verdict_record(battle.about, judge.name, judge.fingerprint, judge.prompt.version, asked, clock())


def _settle(
    future: Future[dict[str, Any]],
    write: Callable[[dict[str, Any]], None],
    unparsed: Callable[[dict[str, Any]], bool],
    report: RunReport,
) -> None:
    try:
        record = future.result()
    except Cancelled:
        return
    except JudgeFailed as exc:
        report.failed += 1
        if str(exc) not in report.errors:
            report.errors.append(str(exc))
        return
    write(record)
    report.judged += 1
    report.unparsed += unparsed(record)


def agreement_line(records: Iterable[Mapping[str, Any]]) -> str:
    """How often the verdicts written agree with the human vote, for the run's last line: a first
    look only (calibration with intervals is docs/judge.md's next step)."""
    both = [(str(r["verdict"]), str(r.get("human") or "")) for r in records if r.get("verdict")]
    if not both:
        return "no verdict both orders agreed on yet"
    same = sum(v == h or (v.startswith("tie") and h.startswith("tie")) for v, h in both)
    return f"agrees with the human vote on {same} of {len(both)} battles with a consistent verdict"


def slots_of(backend: Backend) -> int:
    """How many requests the model takes at once (its slots; 1 for a backend without)."""
    return int(getattr(getattr(backend, "slots", None), "size", 1) or 1)

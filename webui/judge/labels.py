"""Category labels from a judge: the declared category (or none) of each counted battle vote that
no rule and no visitor's tag places, asked once per vote, kept as records of their own.

Which votes: the counted anonymous battle votes (as the board counts them) whose first prompt no
declared rule matches and whose visitor left no tag (webui.leaderboard.votes.declared.Declared.placed).
A rule is the operator's own word and costs nothing, and a visitor's tag is the voter's: the judge
fills only the gap they leave, so its answers never compete with either.

Guarantees (as the verdicts', webui.judge.records and webui.judge.run):
- **Apart and durable.** `LOG_DIR/YYYY-MM-DD-labels.json` (format: webui.leaderboard.votes.labels),
  one line per labelled vote, appended and fsync'ed before the next is counted; the vote logs are
  never written.
- **Resumable, nothing twice.** Votes this judge labelled with this prompt version (which covers
  the categories offered) are skipped, so a run killed at any point and started again labels no
  vote twice and loses none; a torn last line is skipped by readers, and its vote asked again.
- **Never a guess.** An answer without one declared mark is kept as unparsed (`mark` null) with the
  whole answer, and the board ignores it; a failed request writes nothing.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webui.judge.label_prompt import LabelPrompt
from webui.judge.records import vote_keys
from webui.judge.run import Judge, RunReport, counted_rows, run_each
from webui.leaderboard.votes.declared import Declared, first_prompt
from webui.leaderboard.votes.index import VoteIndex
from webui.leaderboard.votes.labels import LABELS_SUFFIX, NONE, RECORD_TYPE, SCHEMA, read_labels
from webui.progress import Progress
from webui.records.storage import AppendLog, encode

CHUNK = 500  # rows whose log lines are read at a time: a limit stops the reading early


@dataclass(frozen=True)
class Unlabelled:
    """One battle vote to label: what its label line says about it, and its first prompt."""

    key: str
    about: dict[str, Any]  # vote, battle_id, turn, vote_tstamp, file, offset
    prompt: str


def votes_to_label(
    index: VoteIndex,
    model_names: Sequence[str],
    declared: Declared,
    skip: set[str],
    *,
    since: float | None = None,
    limit: int | None = None,
    progress: Progress | None = None,
) -> list[Unlabelled]:
    """The counted anonymous battle votes no rule and no tag places, oldest first, without the
    ones in `skip`, from `since` (a UNIX time) on, at most `limit`."""
    index.catch_up(model_names, progress=progress)
    rows = index.rows()
    if rows.empty:
        return []
    rows = counted_rows(rows)
    if since is not None:
        rows = rows[rows["tstamp"] >= since]
    rows = rows.assign(_key=vote_keys(rows))
    rows = rows[~rows["_key"].isin(skip)].sort_values("tstamp", kind="stable").reset_index(drop=True)
    chosen: list[Unlabelled] = []
    for start in range(0, len(rows), CHUNK):
        part = rows.iloc[start : start + CHUNK].reset_index(drop=True)
        for position, record in index.records(part):
            if record is None or not declared.placed(record)[1]:
                continue  # a line gone, or a vote a rule or a visitor's tag already places
            chosen.append(_unlabelled(part.iloc[position], record))
        if limit is not None and len(chosen) >= limit:
            break
    chosen.sort(key=lambda u: float(u.about["vote_tstamp"]))  # records come file by file
    return chosen[:limit] if limit is not None else chosen


def _unlabelled(row: Any, record: dict[str, Any]) -> Unlabelled:
    battle_id = record.get("battle_id")
    about = {
        "vote": row["_key"],
        "battle_id": battle_id if isinstance(battle_id, str) else None,
        "turn": int(row["turn"]),
        "vote_tstamp": float(row["tstamp"]),
        "file": row["file"],
        "offset": int(row["offset"]),
    }
    return Unlabelled(row["_key"], about, first_prompt(record) or "")


def label_record(
    vote: dict[str, Any],
    judge: Judge,
    prompt: LabelPrompt,
    answer: str,
    latency_s: float,
    tstamp: float,
) -> dict[str, Any]:
    """The line for one labelled vote: `mark` is the declared name, "none", or null (unparsed);
    `category` the name, or null for none and unparsed alike."""
    mark = prompt.parse(answer)
    return {
        "type": RECORD_TYPE,
        "schema": SCHEMA,
        "tstamp": round(tstamp, 3),
        **vote,
        "judge": judge.name,
        "judge_fingerprint": judge.fingerprint,
        "prompt_version": prompt.version,
        "categories": list(prompt.names),
        "answer": answer,
        "mark": mark,
        "category": mark if mark not in (None, NONE) else None,
        "latency_s": round(latency_s, 3),
    }


def labels_file(log_dir: Path, tstamp: float, server: str = "") -> Path:
    day = dt.datetime.fromtimestamp(tstamp, tz=dt.timezone.utc).strftime("%Y-%m-%d")
    return Path(log_dir) / (f"{day}-{server}{LABELS_SUFFIX}" if server else f"{day}{LABELS_SUFFIX}")


def labelled(log_dir: Path, judge: str, prompt_version: str) -> set[str]:
    """The votes this judge has labelled with this prompt (and these categories): a run leaves them alone."""
    return {
        str(r.get("vote"))
        for r in read_labels(log_dir)
        if r.get("judge") == judge and r.get("prompt_version") == prompt_version
    }


class LabelLog:
    """Appends label lines, durable before `write` returns."""

    def __init__(self, log_dir: Path, server: str = "", clock: Callable[[], float] = time.time) -> None:
        self.log_dir, self.server, self.clock = Path(log_dir), server, clock
        self._log = AppendLog()

    def write(self, record: dict[str, Any]) -> None:
        self._log.append(labels_file(self.log_dir, float(record["tstamp"]), self.server), encode(record), durable=True)

    def close(self) -> None:
        self._log.close()


def label_votes(
    judge: Judge,
    prompt: LabelPrompt,
    votes: Sequence[Unlabelled],
    log: LabelLog,
    *,
    workers: int = 1,
    cancel: threading.Event | None = None,
    on_progress: Callable[[RunReport], None] = lambda report: None,
) -> RunReport:
    """Ask `judge` for each vote's category, `workers` at a time; write each label as it completes
    (the report's `judged` counts the labels written)."""

    def ask(vote: Unlabelled, stop: threading.Event) -> dict[str, Any]:
        answer, latency_s = judge.answer(prompt.messages(vote.prompt), stop)
        return label_record(vote.about, judge, prompt, answer, latency_s, log.clock())

    return run_each(
        votes,
        ask,
        log.write,
        lambda record: record["mark"] is None,
        workers=workers,
        cancel=cancel,
        on_progress=on_progress,
        name=f"label:{judge.name}",
    )

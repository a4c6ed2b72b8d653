"""Verdicts on disk: JSON Lines files of their own beside the vote logs, never mixed into them.

`LOG_DIR/YYYY-MM-DD-judge.json` (or `YYYY-MM-DD-NAME-judge.json` for a named server), one line per
judged battle vote, appended and fsync'ed as votes are (webui.records.storage.AppendLog): a run
killed at any moment leaves whole verdicts and at most one torn last line, which readers skip,
so that battle is judged again and none twice. The vote logs' readers look only at `*-conv.json`,
so no human board or FastChat reader ever sees a verdict. Pure builders, an injected clock.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webui.records.storage import AppendLog, encode, iter_lines

if TYPE_CHECKING:
    import pandas as pd

JUDGE_SUFFIX = "-judge.json"
RECORD_TYPE = "judge"
SCHEMA = 1
ORDERS = ("ab", "ba")  # model A's reply shown first, then model B's first
# A mark about the replies as shown -> the battles table's winner, for each order.
WINNER_OF = {
    "ab": {"A": "model_a", "B": "model_b", "tie": "tie", "bothbad": "tie (bothbad)"},
    "ba": {"A": "model_b", "B": "model_a", "tie": "tie", "bothbad": "tie (bothbad)"},
}


@dataclass(frozen=True)
class Asked:
    """One order's question and answer."""

    order: str  # "ab" or "ba"
    answer: str  # the judge's whole reply, as it came
    mark: str | None  # the parsed mark (webui.judge.prompt.parse_verdict); None: unparsed
    latency_s: float

    def as_dict(self) -> dict[str, Any]:
        winner = WINNER_OF[self.order].get(self.mark) if self.mark else None
        return {
            "order": self.order,
            "answer": self.answer,
            "mark": self.mark,
            "verdict": winner,
            "latency_s": round(self.latency_s, 3),
        }


def vote_key(file: str, offset: int) -> str:
    """Which vote a verdict is about: the vote's place in its log file. Logs are append-only, so
    the place is stable, and every log has one (FastChat's have no battle ids)."""
    return f"{file}@{int(offset)}"


def vote_keys(rows: pd.DataFrame) -> list[str]:
    """`vote_key` of each of the vote index's `rows` (its file and offset columns), in order."""
    return [vote_key(file, offset) for file, offset in zip(rows["file"], rows["offset"], strict=True)]


def verdict_record(
    vote: dict[str, Any],
    judge: str,
    fingerprint: str | None,
    prompt_version: str,
    asked: Sequence[Asked],
    tstamp: float,
) -> dict[str, Any]:
    """The line for one judged vote. `vote`: its key, battle id, turn, time and models."""
    orders = [a.as_dict() for a in asked]
    verdicts = [o["verdict"] for o in orders]
    parsed = [v for v in verdicts if v is not None]
    consistent = (len(set(parsed)) == 1) if len(parsed) == len(verdicts) else None
    return {
        "type": RECORD_TYPE,
        "schema": SCHEMA,
        "tstamp": round(tstamp, 3),
        **vote,
        "judge": judge,
        "judge_fingerprint": fingerprint,
        "prompt_version": prompt_version,
        "orders": orders,
        # the verdict both orders agree on; None where they differ or one is unparsed
        "verdict": parsed[0] if consistent else None,
        "consistent": consistent,
    }


def judge_file(log_dir: Path, tstamp: float, server: str = "") -> Path:
    day = dt.datetime.fromtimestamp(tstamp, tz=dt.timezone.utc).strftime("%Y-%m-%d")
    return Path(log_dir) / (f"{day}-{server}{JUDGE_SUFFIX}" if server else f"{day}{JUDGE_SUFFIX}")


def judge_files(log_dir: Path) -> list[Path]:
    folder = Path(log_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith(JUDGE_SUFFIX) and p.is_file())


def read_verdicts(log_dir: Path) -> Iterator[dict[str, Any]]:
    """Every whole verdict line in the folder's judge files (torn and unreadable lines skipped)."""
    for path in judge_files(log_dir):
        for status, record in iter_lines(path.read_bytes()):
            if status == "ok" and record is not None and record.get("type") == RECORD_TYPE:
                yield record


def judged(log_dir: Path, judge: str, prompt_version: str) -> set[str]:
    """The votes this judge has answered with this prompt: a run leaves them alone."""
    return {
        str(r.get("vote"))
        for r in read_verdicts(log_dir)
        if r.get("judge") == judge and r.get("prompt_version") == prompt_version
    }


class VerdictLog:
    """Appends verdict lines, durable before `write` returns."""

    def __init__(self, log_dir: Path, server: str = "", clock: Callable[[], float] = time.time) -> None:
        self.log_dir, self.server, self.clock = Path(log_dir), server, clock
        self._log = AppendLog()

    def write(self, record: dict[str, Any]) -> None:
        self._log.append(judge_file(self.log_dir, float(record["tstamp"]), self.server), encode(record), durable=True)

    def write_many(self, records: Iterable[dict[str, Any]]) -> None:
        """Many lines at once, one durable append per file (a simulation, not a judging run, whose
        verdicts each cost a model's answer and are kept one by one)."""
        lines: dict[Path, list[bytes]] = {}
        for record in records:
            lines.setdefault(judge_file(self.log_dir, float(record["tstamp"]), self.server), []).append(encode(record))
        for path, encoded in lines.items():
            self._log.append(path, b"".join(encoded), durable=True)

    def close(self) -> None:
        self._log.close()

"""The people's votes on a replay's queued pairs beside the judge's verdicts on the same pairs.

A replay run with `--queue K` puts K judged pairs before people as blind battles
(webui.records.prepared); its report's `queued` part lists the pairs' ids and the judge's verdicts
on each (per order, in the battles table's words, the new model as model_a). A vote on such a pair
is an ordinary battle vote whose `extra` names the pair (`prepared`). This module finds those votes
and measures the judge's agreement with them (webui.leaderboard.stats.agreement: with and without
ties, Cohen's kappa, position consistency).

Guarantees: it only reads (reports, vote logs); the vote logs are scanned in chunks and only the
lines that hold the bytes `"prepared"` are parsed (a vote on a prepared pair holds that key; any
other line is skipped unread), so a folder of a million votes with a few queued pairs costs a read
of the files, not a parse of every line; a torn last line (a vote being written) is left for the
next look. Each vote is one row: a pair voted on twice (two servers at once) counts twice. A vote
on a reply that was stopped is left out, as the board leaves it out, and counted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from webui.judge.calibration import kappa_text
from webui.leaderboard.stats.agreement import Agreement, agreement, outcome
from webui.leaderboard.votes.ingest import parse, read_chunk
from webui.leaderboard.votes.rows import vote_row
from webui.records.prepared import PREPARED_KEY
from webui.records.storage import log_files

MARK = b'"' + PREPARED_KEY.encode() + b'"'  # the key, quoted: "prepared_source" does not hold it
SWAPPED = {"model_a": "model_b", "model_b": "model_a"}


class NoQueuedPairs(ValueError):
    """No report with queued pairs where one was looked for (the message says where)."""


@dataclass(frozen=True)
class QueuedAgreement:
    report: Path
    model: str  # the new model (model_a of the verdicts)
    baseline: str
    judge: str
    prompt_version: str
    pairs: int  # queued
    voted: int  # of them, with at least one vote counted
    votes: int  # votes counted (a pair may have more than one)
    stopped: int  # votes left out: a reply was stopped before the vote
    strange: int  # votes left out: their sides do not name the new model and the baseline once each
    new_share: float  # the people's mean score for the new model (a win 1, a tie 0.5); nan with no vote
    figures: Agreement


def queued_reports(folder: Path) -> list[Path]:
    """The replay reports (`*.json`) in `folder` that have a `queued` part, oldest first."""
    if not folder.is_dir():
        return []
    return [path for path in sorted(folder.glob("*.json")) if _has_queue(path)]


def _has_queue(path: Path) -> bool:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(report, dict) and bool((report.get("queued") or {}).get("pairs"))


def load_report(path: Path) -> dict[str, Any]:
    """A replay report with queued pairs; NoQueuedPairs saying why where it is not one."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise NoQueuedPairs(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise NoQueuedPairs(f"{path} is not a replay report (not JSON: {exc})") from None
    queued = report.get("queued") if isinstance(report, dict) else None
    if not isinstance(queued, dict) or not queued.get("pairs"):
        raise NoQueuedPairs(f"{path} has no queued pairs: it was not run with --queue K")
    pairs, verdicts = queued.get("pairs"), queued.get("verdicts")
    if not (
        isinstance(pairs, list)
        and isinstance(verdicts, list)
        and len(pairs) == len(verdicts)
        and all(isinstance(v, list) for v in verdicts)
    ):
        raise NoQueuedPairs(f"{path}: its queued part does not give one list of verdicts per pair")
    if not isinstance(report.get("model"), str):
        raise NoQueuedPairs(f"{path} does not name its new model")
    return report


def votes_on(log_dir: Path, pair_ids: Collection[str]) -> list[dict[str, Any]]:
    """The vote records in `log_dir`'s vote logs whose `extra` names one of `pair_ids`, in log order."""
    wanted = set(pair_ids)
    found: list[dict[str, Any]] = []
    for path in log_files(log_dir):
        with path.open("rb") as handle:
            offset = 0
            while True:
                data, at_end = read_chunk(handle, offset)
                whole = data.rfind(b"\n") + 1  # past the chunk's last whole line
                found += _marked_votes(data, whole, wanted)
                if at_end or not whole:
                    break
                offset += whole
    return found


def _marked_votes(data: bytes, whole: int, wanted: set[str]) -> list[dict[str, Any]]:
    """The records of the lines in data[:whole] that hold MARK and name a wanted pair."""
    found = []
    hit = data.find(MARK, 0, whole)
    while hit >= 0:
        start, end = data.rfind(b"\n", 0, hit) + 1, data.find(b"\n", hit)
        record = parse(data[start:end])
        extra = record.get("extra") if record is not None else None
        if record is not None and isinstance(extra, dict) and extra.get(PREPARED_KEY) in wanted:
            found.append(record)
        hit = data.find(MARK, end + 1, whole)
    return found


def new_models_outcome(row: dict[str, Any] | None, new: str, baseline: str) -> str | None:
    """The winner of a vote's index row (webui.leaderboard.votes.rows.vote_row) with the new model
    as model_a (model_a, model_b, tie, tie (bothbad)); None for what is no battle vote, or one
    whose sides are not the new model and the baseline."""
    if row is None or outcome(row["winner"]) is None:
        return None
    sides = (row["model_a"], row["model_b"])
    if sides == (new, baseline):
        return str(row["winner"])
    if sides == (baseline, new):
        return SWAPPED.get(str(row["winner"]), str(row["winner"]))
    return None


def queued_agreement(report_path: Path, log_dir: Path, rounds: int = 200) -> QueuedAgreement:
    """The judge's agreement with the people's votes on one report's queued pairs."""
    report = load_report(report_path)
    new, baseline = str(report["model"]), str(report.get("baseline") or "")
    queued = report["queued"]
    verdicts = {str(p): list(v) for p, v in zip(queued["pairs"], queued["verdicts"], strict=True)}
    rows, voted = [], set()
    stopped = strange = 0
    for record in votes_on(log_dir, verdicts):
        row = vote_row(record)
        if row is not None and row["stopped"]:
            stopped += 1
            continue
        human = new_models_outcome(row, new, baseline)
        if human is None:
            strange += 1
            continue
        pair = str(record["extra"][PREPARED_KEY])
        voted.add(pair)
        by_order = [*verdicts[pair], None, None]
        rows.append({"pair": pair, "human": human, "verdict_ab": by_order[0], "verdict_ba": by_order[1]})
    table = pd.DataFrame(rows, columns=["pair", "human", "verdict_ab", "verdict_ba"])
    scores = [{"model_a": 1.0, "model_b": 0.0}.get(str(outcome(h)), 0.5) for h in table["human"]]
    return QueuedAgreement(
        report=report_path,
        model=new,
        baseline=baseline,
        judge=str(report.get("judge") or "the judge"),
        prompt_version=str(report.get("prompt_version") or "?"),
        pairs=len(verdicts),
        voted=len(voted),
        votes=len(table),
        stopped=stopped,
        strange=strange,
        new_share=sum(scores) / len(scores) if scores else math.nan,
        figures=agreement(table, rounds=rounds),
    )


def report_lines(q: QueuedAgreement) -> list[str]:
    a = q.figures
    lines = [
        f"Replay {q.report.stem}: {q.model} against {q.baseline}, judged by {q.judge} (prompt {q.prompt_version})",
        f"  queued pairs             {q.pairs}: {q.voted} with a counted vote, {q.pairs - q.voted} without one yet",
    ]
    left_out = []
    if q.stopped:
        left_out.append(f"{q.stopped} with a stopped reply")
    if q.strange:
        left_out.append(f"{q.strange} not between {q.model} and {q.baseline}")
    lines.append(f"  people's votes on them   {q.votes}" + (f" (left out: {', '.join(left_out)})" if left_out else ""))
    if not q.votes:
        lines.append("  no vote on these pairs yet: people find them in the Battle tab (❓ A prepared question)")
        return lines
    lines += [
        f"  people's score for {q.model}: {q.new_share:.0%} (a win 1, a tie 0.5; 50%: no difference)",
        f"  agreement with ties      {a.with_ties.text()}",
        f"  agreement without ties   {a.without_ties.text()}",
        f"  Cohen's kappa            {kappa_text(a)}",
        f"  position consistency     {a.consistency.text()}",
    ]
    return lines

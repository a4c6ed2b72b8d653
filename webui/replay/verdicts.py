"""A replay's verdicts as judgments for the composite board: battles no person voted on.

Each replay report (`LOG_DIR/replays/*.json`, written by `python -m webui.replay`) holds, per
prompt, the judge's verdict in each order on the new model's reply (model_a) against the
baseline's (model_b). For the composite (webui.leaderboard.stats.composite) each parsed order is one
judgment, as a verdict on a logged battle is; unlike those, nobody voted on these pairs, so they
say something about the new model that the human votes do not (docs/judge.md).

Guarantees: it only reads; a report that is not JSON, not a replay report, or by another judge or
prompt version is passed over (and counted), never half read; a prompt left out of the report's
figures (a reply or the judge failed) gives no judgment, nor does an unparsed order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from webui.leaderboard.stats.agreement import outcome

FOLDER = "replays"  # under the log folder, where `python -m webui.replay` writes its reports
COLUMNS = ["model_a", "model_b", "winner"]


@dataclass(frozen=True)
class Replayed:
    judgments: pd.DataFrame  # model_a (the new model), model_b (the baseline), winner: one row per parsed order
    reports: int  # read, by this judge with this prompt version
    passed_over: int  # unreadable, or not a replay report


def replayed_judgments(folder: Path, judge: str, prompt_version: str) -> Replayed:
    """The judgments of `judge` (prompt `prompt_version`) in the replay reports of `folder`."""
    rows: list[tuple[str, str, str]] = []
    reports = passed_over = 0
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        report = _report(path)
        if report is None:
            passed_over += 1
        elif report.get("judge") == judge and report.get("prompt_version") == prompt_version:
            reports += 1
            rows += _judgments(report)
    return Replayed(pd.DataFrame(rows, columns=COLUMNS), reports, passed_over)


def _report(path: Path) -> dict[str, Any] | None:
    """The report at `path`, or None where it is not one (unreadable, not JSON, missing parts)."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict) or not isinstance(report.get("results"), list):
        return None
    if not all(isinstance(report.get(key), str) for key in ("model", "baseline", "judge", "prompt_version")):
        return None
    return report


def _judgments(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    new, baseline = report["model"], report["baseline"]
    found = []
    for result in report["results"]:
        if not isinstance(result, dict) or result.get("error") or not isinstance(result.get("verdicts"), list):
            continue
        found += [(new, baseline, v) for v in result["verdicts"] if isinstance(v, str) and outcome(v) is not None]
    return found

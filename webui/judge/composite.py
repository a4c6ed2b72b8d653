"""The composite board from the command line and the tab: the counted human votes of the vote
index, a judge's verdicts on them and its verdicts in replay reports (pairs nobody voted on), in
one fit (webui.leaderboard.stats.composite has the method)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from webui.judge.calibration import verdict_table
from webui.judge.records import vote_keys
from webui.judge.run import counted_rows
from webui.leaderboard.stats.agreement import ORDER_COLUMNS, outcome
from webui.leaderboard.stats.composite import FRESH, VOTE, AutoWeight, auto_weight, composite_board
from webui.leaderboard.votes.index import VoteIndex
from webui.replay.verdicts import Replayed, replayed_judgments


@dataclass(frozen=True)
class Composite:
    weight: float
    auto: AutoWeight | None  # how `auto` chose, when asked to
    table: pd.DataFrame
    replayed: int = 0  # of the judgments, those from replay reports
    replayed_weight: float = 0.0  # what each of those weighs


def human_battles(rows: pd.DataFrame) -> pd.DataFrame:
    """The counted anonymous battle votes of the vote index's `rows`, as the board counts them,
    each with its key (VOTE: what a verdict about it names)."""
    if rows.empty:
        return pd.DataFrame(columns=["model_a", "model_b", "winner", VOTE])
    counted = counted_rows(rows)
    return counted[["model_a", "model_b", "winner"]].assign(**{VOTE: vote_keys(counted)})


def judged_battles(verdicts: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per parsed judgment (each order of each verdict), in the battles table's words, with
    the key of the vote it is about (VOTE)."""
    table = verdict_table(verdicts)
    parts = [table[["model_a", "model_b", "vote"]].assign(winner=table[column]) for column in ORDER_COLUMNS]
    judged = pd.concat(parts, ignore_index=True)
    return judged[[outcome(w) is not None for w in judged["winner"]]].reset_index(drop=True)


def composite(
    verdicts: Iterable[Mapping[str, Any]], rows: pd.DataFrame, weight: float | str, replayed: Replayed | None = None
) -> Composite:
    """`verdicts` on logged battles and, where given, a replay's judgments (battles nobody voted on),
    beside `rows`' human votes. A weight given applies to both; `auto` chooses each (stats.composite)."""
    human, judged = human_battles(rows), judged_battles(verdicts).assign(**{FRESH: False})
    extra = replayed.judgments if replayed is not None else judged.iloc[:0]
    if len(extra):
        judged = pd.concat([judged, extra.assign(**{FRESH: True})], ignore_index=True)
    chosen = auto_weight(human, judged) if weight == "auto" else None
    w = chosen.weight if chosen is not None else float(weight)
    fresh_w = chosen.fresh_weight if chosen is not None else w
    return Composite(w, chosen, composite_board(human, judged, w, fresh_w), len(extra), fresh_w)


def composite_lines(judge: str, c: Composite) -> list[str]:
    lines = [f"Composite board: a human vote weighs 1, a verdict of {judge} weighs {c.weight:g}{_how(c.auto)}"]
    if c.replayed:
        lines.append(
            f"(and {c.replayed:,} judgments from replay reports, pairs nobody voted on, each weighing {c.replayed_weight:g})"
        )
    shown = c.table.assign(
        rating=c.table["rating"].round().astype(int),
        note=["provisional (judge)" if p else "" for p in c.table["provisional"]],
    ).drop(columns=["provisional"])
    lines += shown.to_string(index=False).splitlines() if len(shown) else ["(no model has a rating yet)"]
    return lines


def _how(auto: AutoWeight | None) -> str:
    """How `auto` chose its weight, in words; empty for a weight given."""
    if auto is None:
        return ""
    if auto.scale is None:
        return " (auto: too few human votes, or no verdicts, to weigh the judge by)"
    if not auto.scale.shows_signal:
        return (
            f" (auto: the judge's verdicts do not follow the people's ratings: its scale {auto.scale.text()} "
            "is not clearly above 0)"
        )
    tried = ", ".join(f"{w:g}: {loss:.4f}" for w, loss in auto.log_loss.items())
    return (
        f" (auto: its scale {auto.scale.text()}; the weight whose fit best predicts held-out human votes, "
        f"log-loss by weight {tried})"
    )


def composite_markdown(
    verdicts: Iterable[Mapping[str, Any]], index: VoteIndex, weight: float | str, replays: Path | None = None
) -> str:
    """The Leaderboard tab's composite board: the most recent judge's (with its prompt) and its
    verdicts in the replay reports of `replays`, or why none."""
    newest: dict[tuple[str, str], float] = {}
    records = list(verdicts)
    for r in records:
        key = (str(r.get("judge")), str(r.get("prompt_version")))
        stamp = r.get("tstamp")
        newest[key] = max(newest.get(key, 0.0), float(stamp) if isinstance(stamp, (int, float)) else 0.0)
    if not newest:
        return "No judge has judged the battles here yet, so there is no composite board (docs/judge.md)."
    judge, version = max(newest, key=lambda k: newest[k])
    chosen = [r for r in records if (r.get("judge"), r.get("prompt_version")) == (judge, version)]
    replayed = replayed_judgments(replays, judge, version) if replays is not None else None
    lines = composite_lines(judge, composite(chosen, index.rows(), weight, replayed))
    return (
        f"The human votes and the verdicts of **{judge}** (prompt {version}) in one fit; the board above stays "
        "human-only.\n\n```\n" + "\n".join(lines) + "\n```"
    )

"""A judge's agreement with the people who voted, from its verdict lines and the vote index:
overall and per category (webui.leaderboard.stats.agreement has the figures and their method)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from webui.judge.records import vote_keys
from webui.leaderboard.stats.agreement import Agreement, BoardAgreement, agreement, as_shown, board_agreement, outcome
from webui.leaderboard.stats.categories import category_masks
from webui.leaderboard.stats.position import PositionTerm, position_term
from webui.leaderboard.votes.index import VoteIndex

MIN_CATEGORY_BATTLES = 10  # fewer, and a category's figures are mostly interval


@dataclass(frozen=True)
class Calibration:
    judge: str
    prompt_version: str
    overall: Agreement
    board: BoardAgreement
    categories: pd.DataFrame  # category, battles, with ties, without ties, kappa
    people_position: PositionTerm  # the left pane's advantage in the people's votes
    judge_position: PositionTerm  # the first-shown reply's advantage in the judge's verdicts


def verdict_table(verdicts: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per verdict line: vote, models, the human vote and each order's verdict."""
    rows = []
    for record in verdicts:
        orders = {o.get("order"): o.get("verdict") for o in record.get("orders") or () if isinstance(o, dict)}
        rows.append(
            {
                "vote": record.get("vote"),
                "model_a": record.get("model_a"),
                "model_b": record.get("model_b"),
                "human": record.get("human"),
                "verdict_ab": orders.get("ab"),
                "verdict_ba": orders.get("ba"),
            }
        )
    return pd.DataFrame(rows, columns=["vote", "model_a", "model_b", "human", "verdict_ab", "verdict_ba"])


def calibrate(
    verdicts: Iterable[Mapping[str, Any]], rows: pd.DataFrame, judge: str, prompt_version: str, rounds: int = 200
) -> Calibration:
    """The judge's figures; `rows`: the vote index's (VoteIndex.rows), for the categories."""
    table = verdict_table(verdicts).drop_duplicates("vote", keep="last")
    if len(rows):
        rows = rows.assign(vote=vote_keys(rows)).drop_duplicates("vote", keep="last")
        with_rows = table.merge(rows[["vote", "turn", "language", "coding", "long_prompt"]], on="vote", how="inner")
    else:
        with_rows = table.iloc[0:0]
    per_category = []
    if len(with_rows):
        for name, mask in category_masks(with_rows).items():
            part = with_rows[mask.to_numpy(bool)]
            if len(part) >= MIN_CATEGORY_BATTLES:
                figures = agreement(part, rounds=rounds)
                per_category.append(
                    {
                        "category": name,
                        "battles": len(part),
                        "with ties": figures.with_ties.value,
                        "without ties": figures.without_ties.value,
                        "kappa": figures.kappa,
                    }
                )
    return Calibration(
        judge,
        prompt_version,
        agreement(table, rounds=rounds),
        board_agreement(table, rounds=rounds),
        pd.DataFrame(per_category, columns=["category", "battles", "with ties", "without ties", "kappa"]),
        position_term(_people(table)),
        position_term(as_shown(table)),
    )


def _people(table: pd.DataFrame) -> pd.DataFrame:
    people = pd.DataFrame({"model_a": table["model_a"], "model_b": table["model_b"], "winner": table["human"]})
    people = people[[outcome(w) is not None for w in people["winner"]]]
    return people.assign(tstamp=np.arange(len(people), dtype=float))


def kappa_text(a: Agreement) -> str:
    """Cohen's kappa with its bootstrap interval where there is one."""
    if math.isnan(a.kappa):
        return "n/a"
    return f"{a.kappa:.2f}" + ("" if math.isnan(a.kappa_lower) else f" ({a.kappa_lower:.2f} to {a.kappa_upper:.2f})")


def report_lines(c: Calibration) -> list[str]:
    a, b = c.overall, c.board
    kappa = kappa_text(a)
    lines = [
        f"Judge {c.judge} (prompt {c.prompt_version}) on {a.battles} battles with a human vote, both orders asked:",
        f"  agreement with ties      {a.with_ties.text()}",
        f"  agreement without ties   {a.without_ties.text()}",
        f"  Cohen's kappa            {kappa}",
        f"  position consistency     {a.consistency.text()}",
        f"  unparsed answers         {a.unparsed.text()}",
    ]
    if math.isnan(b.spearman):
        lines.append(f"  judge's board vs people's: too few models rated by both ({b.models}) for a rank correlation")
    else:
        interval = "" if math.isnan(b.lower) else f" ({b.lower:.2f} to {b.upper:.2f})"
        lines.append(f"  judge's board vs people's: Spearman {b.spearman:.2f}{interval} over {b.models} models")
    for above, below in b.discordant[:10]:
        lines.append(f"    ordered differently: people put {above} above {below}, the judge below")
    lines.append(f"  position: the left reply's edge with people   {c.people_position.text()}")
    lines.append(f"            the first reply's edge with the judge {c.judge_position.text()}")
    if len(c.categories):
        lines.append(f"By category (at least {MIN_CATEGORY_BATTLES} battles):")
        shown = c.categories.copy()
        for column in ("with ties", "without ties"):
            shown[column] = [("n/a" if math.isnan(v) else f"{v:.0%}") for v in shown[column]]
        shown["kappa"] = [("n/a" if math.isnan(v) else f"{v:.2f}") for v in shown["kappa"]]
        lines += ["  " + line for line in shown.to_string(index=False).splitlines()]
    return lines


NO_VERDICTS = (
    "No judge has judged the battles here yet. A judge is any model of the models file: "
    "`python -m webui.judge LOGDIR --judge NAME` asks it about the battles people voted on "
    "(docs/judge.md); its agreement with the votes then shows here."
)
SHOWN_SERIES = 3  # the judges (with their prompts) most recently used, newest first


def agreement_markdown(verdicts: Iterable[Mapping[str, Any]], index: VoteIndex, rounds: int = 100) -> str:
    """The Leaderboard tab's "Agreement" section: each recent judge's figures, as the CLI prints them."""
    series: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    newest: dict[tuple[str, str], float] = {}
    for record in verdicts:
        key = (str(record.get("judge")), str(record.get("prompt_version")))
        series.setdefault(key, []).append(record)
        stamp = record.get("tstamp")
        newest[key] = max(newest.get(key, 0.0), float(stamp) if isinstance(stamp, (int, float)) else 0.0)
    if not series:
        return NO_VERDICTS
    parts = []
    rows = index.rows()  # once for every judge shown
    for key in sorted(series, key=lambda k: newest[k], reverse=True)[:SHOWN_SERIES]:
        lines = report_lines(calibrate(series[key], rows, key[0], key[1], rounds=rounds))
        parts.append("```\n" + "\n".join(lines) + "\n```")
    return "\n\n".join(parts)

"""Ratings over time: Bradley-Terry refitted on the first k battles, for growing k.

It shows how a model's rating settled as votes came in, and when a newcomer entered. Each point
is a full fit on everything up to that battle (not an online update), so the last point is the
table's rating. Pure pandas.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from webui.leaderboard.ratings import bradley_terry

HISTORY_COLUMNS = ("battles", "tstamp", "model", "rating")
DEFAULT_POINTS = 20


def cut_points(total: int, points: int = DEFAULT_POINTS) -> list[int]:
    """`points` battle counts spread evenly up to `total` (fewer when there are fewer battles)."""
    if total <= 0 or points <= 0:
        return []
    return sorted({int(round(x)) for x in np.linspace(total / points, total, points) if round(x) > 0})


def ratings_over_time(battles: pd.DataFrame, points: int = DEFAULT_POINTS,
                      reference: list[str] | None = None) -> pd.DataFrame:
    """Long table: one row per (cut point, model seen so far) with the rating at that point. With
    `reference` (the table's ranked models), each fit puts their mean at 1000 as the table does,
    and only they are listed: a preliminary model's line would only squash the others'."""
    ordered = battles.sort_values("tstamp", kind="stable").reset_index(drop=True)
    rows = []
    for k in cut_points(len(ordered), points):
        upto = ordered.iloc[:k]
        present = [m for m in reference or [] if m in set(upto["model_a"]).union(upto["model_b"])]
        rating = bradley_terry(upto, reference=present or None)
        if reference:
            rating = rating[rating.index.isin(reference)]
        stamp = float(upto["tstamp"].iloc[-1])
        rows += [{"battles": k, "tstamp": stamp, "model": m, "rating": float(r)} for m, r in rating.items()]
    return pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))


def wide(history: pd.DataFrame) -> pd.DataFrame:
    """One row per cut point, one column per model (for printing and CSV)."""
    if history.empty:
        return pd.DataFrame(columns=["battles"])
    table = history.pivot_table(index="battles", columns="model", values="rating", aggfunc="first")
    return table.reset_index().rename_axis(columns=None)

"""Ratings over time: Bradley-Terry refitted on the first k battles, for growing k.

It shows how a model's rating settled as votes came in, and when a newcomer entered. Each point
is a full fit on everything up to that battle (not an online update), so the last point is the
table's rating. Pure pandas.

The battles are coded once, in time order; each cut adds the outcome counts of the battles since
the last one and fits on those counts, so a cut costs a fit on a few hundred numbers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from webui.leaderboard.stats.battle_codes import Coded, Grouped, encode, grouped_keys
from webui.leaderboard.stats.bradley_terry import bt_ratings

HISTORY_COLUMNS = ("battles", "tstamp", "model", "rating")
DEFAULT_POINTS = 20


def cut_points(total: int, points: int = DEFAULT_POINTS) -> list[int]:
    """`points` battle counts spread evenly up to `total` (fewer when there are fewer battles)."""
    if total <= 0 or points <= 0:
        return []
    return sorted({round(x) for x in np.linspace(total / points, total, points) if round(x) > 0})


def ratings_over_time(
    battles: pd.DataFrame, points: int = DEFAULT_POINTS, reference: list[str] | None = None, coded: Coded | None = None
) -> pd.DataFrame:
    """Long table: one row per (cut point, model seen so far) with the rating at that point. With
    `reference` (the table's ranked models), each fit puts their mean at 1000 as the table does,
    and only they are listed: a preliminary model's line would only squash the others'. (`coded`:
    the battles, encoded.)"""
    order = np.argsort(battles["tstamp"].to_numpy(float), kind="stable")
    coded = (coded or encode(battles)).take(order)
    stamps = battles["tstamp"].to_numpy(float)[order]
    keys, size = coded.keys(), 3 * len(coded.models) ** 2
    counts, done, rows = np.zeros(size, dtype=np.int64), 0, []
    for k in cut_points(len(order), points):
        counts += np.bincount(keys[done:k], minlength=size)  # the outcome counts of the first k battles
        done = k
        rating = _prefix_ratings(counts, coded.models, reference)
        rows += [
            {"battles": k, "tstamp": float(stamps[k - 1]), "model": m, "rating": float(r)} for m, r in rating.items()
        ]
    return pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))


def _prefix_ratings(counts: np.ndarray, models: list[str], reference: list[str] | None) -> pd.Series:
    """`bradley_terry` of the battles whose outcome counts are `counts` (keys of `Coded.keys`),
    fitted over the models they involve only, centred on the `reference` models among them."""
    n = len(models)
    per_pair = counts.reshape(n, n, 3).sum(axis=2)
    played = per_pair.sum(axis=0) + per_pair.sum(axis=1) > 0
    seen = [m for m, p in zip(models, played, strict=True) if p]
    index = np.cumsum(played) - 1  # a model's index among the ones seen
    g = grouped_keys(counts, models)
    g = Grouped(seen, index[g.outcomes], g.score, g.weight)
    present = [m for m in reference or [] if m in set(seen)]
    rating = bt_ratings(g, reference=present or None)
    return rating[rating.index.isin(reference)] if reference else rating


def wide(history: pd.DataFrame) -> pd.DataFrame:
    """One row per cut point, one column per model (for printing and CSV)."""
    if history.empty:
        return pd.DataFrame(columns=["battles"])
    table = history.pivot_table(index="battles", columns="model", values="rating", aggfunc="first")
    return table.reset_index().rename_axis(columns=None)

"""Battles tables with known ratings, no log: for the statistics' own checks and benches.

`bt_battles` plays uniformly drawn pairs at true Bradley-Terry ratings. `category_battles`
simulates categories with true ratings of their own: each model's rating in a category is its
overall one (webui.leaderboard.simulate's `TRUE`) plus a normal difference (`CATEGORY_SPREAD`),
for the check that a declared category's board shrunk toward the overall one is nearer the truth
than the category's own fit (tests/unit/leaderboard/votes/test_declared_categories.py,
bench/votes/categories.py). Each takes its own random draws: the log that
webui.leaderboard.simulate writes is not changed by them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from webui.db.columns import DECLARED_PREFIX
from webui.leaderboard.simulate import CATEGORY_SPREAD, START, TIE_SHARE, TRUE


def bt_battles(
    rng: np.random.Generator, models: Sequence[str], truth: np.ndarray, count: int, tie_share: float = TIE_SHARE
) -> list[tuple[str, str, str]]:
    """`count` battles (model_a, model_b, winner) between uniformly drawn pairs of `models`, won by
    the Bradley-Terry probabilities of the true ratings `truth` (Elo scale), a tie with
    probability `tie_share` whatever the pair."""
    rows = []
    for _ in range(count):
        a, b = rng.choice(len(models), size=2, replace=False)
        p = 1 / (1 + 10 ** ((truth[b] - truth[a]) / 400))
        roll = rng.random()
        winner = "tie" if roll < tie_share else "model_a" if rng.random() < p else "model_b"
        rows.append((models[a], models[b], winner))
    return rows


def category_battles(
    seed: int, per_category: Sequence[int], overall: int = 4000, spread: float = CATEGORY_SPREAD
) -> tuple[pd.DataFrame, dict[str, dict[str, float]]]:
    """A battles table (model_a, model_b, winner, tstamp, and a `DECLARED_PREFIX + name` column per
    category) and each category's true ratings (name -> model -> rating, the models' mean 1000).
    `overall` battles fall outside every category, played at the overall ratings (`TRUE`); category
    i holds `per_category[i]` battles, played at its own ratings. Its own random draws: the log that
    `simulate` writes is not changed by it."""
    rng = np.random.default_rng(seed)
    models = list(TRUE)
    base = np.array([TRUE[m] for m in models])
    truths = {"": base}
    for i in range(len(per_category)):
        truths[f"cat{i}"] = base + rng.normal(0.0, spread, size=len(models))
    rows = []
    for name, count in [("", overall), *((f"cat{i}", n) for i, n in enumerate(per_category))]:
        rows += [(*row, name) for row in bt_battles(rng, models, truths[name], count)]
    battles = pd.DataFrame(rows, columns=["model_a", "model_b", "winner", "category"])
    battles["tstamp"] = START + np.arange(len(battles), dtype=float)
    for i in range(len(per_category)):
        battles[f"{DECLARED_PREFIX}cat{i}"] = battles["category"] == f"cat{i}"
    truth_out = {
        name: dict(zip(models, (t - t.mean() + 1000.0).tolist(), strict=True)) for name, t in truths.items() if name
    }
    return battles.drop(columns="category"), truth_out

"""The ratings table: Bradley-Terry ratings with their intervals and ranks, online Elo beside
them, and each model's record. Pure pandas/numpy.


A battles frame has columns model_a, model_b, winner ("model_a", "model_b", "tie", "tie (bothbad)")
and tstamp. Ties of either kind count as half a win for each side. Ratings are on the familiar Elo

The pieces have modules of their own: battles as numbers (`battle_codes`), the fit and its
intervals (`bradley_terry`), online Elo (`elo`), the scale (`scale`).

Models with fewer battles than a minimum are *preliminary*: the bootstrap cannot describe them
(every resample of "lost both battles" is again "lost both battles", rated wherever the ridge
puts it), so their interval is a likelihood-ratio interval instead, open-ended on a side the data
cannot bound, and they take no rank. docs/leaderboard.md says why.
"""

from __future__ import annotations

import functools
import math

import pandas as pd

from webui.leaderboard.stats import confidence
from webui.leaderboard.stats.battle_codes import Coded, Grouped, encode, grouped_records
from webui.leaderboard.stats.bradley_terry import bootstrap_grouped, bt_ratings, intervals, likelihood_grouped
from webui.leaderboard.stats.elo import ELO_K, elo_of, time_order
from webui.leaderboard.stats.scale import BASE, SCALE

TABLE_COLUMNS = (
    "rank",
    "model",
    "rating",
    "lower",
    "upper",
    "rank_worst",  # with `rank`, the ranks the model's interval allows (its rank range)
    "elo",
    "battles",
    "wins",
    "ties",
    "losses",
    "preliminary",
    *confidence.NEXT_COLUMNS,
)


def ranks(lower: pd.Series, upper: pd.Series) -> pd.Series:
    """1 + the number of models whose whole interval lies above this model's interval."""
    return pd.Series({m: 1 + int((lower > upper[m]).sum()) for m in upper.index}, name="rank")


def worst_ranks(lower: pd.Series, upper: pd.Series) -> pd.Series:
    """The lowest rank a model's interval allows: 1 + the number of other models whose interval
    reaches above its lower end (every one that is not surely below it). With `ranks`, the range
    lmarena publishes as rank (UB) to rank (LB)."""
    return pd.Series(
        {m: int((upper.drop(index=m) > lower[m]).sum()) + 1 for m in upper.index}, name="rank_worst", dtype=int
    )


def leaderboard(
    battles: pd.DataFrame,
    rounds: int = 200,
    seed: int = 0,
    k: float = ELO_K,
    min_battles: int = 0,
    coded: Coded | None = None,
) -> pd.DataFrame:
    """The table: one row per model, ranked models first, then the preliminary ones (fewer than
    `min_battles` battles: likelihood-ratio interval, no rank). Without bootstrap rounds the
    interval is the point. (`coded`: the battles, encoded.)"""
    if battles.empty:
        return pd.DataFrame(columns=list(TABLE_COLUMNS))
    coded = coded or encode(battles)
    return grouped_table(coded.grouped(), elo_of(coded, time_order(battles), k=k), rounds, seed, min_battles)


def grouped_table(g: Grouped, elo: pd.Series, rounds: int = 200, seed: int = 0, min_battles: int = 0) -> pd.DataFrame:
    """`leaderboard` of grouped outcomes and the online Elo of the same battles: nothing here
    reads a battle, so its cost depends on the models, not on how many battles there were."""
    columns = list(TABLE_COLUMNS)
    if not g.models:
        return pd.DataFrame(columns=columns)
    counts = grouped_records(g)
    preliminary = counts["battles"] < min_battles
    few = list(preliminary[preliminary].index)
    reference = list(preliminary[~preliminary].index) or None  # the scale's mean: the established models
    rating = bt_ratings(g, reference=reference)
    se = None
    if rounds > 0:
        samples = bootstrap_grouped(g, rounds, seed, reference=reference)
        bounds, se = intervals(samples), functools.partial(confidence.se_from_samples, samples)
        if few:
            bounds.loc[few] = likelihood_grouped(g, few, reference=reference)
    else:
        bounds = pd.DataFrame({"lower": rating, "upper": rating})
    table = pd.concat([rating, bounds, elo.rename("elo"), counts], axis=1)
    table["preliminary"] = preliminary
    ranked = table[~table["preliminary"]]
    table["rank"] = ranks(ranked["lower"], ranked["upper"]).reindex(table.index).astype("Int64")
    table["rank_worst"] = worst_ranks(ranked["lower"], ranked["upper"]).reindex(table.index).astype("Int64")
    table = table.rename_axis("model").reset_index()
    table = table.sort_values(["preliminary", "rank", "rating"], ascending=[True, True, False], na_position="last")
    table = table.reset_index(drop=True)
    order = list(table.loc[~table["preliminary"], "model"])
    pairs = confidence.neighbours(order, rating, se, SCALE / math.log(BASE))
    table[list(confidence.NEXT_COLUMNS)] = confidence.next_columns(table["model"], pairs)
    return table[columns]

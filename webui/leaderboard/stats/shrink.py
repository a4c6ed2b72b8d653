"""A category's board shrunk toward the overall board, so that a category of 40 battles does not
swing wildly.

The prior (stated, not fitted): a model's rating in a category is its overall rating plus a
difference drawn from a normal distribution of standard deviation `prior_sd` (Elo points, default
PRIOR_SD). The category's own fit gives its rating r_c with standard error s_c (the bootstrap
interval's width / 3.92); the overall board gives r_o with s_o. The posterior mean and its
standard deviation (a normal-normal combination, what a Gaussian penalty on r_c - r_o in the
Bradley-Terry fit gives to first order):

    w       = prior_sd² / (prior_sd² + s_c²)          the weight of the category's own figure
    shrunk  = r_o + w · (r_c + offset - r_o)
    sd      = sqrt(w · s_c² + (1 - w)² · s_o²)         interval: shrunk ± 1.96 sd

`offset` puts the category's scale on the overall one (a Bradley-Terry fit fixes only differences;
each board sets its mean model at 1000): the mean of r_o - r_c over the category's models, weighted
by 1/s_c². A model with an open interval (few battles) has w = 0: its overall rating stands.
A category with many battles per model has s_c small, w near 1, and keeps its own figures. Ranks
and rank ranges follow the shrunk intervals; P(above next) and the battles to separate are left
empty (they were the category's own fit's); the style-controlled columns stay the category's own.
Pure: tables in, a table out.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from webui.leaderboard.stats.confidence import NEXT_COLUMNS
from webui.leaderboard.stats.ratings import ranks, worst_ranks

PRIOR_SD = 50.0  # Elo points: how far a model's rating in one category is expected to be from its overall one
Z = 1.959963984540054  # the 95% interval's half-width in standard deviations
SHRINK_COLUMNS = ("rating (own)", "weight (own)")  # the category's unshrunk rating (aligned), and w above


def standard_errors(table: pd.DataFrame) -> pd.Series:
    """Each row's standard error from its 95% interval (inf where the interval is open or missing)."""
    width = (table["upper"].astype(float) - table["lower"].astype(float)).to_numpy()
    se = np.where(np.isfinite(width), width / (2 * Z), np.inf)
    return pd.Series(se, index=table.index)


def shrink(category: pd.DataFrame, overall: pd.DataFrame, prior_sd: float = PRIOR_SD) -> pd.DataFrame:
    """The category's table (ratings.TABLE_COLUMNS) with ratings and intervals shrunk toward the
    overall table's, ranks and rank ranges worked out again from the shrunk intervals, and the
    SHRINK_COLUMNS added; rows in the order of their shrunk ratings (ranked rows first).
    `prior_sd` 0 or less: no shrinkage (w = 1)."""
    if category.empty:
        return category.assign(**{c: pd.Series(dtype=float) for c in SHRINK_COLUMNS})
    table = category.copy()
    own = table["rating"].astype(float)
    se_c = standard_errors(table)
    by_model = overall.set_index("model")
    r_o = table["model"].map(by_model["rating"]).astype(float)
    se_o = table["model"].map(standard_errors(overall).set_axis(overall["model"])).astype(float).fillna(0.0)
    if prior_sd <= 0:
        return table.assign(**{SHRINK_COLUMNS[0]: own, SHRINK_COLUMNS[1]: 1.0})
    common = r_o.notna()
    known = common & np.isfinite(se_c) & (se_c > 0)
    if known.any():
        inverse = 1.0 / se_c[known] ** 2
        offset = float(((r_o[known] - own[known]) * inverse).sum() / inverse.sum())
    else:  # every interval open (a handful of battles): their plain mean
        offset = float((r_o[common] - own[common]).mean()) if common.any() else 0.0
    # an open interval (se inf) gives w = 0; a model the overall board lacks keeps its own figure
    w = (prior_sd**2 / (prior_sd**2 + se_c**2)).where(r_o.notna(), 1.0)
    aligned = own + offset
    shrunk = (r_o + w * (aligned - r_o)).where(r_o.notna(), aligned)
    sd = np.sqrt(w * np.where(np.isfinite(se_c), se_c, 0.0) ** 2 + (1 - w) ** 2 * se_o**2)
    table["rating"] = shrunk
    table["lower"], table["upper"] = shrunk - Z * sd, shrunk + Z * sd
    open_ended = r_o.isna() & ~np.isfinite(se_c)  # no overall rating to lean on: the category's own open interval
    table.loc[open_ended, ["lower", "upper"]] = category.loc[open_ended, ["lower", "upper"]].to_numpy() + offset
    table[SHRINK_COLUMNS[0]], table[SHRINK_COLUMNS[1]] = aligned, w
    # P(above next) and the battles to separate were the category's own fit's, about its own order
    table[list(NEXT_COLUMNS)] = np.nan
    return _ranked(table)


def _ranked(table: pd.DataFrame) -> pd.DataFrame:
    """Ranks and rank ranges from the (shrunk) intervals, over the rows that are not preliminary."""
    preliminary = table["preliminary"].astype(bool)
    ranked = table[~preliminary].set_index("model")
    table["rank"] = table["model"].map(ranks(ranked["lower"], ranked["upper"])).astype("Int64")
    table["rank_worst"] = table["model"].map(worst_ranks(ranked["lower"], ranked["upper"])).astype("Int64")
    table = table.assign(_p=preliminary).sort_values(
        ["_p", "rating"], ascending=[True, False], kind="stable", na_position="last"
    )
    return table.drop(columns="_p").reset_index(drop=True)


def shrink_line(table: pd.DataFrame, prior_sd: float = PRIOR_SD) -> str:
    """A sentence saying that a board is shrunk, and by how much."""
    if prior_sd <= 0:
        return "Not shrunk toward the overall board (--category-prior-sd 0): each rating is the category's own."
    if table.empty or SHRINK_COLUMNS[1] not in table:
        return ""
    w = table[SHRINK_COLUMNS[1]].astype(float)
    moved = (table["rating"].astype(float) - table[SHRINK_COLUMNS[0]].astype(float)).abs()
    most = float(moved.max()) if len(moved) else 0.0
    return (
        f"Shrunk toward the overall board (a normal prior of sd {prior_sd:g} Elo around each model's overall "
        f"rating): the category's own figures weigh {_share(w.min())}–{_share(w.max())} of each rating "
        f"(median {_share(float(w.median()))}); the largest move is {most:.0f} points. "
        "Each row keeps the category's own figure and its weight beside it."
    )


def _share(w: float) -> str:
    return "0%" if not math.isfinite(w) else f"{100 * w:.0f}%"

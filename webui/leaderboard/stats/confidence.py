"""Rank confidence: how sure the board is of each neighbouring pair's order, and which battles
would make it surer. Pure numpy/pandas, on the Elo scale the ratings use.

For two neighbours, i above j, with rating difference d and its standard error se: from the
bootstrap rounds for the raw ratings (`se_from_samples`: their fit gives no covariance), from the
covariance where the fit gives one, as the style fit's sandwich does (`se_from_covariance`:
var d = var i + var j - 2 cov(i, j)). In log-odds, x = d ln 10 / 400 and s = se ln 10 / 400.

- **P(order right)** = Phi(d / se), the normal approximation of the estimate's sampling
  distribution. It reaches 0.975 exactly when d is significant at 95% (two-sided, z = 1.96).
- **More battles to separate them at 95%**: one more battle between i and j adds p(1 - p),
  p = sigmoid(x), to the Fisher information of the difference, and information adds
  (Sherman-Morrison: adding n p(1 - p) (e_i - e_j)(e_i - e_j)^T to the fit's information matrix
  makes 1 / s^2 grow by exactly n p(1 - p)). So, if d stays where it is,
  n = ((1.96 / x)^2 - 1 / s^2) / (p (1 - p)), rounded up; 0 when already significant, infinite
  when d is 0. docs/leaderboard.md works an example.
- **Gain per battle**: how much one more battle between them raises P(order right), if d stays:
  P(n) = Phi(x sqrt(1 / s^2 + n p(1 - p))), so dP/dn at n = 0 is phi(z) x p(1 - p) s / 2 with
  z = x / s. Small for a pair already sure (phi(z) is small) and for a level pair (x is small:
  battles do not separate models that are equal).

The most useful next comparison is the unsure neighbouring pair (P below 0.975) with the largest
gain per battle: the battle that raises the board's expected number of rightly ordered pairs the
most. Not simply the least sure pair: that is often two models so level that no practical number
of battles separates them (hundreds of thousands), where a battle is all but wasted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np
import pandas as pd

from webui.leaderboard.stats.fingerprints import SEPARATOR

LEVEL = 0.95
Z = NormalDist().inv_cdf((1.0 + LEVEL) / 2.0)
SURE = (1.0 + LEVEL) / 2.0  # P(order right) at which the difference is significant at LEVEL
PAIR_COLUMNS = ("upper", "lower", "difference", "se", "p_order", "more_battles", "gain")
NEXT_COLUMNS = ("p_above_next", "more_battles_next", "gain_next")  # on the upper model's row of the board


def order_probability(difference: np.ndarray, se: np.ndarray) -> np.ndarray:
    """Phi(difference / se); NaN where the standard error is unknown (NaN)."""
    difference, se = np.asarray(difference, float), np.asarray(se, float)
    with np.errstate(divide="ignore", invalid="ignore"):  # se 0: the sign decides; 0 / 0: a coin toss
        z = np.where(se > 0, difference / se, np.sign(difference) * np.inf)
    p = np.vectorize(NormalDist().cdf, otypes=[float])(np.nan_to_num(z, nan=0.0))
    return np.where(np.isnan(se), np.nan, p)


def battles_to_separate(difference: np.ndarray, se: np.ndarray, points_per_log_odds: float) -> np.ndarray:
    """About how many more battles between the two would make `difference` significant at 95%
    (the module docstring's formula): 0 if it already is, inf if the difference is 0, NaN where
    the standard error is unknown."""
    x = np.abs(np.asarray(difference, float)) / points_per_log_odds
    variance = (np.asarray(se, float) / points_per_log_odds) ** 2
    p = 1.0 / (1.0 + np.exp(-x))
    with np.errstate(divide="ignore", invalid="ignore"):
        needed = np.where(x > 0, (Z / x) ** 2, np.inf)  # the information the difference needs
        have = np.where(variance > 0, 1.0 / variance, np.inf)
        n = np.ceil(np.maximum(needed - have, 0.0) / (p * (1.0 - p)))
    n = np.where(np.isinf(needed), np.inf, n)
    return np.where(np.isnan(variance), np.nan, n)


def se_from_samples(samples: pd.DataFrame, upper: list[str], lower: list[str]) -> np.ndarray:
    """The standard error of each difference upper - lower from bootstrap rounds (a column per
    model, NaN where a model sat a round out): the spread of the rounds' differences between their
    2.5% and 97.5% quantiles over 2 x 1.96. For normal draws that is the standard deviation; unlike
    it, a few wild rounds (all of a young pair's battles drawn one way) do not blow it up, and it
    matches the board's percentile intervals."""
    spread = [
        (samples[i] - samples[j]).dropna().quantile([(1.0 - LEVEL) / 2.0, (1.0 + LEVEL) / 2.0])
        for i, j in zip(upper, lower, strict=True)
    ]
    return np.array([(q.iloc[1] - q.iloc[0]) / (2.0 * Z) if len(q.dropna()) == 2 else np.nan for q in spread], float)


def se_from_covariance(covariance: pd.DataFrame, upper: list[str], lower: list[str]) -> np.ndarray:
    """The standard error of each difference upper - lower: sqrt(var i + var j - 2 cov(i, j))."""
    c = covariance
    variance = [c.at[i, i] + c.at[j, j] - 2.0 * c.at[i, j] for i, j in zip(upper, lower, strict=True)]
    return np.sqrt(np.clip(np.array(variance, float), 0.0, None))


def gain_per_battle(difference: np.ndarray, se: np.ndarray, points_per_log_odds: float) -> np.ndarray:
    """How much one more battle between the two raises P(order right) (the module docstring's
    derivative): 0 for a level pair or a certain one, NaN where the standard error is unknown."""
    x = np.abs(np.asarray(difference, float)) / points_per_log_odds
    sd = np.asarray(se, float) / points_per_log_odds
    p = 1.0 / (1.0 + np.exp(-x))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd > 0, x / sd, np.inf)
        density = np.exp(-0.5 * z**2) / math.sqrt(2.0 * math.pi)
        gain = np.where(np.isfinite(z), density * x * p * (1.0 - p) * sd / 2.0, 0.0)
    return np.where(np.isnan(sd), np.nan, gain)


def neighbours(
    order: list[str],
    rating: pd.Series,
    se: Callable[[list[str], list[str]], np.ndarray] | None,
    points_per_log_odds: float,
) -> pd.DataFrame:
    """One row per neighbouring pair of `order` (the board's ranked models, top first):
    `PAIR_COLUMNS`. `se` gives the differences' standard errors (`se_from_samples`,
    `se_from_covariance`); without it (no bootstrap rounds) se, p_order and more_battles are NaN."""
    upper, lower = order[:-1], order[1:]
    difference = np.array([rating[i] - rating[j] for i, j in zip(upper, lower, strict=True)], dtype=float)
    errors = se(upper, lower) if se is not None and upper else np.full(len(upper), np.nan)
    return pd.DataFrame(
        {
            "upper": upper,
            "lower": lower,
            "difference": difference,
            "se": errors,
            "p_order": order_probability(difference, errors),
            "more_battles": battles_to_separate(difference, errors, points_per_log_odds),
            "gain": gain_per_battle(difference, errors, points_per_log_odds),
        },
        columns=list(PAIR_COLUMNS),
    )


def next_columns(models: pd.Series, pairs: pd.DataFrame) -> pd.DataFrame:
    """`NEXT_COLUMNS` for the board's rows (`models`): each pair's numbers on its upper model's
    row; NaN on the last ranked model and the preliminary ones."""
    by_upper = pairs.set_index("upper")
    return pd.DataFrame(
        {
            "p_above_next": models.map(by_upper["p_order"]).astype(float),
            "more_battles_next": models.map(by_upper["more_battles"]).astype(float),
            "gain_next": models.map(by_upper["gain"]).astype(float),
        },
        index=models.index,
    )


def next_comparison(table: pd.DataFrame) -> str:
    """One sentence naming the comparison that would most improve the ranking now (the module
    docstring says which), from a board table with `NEXT_COLUMNS`; "" where there is none to name."""
    if table.empty or "p_above_next" not in table:
        return ""
    rows = table.reset_index(drop=True)
    known = rows[rows["p_above_next"].notna()]
    if known.empty:
        return ""
    unsure = known[known["p_above_next"] < SURE]
    if unsure.empty:
        return f"Every neighbouring pair of ranked models is in a sure order (P(order right) ≥ {SURE}, 95%)."
    # Two rows of one model (the fingerprints of its old and new weights) never meet in a battle.
    served = rows["model"].map(lambda row: str(row).rpartition(SEPARATOR)[0] or str(row))
    unsure = unsure[[served[i] != served[i + 1] for i in unsure.index]]
    if unsure.empty:
        return ""
    best = unsure.sort_values(["gain_next", "p_above_next"], ascending=[False, True], kind="stable").index[0]
    upper, lower = rows.at[best, "model"], rows.at[best + 1, "model"]  # neighbours: the next row down
    more = rows.at[best, "more_battles_next"]
    battles = (
        "no number of battles would separate them (equal ratings)"
        if math.isinf(more)
        else f"about {int(more):,} more battles between them would separate them at 95%"
    )
    return (
        f"Most useful next comparison: {upper} vs {lower} (P(order right) = {rows.at[best, 'p_above_next']:.2f}, "
        f"the largest gain per battle of the unsure neighbours; {battles})."
    )

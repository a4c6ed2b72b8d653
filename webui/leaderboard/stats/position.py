"""Does the side a reply is shown on win it votes? Bradley-Terry with a position term:

    logit P(the first-shown reply wins) = theta_first - theta_second + gamma

For people, "first" is the left pane (model A: sides are drawn at random in every battle); for a
judge, the reply shown as assistant A in each order. gamma is on the Elo scale (400 points: 10x the
odds), with a 95% interval from the fit's curvature (the observed information); ties count half.
A voter or judge without a position bias has gamma about 0. Pure numpy/pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from webui.leaderboard.stats import newton
from webui.leaderboard.stats.battle_codes import encode
from webui.leaderboard.stats.bradley_terry import RIDGE
from webui.leaderboard.stats.confidence import Z
from webui.leaderboard.stats.scale import BASE, SCALE


@dataclass(frozen=True)
class PositionTerm:
    points: float  # the first-shown reply's advantage, Elo points; nan with no battles
    lower: float
    upper: float
    battles: int

    def text(self) -> str:
        if not self.battles:
            return "n/a (no battles)"
        if math.isnan(self.points):
            return f"n/a (cannot be told apart from the models' strengths; {self.battles} battles)"
        return f"{self.points:+.0f} Elo points ({self.lower:+.0f} to {self.upper:+.0f}; {self.battles} battles)"


def position_line(term: PositionTerm) -> str:
    """The board's line about its people's votes (the left pane shown first)."""
    return (
        f"Position: the left reply's edge {term.text()}; sides are drawn at random in every battle, so "
        "an interval around 0 means voters do not favour a side."
    )


def position_term(battles: pd.DataFrame, ridge: float = RIDGE, max_iter: int = 100) -> PositionTerm:
    """`battles`: model_a shown first, model_b second, winner in the battles table's words."""
    if battles.empty:
        return PositionTerm(math.nan, math.nan, math.nan, 0)
    try:
        return _fit(battles, ridge, max_iter)
    except np.linalg.LinAlgError:
        return PositionTerm(math.nan, math.nan, math.nan, len(battles))


def _fit(battles: pd.DataFrame, ridge: float, max_iter: int) -> PositionTerm:
    # on the distinct (first, second, score) outcomes and their counts: as cheap at a million battles
    # as at a thousand
    g = encode(battles).grouped()
    n = len(g.models)
    a, b, s, w = g.outcomes[:, 0], g.outcomes[:, 1], g.score, g.weight
    params = np.zeros(n + 1)  # the models' strengths, then gamma
    # the same weak ridge on gamma: where a model is always on one side, gamma and its strength cannot
    # be told apart, and the fit stays finite (with an interval as wide as that ignorance)
    penalty = np.full(n + 1, ridge)

    def objective(x: np.ndarray) -> float:
        z = x[a] - x[b] + x[n]
        return float(np.sum(w * (s * z - np.logaddexp(0.0, z))) - 0.5 * np.sum(penalty * x * x))

    def derivatives(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = 1.0 / (1.0 + np.exp(-(x[a] - x[b] + x[n])))
        residual = w * (s - p)
        grad = np.r_[np.bincount(a, residual, n) - np.bincount(b, residual, n), residual.sum()] - penalty * x
        return grad, _information(a, b, w * p * (1 - p), n) + np.diag(penalty)

    params = newton.maximise(objective, derivatives, params, tol=1e-10, max_iter=max_iter)
    p = 1.0 / (1.0 + np.exp(-(params[a] - params[b] + params[n])))
    covariance = np.linalg.inv(_information(a, b, w * p * (1 - p), n) + np.diag(penalty))
    to_points = SCALE / math.log(BASE)
    gamma, se = params[n] * to_points, math.sqrt(max(covariance[n, n], 0.0)) * to_points
    return PositionTerm(float(gamma), float(gamma - Z * se), float(gamma + Z * se), len(battles))


def _information(a: np.ndarray, b: np.ndarray, curvature: np.ndarray, n: int) -> np.ndarray:
    """The negative Hessian of the log-likelihood in (theta, gamma)."""
    info = np.zeros((n + 1, n + 1))
    np.add.at(info, (a, a), curvature)
    np.add.at(info, (b, b), curvature)
    np.add.at(info, (a, b), -curvature)
    np.add.at(info, (b, a), -curvature)
    by_a, by_b = np.bincount(a, curvature, n), np.bincount(b, curvature, n)
    info[:n, n] = info[n, :n] = by_a - by_b
    info[n, n] = curvature.sum()
    return info

"""Bradley-Terry ratings from battles, with bootstrap and likelihood-ratio intervals. Pure pandas/numpy.

Bradley-Terry is fitted by maximum likelihood with Newton's method on the aggregated pair counts.
A very weak ridge penalty keeps the fit finite when a model has won (or lost) every battle and
ties the ratings of separate groups of models to a common mean; with any real amount of data it
moves ratings by far less than a point. The intervals are percentile-bootstrap intervals from
resampling whole battles, seeded so that the same logs always give the same table; a round in
which a model has no battle says nothing about it and is left out of that model's interval.

For a model with few battles the bootstrap cannot describe (every resample of "lost both
battles" is again "lost both battles", rated wherever the ridge puts it), the likelihood-ratio
interval instead (`likelihood_intervals`), open-ended on a side the data cannot bound.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np
import pandas as pd

from webui.leaderboard.stats import newton
from webui.leaderboard.stats.battle_codes import Grouped, encode
from webui.leaderboard.stats.scale import BASE, INIT, SCALE

RIDGE = 1e-3  # penalty on log-odds ratings; see the module docstring
LR_LIMIT = 12.0  # log-odds (about 2,100 points) from the estimate: beyond it a bound is open (-inf/inf)


def fit_bt(
    outcomes: np.ndarray,
    score: np.ndarray,
    weight: np.ndarray,
    n_models: int,
    ridge: float = RIDGE,
    tol: float = 1e-10,
    max_iter: int = 100,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Log-odds strengths maximising sum w * [s log p + (1 - s) log(1 - p)] - ridge/2 |theta|^2,
    p = sigmoid(theta_a - theta_b), by `newton.maximise` (the objective is strictly concave, so this
    finds the optimum).
    `start` (a fit on nearly the same data) saves most of the steps."""
    a, b = outcomes[:, 0], outcomes[:, 1]

    def derivatives(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = 1.0 / (1.0 + np.exp(theta[b] - theta[a]))
        residual = weight * (score - p)
        grad = np.bincount(a, residual, n_models) - np.bincount(b, residual, n_models) - ridge * theta
        curvature = weight * p * (1.0 - p)
        hess = np.diag(np.bincount(a, curvature, n_models) + np.bincount(b, curvature, n_models) + ridge)
        np.add.at(hess, (a, b), -curvature)
        np.add.at(hess, (b, a), -curvature)
        return grad, hess

    return newton.maximise(
        lambda theta: _bt_objective(theta, a, b, score, weight, ridge),
        derivatives,
        np.zeros(n_models) if start is None else start,
        tol=tol,
        max_iter=max_iter,
    )


def fit_bt_many(
    outcomes: np.ndarray,
    score: np.ndarray,
    weights: np.ndarray,
    n_models: int,
    ridge: float = RIDGE,
    tol: float = 1e-10,
    max_iter: int = 100,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """`fit_bt` for each row of `weights` (rounds x outcomes) at once: the same Newton steps with
    the same backtracking, as arrays over the rounds (one row of strengths per round). A step
    counts as no worse within the objective's rounding (relative 1e-12), so that rounds already
    at the optimum do not halve their step twenty times over noise."""
    rounds, k = weights.shape
    design = np.zeros((k, n_models))
    np.add.at(design, (np.arange(k), outcomes[:, 0]), 1.0)
    np.add.at(design, (np.arange(k), outcomes[:, 1]), -1.0)
    theta = np.zeros((rounds, n_models)) if start is None else np.tile(start, (rounds, 1))
    objective = _bt_objectives(theta, design, score, weights, ridge)
    active = np.arange(rounds)
    for _ in range(max_iter):
        if not len(active) or not n_models:
            break
        t, w = theta[active], weights[active]
        p = 1.0 / (1.0 + np.exp(-(t @ design.T)))
        grad = (w * (score - p)) @ design - ridge * t
        hess = np.matmul((w * p * (1.0 - p))[:, None, :] * design.T, design) + ridge * np.eye(n_models)
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        size, candidate = np.ones(len(active)), t + step
        new = _bt_objectives(candidate, design, score, w, ridge)
        slack = 1e-12 * (1.0 + np.abs(objective[active]))
        while (bad := (new < objective[active] - slack) & (size >= 1e-6)).any():
            size[bad] /= 2
            candidate[bad] = t[bad] + size[bad, None] * step[bad]
            new[bad] = _bt_objectives(candidate[bad], design, score, w[bad], ridge)
        theta[active], objective[active] = candidate, new
        active = active[np.max(np.abs(size[:, None] * step), axis=1) >= tol]
    return theta


def _bt_objectives(
    theta: np.ndarray, design: np.ndarray, score: np.ndarray, weights: np.ndarray, ridge: float
) -> np.ndarray:
    """`_bt_objective` of each row of `theta` with the weights of the same row."""
    diff = theta @ design.T  # s log p + (1 - s) log(1 - p) = s diff - log(1 + e^diff)
    return np.sum(weights * (score * diff - np.logaddexp(0.0, diff)), axis=1) - 0.5 * ridge * np.sum(theta**2, axis=1)


def _bt_objective(
    theta: np.ndarray, a: np.ndarray, b: np.ndarray, score: np.ndarray, weight: np.ndarray, ridge: float
) -> float:
    diff = theta[a] - theta[b]
    # log sigmoid(x) = -log(1 + exp(-x)), computed without overflow
    log_p, log_q = -np.logaddexp(0.0, -diff), -np.logaddexp(0.0, diff)
    return float(np.sum(weight * (score * log_p + (1.0 - score) * log_q)) - 0.5 * ridge * theta @ theta)


def _to_scale(theta: np.ndarray, scale: float, base: float, init: float) -> np.ndarray:
    return init + theta * scale / math.log(base)


def _centred(theta: np.ndarray, models: list[str], reference: list[str] | None) -> np.ndarray:
    """Shift so that the reference models average 0. The fit already centres all models; a
    model with a handful of battles, all lost, sits wherever the ridge puts it and would drag
    everyone's mean (and, between bootstrap rounds, everyone's intervals) with it."""
    if not reference:
        return theta
    index = [models.index(m) for m in reference if m in models]
    return theta - theta[index].mean() if index else theta


def bradley_terry(
    battles: pd.DataFrame,
    scale: float = SCALE,
    base: float = BASE,
    init: float = INIT,
    reference: list[str] | None = None,
) -> pd.Series:
    """Maximum-likelihood Bradley-Terry ratings on the Elo scale, mean `init` (over `reference`
    when given, else over all models)."""
    return bt_ratings(encode(battles).grouped(), scale, base, init, reference)


def bt_ratings(
    g: Grouped, scale: float = SCALE, base: float = BASE, init: float = INIT, reference: list[str] | None = None
) -> pd.Series:
    """`bradley_terry` of grouped outcomes."""
    if not g.models:
        return pd.Series(dtype=float, name="rating")
    theta = _centred(fit_bt(g.outcomes, g.score, g.weight, len(g.models)), g.models, reference)
    return pd.Series(_to_scale(theta, scale, base, init), index=g.models, name="rating")


def bootstrap_bt(
    battles: pd.DataFrame,
    rounds: int,
    seed: int = 0,
    scale: float = SCALE,
    base: float = BASE,
    init: float = INIT,
    reference: list[str] | None = None,
) -> pd.DataFrame:
    """Ratings refitted on `rounds` resamples of the battles (drawn with replacement): one row per
    round; NaN for a model with no battle in that round."""
    return bootstrap_grouped(encode(battles).grouped(), rounds, seed, scale, base, init, reference)


def bootstrap_grouped(
    g: Grouped,
    rounds: int,
    seed: int = 0,
    scale: float = SCALE,
    base: float = BASE,
    init: float = INIT,
    reference: list[str] | None = None,
) -> pd.DataFrame:
    """`bootstrap_bt` of grouped outcomes: each round draws the battles' outcome counts at once
    (a multinomial over the distinct outcomes), so its cost does not grow with the battles."""
    models, outcomes, score, weight = g.models, g.outcomes, g.score, g.weight
    rng = np.random.default_rng(seed)
    total = int(weight.sum())
    draws = rng.multinomial(total, weight / total, size=rounds) if total else np.zeros((rounds, 0))
    draws = draws.astype(float)
    theta = fit_bt_many(outcomes, score, draws, len(models))
    if reference:
        index = [models.index(m) for m in reference if m in models]
        theta = theta - theta[:, index].mean(axis=1, keepdims=True) if index else theta
    rating = _to_scale(theta, scale, base, init)
    involved = np.zeros((len(outcomes), len(models)))
    involved[np.arange(len(outcomes)), outcomes[:, 0]] = involved[np.arange(len(outcomes)), outcomes[:, 1]] = 1.0
    present = draws @ involved > 0
    return pd.DataFrame(np.where(present, rating, np.nan), columns=models)  # no battle in a round: no information


def intervals(samples: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Percentile intervals per model: columns lower, upper."""
    tail = (1.0 - level) / 2
    return pd.DataFrame({"lower": samples.quantile(tail), "upper": samples.quantile(1.0 - tail)})


def likelihood_intervals(
    battles: pd.DataFrame,
    which: list[str],
    level: float = 0.95,
    scale: float = SCALE,
    base: float = BASE,
    init: float = INIT,
    reference: list[str] | None = None,
) -> pd.DataFrame:
    """Likelihood-ratio intervals for the models in `which`: every rating at which their own
    battles, against the others held at their estimates, keep the log-likelihood within
    chi2(1, level) / 2 of its maximum. -inf / inf where the data cannot bound a side (a model that
    lost, or won, every battle). Holding the others ignores their uncertainty, which for a model
    with a handful of battles is small beside its own (and lets one unbounded model not unbound
    every other one through the mean)."""
    return likelihood_grouped(encode(battles).grouped(), which, level, scale, base, init, reference)


def likelihood_grouped(
    g: Grouped,
    which: list[str],
    level: float = 0.95,
    scale: float = SCALE,
    base: float = BASE,
    init: float = INIT,
    reference: list[str] | None = None,
) -> pd.DataFrame:
    """`likelihood_intervals` of grouped outcomes."""
    models, outcomes, score, weight = g.models, g.outcomes, g.score, g.weight
    raw = fit_bt(outcomes, score, weight, len(models))
    a, b = outcomes[:, 0], outcomes[:, 1]
    best = _bt_objective(raw, a, b, score, weight, RIDGE)
    shift = raw - _centred(raw, models, reference)  # report on the same scale as the ratings
    critical = NormalDist().inv_cdf((1.0 + level) / 2.0) ** 2

    def deviance(index: int, value: float) -> float:
        moved = raw.copy()
        moved[index] = value
        return 2.0 * (best - _bt_objective(moved, a, b, score, weight, RIDGE))

    rows = {}
    for name in which:
        i = models.index(name)
        ends = [_lr_end(functools.partial(deviance, i), raw[i], d, critical) - shift[i] for d in (-1.0, 1.0)]
        rows[name] = [init + e * scale / math.log(base) for e in ends]
    return pd.DataFrame.from_dict(rows, orient="index", columns=["lower", "upper"])


def _lr_end(deviance: Callable[[float], float], start: float, direction: float, critical: float) -> float:
    """Walk from the estimate in `direction` until the deviance passes `critical`, then bisect."""
    inside, step = start, 0.25
    while True:
        outside = start + direction * step
        if step > LR_LIMIT:
            return direction * math.inf
        if deviance(outside) > critical:
            break
        inside, step = outside, step * 2
    for _ in range(40):
        middle = (inside + outside) / 2
        inside, outside = (middle, outside) if deviance(middle) <= critical else (inside, middle)
    return inside

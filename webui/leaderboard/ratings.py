"""Ratings from battles: online Elo and Bradley-Terry with bootstrap intervals. Pure pandas/numpy.

A battles frame has columns model_a, model_b, winner ("model_a", "model_b", "tie", "tie (bothbad)")
and tstamp. Ties of either kind count as half a win for each side. Ratings are on the familiar Elo
scale: 400 points is a factor 10 in the odds of winning, and the mean model sits at 1000.

Bradley-Terry is fitted by maximum likelihood with Newton's method on the aggregated pair counts.
A very weak ridge penalty keeps the fit finite when a model has won (or lost) every battle and
ties the ratings of separate groups of models to a common mean; with any real amount of data it
moves ratings by far less than a point. The intervals are percentile-bootstrap intervals from
resampling whole battles, seeded so that the same logs always give the same table.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

SCALE = 400.0
BASE = 10.0
INIT = 1000.0
ELO_K = 4.0  # FastChat's online Elo step
RIDGE = 1e-3  # penalty on log-odds ratings; see the module docstring
TABLE_COLUMNS = ("rank", "model", "rating", "lower", "upper", "elo", "battles", "wins", "ties", "losses")


def scores(battles: pd.DataFrame) -> np.ndarray:
    """Model A's score per battle: 1 win, 0 loss, 0.5 for either kind of tie."""
    winner = battles["winner"].to_numpy()
    return np.where(winner == "model_a", 1.0, np.where(winner == "model_b", 0.0, 0.5))


def models_of(battles: pd.DataFrame) -> list[str]:
    return sorted(set(battles["model_a"]).union(battles["model_b"]))


def online_elo(battles: pd.DataFrame, k: float = ELO_K, scale: float = SCALE, base: float = BASE,
               init: float = INIT) -> pd.Series:
    """Elo updated battle by battle in time order. Depends on the order, which is why the
    leaderboard ranks by Bradley-Terry and shows Elo only alongside."""
    ordered = battles.sort_values("tstamp", kind="stable") if "tstamp" in battles else battles
    rating = dict.fromkeys(models_of(battles), init)
    for a, b, s in zip(ordered["model_a"], ordered["model_b"], scores(ordered), strict=True):
        expected = 1.0 / (1.0 + base ** ((rating[b] - rating[a]) / scale))
        rating[a] += k * (s - expected)
        rating[b] -= k * (s - expected)
    return pd.Series(rating, name="elo", dtype=float)


def _grouped(battles: pd.DataFrame, models: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique (a, b, score) outcomes and how often each occurred: the unit the bootstrap resamples."""
    index = {m: i for i, m in enumerate(models)}
    frame = pd.DataFrame({
        "a": battles["model_a"].map(index).to_numpy(),
        "b": battles["model_b"].map(index).to_numpy(),
        "s": scores(battles),
    })
    counts = frame.groupby(["a", "b", "s"], sort=True).size().reset_index(name="n")
    outcomes = counts[["a", "b"]].to_numpy(dtype=np.int64)
    return outcomes, counts["s"].to_numpy(dtype=float), counts["n"].to_numpy(dtype=float)


def fit_bt(outcomes: np.ndarray, score: np.ndarray, weight: np.ndarray, n_models: int,
           ridge: float = RIDGE, tol: float = 1e-10, max_iter: int = 100) -> np.ndarray:
    """Log-odds strengths maximising sum w * [s log p + (1 - s) log(1 - p)] - ridge/2 |theta|^2,
    p = sigmoid(theta_a - theta_b). Newton steps with backtracking (plain Newton can overshoot
    when one model dominates); the objective is strictly concave, so this finds the optimum."""
    theta = np.zeros(n_models)
    a, b = outcomes[:, 0], outcomes[:, 1]
    objective = _bt_objective(theta, a, b, score, weight, ridge)
    for _ in range(max_iter):
        p = 1.0 / (1.0 + np.exp(theta[b] - theta[a]))
        residual = weight * (score - p)
        grad = np.bincount(a, residual, n_models) - np.bincount(b, residual, n_models) - ridge * theta
        curvature = weight * p * (1.0 - p)
        hess = np.diag(np.bincount(a, curvature, n_models) + np.bincount(b, curvature, n_models) + ridge)
        np.add.at(hess, (a, b), -curvature)
        np.add.at(hess, (b, a), -curvature)
        step = np.linalg.solve(hess, grad)
        size = 1.0
        while True:
            candidate = theta + size * step
            new_objective = _bt_objective(candidate, a, b, score, weight, ridge)
            if new_objective >= objective - 1e-12 or size < 1e-6:
                break
            size /= 2
        theta, objective = candidate, new_objective
        if np.max(np.abs(size * step)) < tol:
            break
    return theta


def _bt_objective(theta: np.ndarray, a: np.ndarray, b: np.ndarray, score: np.ndarray, weight: np.ndarray,
                  ridge: float) -> float:
    diff = theta[a] - theta[b]
    # log sigmoid(x) = -log(1 + exp(-x)), computed without overflow
    log_p, log_q = -np.logaddexp(0.0, -diff), -np.logaddexp(0.0, diff)
    return float(np.sum(weight * (score * log_p + (1.0 - score) * log_q)) - 0.5 * ridge * theta @ theta)


def _to_scale(theta: np.ndarray, scale: float, base: float, init: float) -> np.ndarray:
    return init + theta * scale / math.log(base)


def bradley_terry(battles: pd.DataFrame, scale: float = SCALE, base: float = BASE, init: float = INIT) -> pd.Series:
    """Maximum-likelihood Bradley-Terry ratings on the Elo scale, mean `init`."""
    models = models_of(battles)
    if not models:
        return pd.Series(dtype=float, name="rating")
    outcomes, score, weight = _grouped(battles, models)
    theta = fit_bt(outcomes, score, weight, len(models))
    return pd.Series(_to_scale(theta, scale, base, init), index=models, name="rating")


def bootstrap_bt(battles: pd.DataFrame, rounds: int, seed: int = 0, scale: float = SCALE, base: float = BASE,
                 init: float = INIT) -> pd.DataFrame:
    """Ratings refitted on `rounds` resamples of the battles (drawn with replacement): one row per round."""
    models = models_of(battles)
    outcomes, score, weight = _grouped(battles, models)
    rng = np.random.default_rng(seed)
    total = int(weight.sum())
    draws = rng.multinomial(total, weight / total, size=rounds) if total else np.zeros((rounds, 0))
    rows = [_to_scale(fit_bt(outcomes, score, w, len(models)), scale, base, init) for w in draws.astype(float)]
    return pd.DataFrame(rows, columns=models)


def intervals(samples: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Percentile intervals per model: columns lower, upper."""
    tail = (1.0 - level) / 2
    return pd.DataFrame({"lower": samples.quantile(tail), "upper": samples.quantile(1.0 - tail)})


def ranks(lower: pd.Series, upper: pd.Series) -> pd.Series:
    """1 + the number of models whose whole interval lies above this model's interval."""
    return pd.Series({m: 1 + int((lower > upper[m]).sum()) for m in upper.index}, name="rank")


def record_counts(battles: pd.DataFrame) -> pd.DataFrame:
    """Battles, wins, ties and losses per model."""
    s = scores(battles)
    sides = pd.concat([
        pd.DataFrame({"model": battles["model_a"].to_numpy(), "score": s}),
        pd.DataFrame({"model": battles["model_b"].to_numpy(), "score": 1.0 - s}),
    ])
    grouped = sides.groupby("model")["score"]
    return pd.DataFrame({
        "battles": grouped.size(),
        "wins": grouped.apply(lambda x: int((x == 1.0).sum())),
        "ties": grouped.apply(lambda x: int((x == 0.5).sum())),
        "losses": grouped.apply(lambda x: int((x == 0.0).sum())),
    })


def pair_counts(battles: pd.DataFrame, order: list[str] | None = None) -> pd.DataFrame:
    """Symmetric matrix: how many battles each pair of models fought."""
    models = order or models_of(battles)
    table = pd.crosstab(battles["model_a"], battles["model_b"]).reindex(index=models, columns=models, fill_value=0)
    return (table + table.T).astype(int)


def win_fraction(battles: pd.DataFrame, order: list[str] | None = None) -> pd.DataFrame:
    """Row model's share of points against the column model (ties half), over all their battles,
    whichever side each was on. NaN where two models never met."""
    models = order or models_of(battles)
    s = scores(battles)
    points = pd.concat([
        pd.DataFrame({"row": battles["model_a"].to_numpy(), "col": battles["model_b"].to_numpy(), "p": s}),
        pd.DataFrame({"row": battles["model_b"].to_numpy(), "col": battles["model_a"].to_numpy(), "p": 1.0 - s}),
    ])
    table = points.pivot_table(index="row", columns="col", values="p", aggfunc="mean")
    return table.reindex(index=models, columns=models).astype(float)


def leaderboard(battles: pd.DataFrame, rounds: int = 200, seed: int = 0, k: float = ELO_K) -> pd.DataFrame:
    """The table: one row per model, best first. Without bootstrap rounds the interval is the point."""
    columns = list(TABLE_COLUMNS)
    if battles.empty:
        return pd.DataFrame(columns=columns)
    rating = bradley_terry(battles)
    if rounds > 0:
        bounds = intervals(bootstrap_bt(battles, rounds, seed))
    else:
        bounds = pd.DataFrame({"lower": rating, "upper": rating})
    table = pd.concat([rating, bounds, online_elo(battles, k=k), record_counts(battles)], axis=1)
    table["rank"] = ranks(table["lower"], table["upper"])
    table = table.rename_axis("model").reset_index()
    return table.sort_values(["rank", "rating"], ascending=[True, False]).reset_index(drop=True)[columns]

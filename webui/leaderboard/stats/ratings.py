"""Ratings from battles: online Elo and Bradley-Terry with bootstrap intervals. Pure pandas/numpy.

A battles frame has columns model_a, model_b, winner ("model_a", "model_b", "tie", "tie (bothbad)")
and tstamp. Ties of either kind count as half a win for each side. Ratings are on the familiar Elo
scale: 400 points is a factor 10 in the odds of winning, and the mean model sits at 1000.

Bradley-Terry is fitted by maximum likelihood with Newton's method on the aggregated pair counts.
A very weak ridge penalty keeps the fit finite when a model has won (or lost) every battle and
ties the ratings of separate groups of models to a common mean; with any real amount of data it
moves ratings by far less than a point. The intervals are percentile-bootstrap intervals from
resampling whole battles, seeded so that the same logs always give the same table; a round in
which a model has no battle says nothing about it and is left out of that model's interval.

Models with fewer battles than a minimum are *preliminary*: the bootstrap cannot describe them
(every resample of "lost both battles" is again "lost both battles", rated wherever the ridge
puts it), so their interval is a likelihood-ratio interval instead, open-ended on a side the data
cannot bound, and they take no rank. docs/leaderboard.md says why.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from webui.leaderboard.stats import confidence, newton

SCALE = 400.0
BASE = 10.0
INIT = 1000.0
ELO_K = 4.0  # FastChat's online Elo step
RIDGE = 1e-3  # penalty on log-odds ratings; see the module docstring
LR_LIMIT = 12.0  # log-odds (about 2,100 points) from the estimate: beyond it a bound is open (-inf/inf)
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
_compiled_elo_updates: Callable[..., list[float]] | None
try:
    from webui.leaderboard.stats._elo import elo_updates as _compiled_elo_updates
except ImportError:  # not built (no C compiler at install): the Python version below
    _compiled_elo_updates = None


def scores(battles: pd.DataFrame) -> np.ndarray:
    """Model A's score per battle: 1 win, 0 loss, 0.5 for either kind of tie."""
    winner = battles["winner"]
    won, lost = winner.eq("model_a").to_numpy(bool, na_value=False), winner.eq("model_b").to_numpy(bool, na_value=False)
    return np.where(won, 1.0, np.where(lost, 0.0, 0.5))


def models_of(battles: pd.DataFrame) -> list[str]:
    return encode(battles).models


def model_codes(battles: pd.DataFrame, models: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each battle's two models as indices into `models`."""
    coded = encode(battles)
    if coded.models == models:
        return coded.a, coded.b
    index = pd.Index(models).get_indexer(coded.models)
    return index[coded.a], index[coded.b]


@dataclass(frozen=True)
class Coded:
    """A battles frame as numbers: the models (sorted), each battle's two as indices into them,
    and model A's score. Everything below works on these; strings are read once."""

    models: list[str]
    a: np.ndarray
    b: np.ndarray
    score: np.ndarray

    def keys(self) -> np.ndarray:
        """Each battle's (a, b, score) outcome as one integer, ordered as (a, b, score) sort."""
        return (self.a * len(self.models) + self.b) * 3 + np.rint(self.score * 2).astype(np.int64)

    def take(self, rows: np.ndarray) -> Coded:
        """These battles' `rows` (indices or a mask), in that order."""
        return Coded(self.models, self.a[rows], self.b[rows], self.score[rows])

    def grouped(self, upto: int | None = None) -> Grouped:
        """The distinct outcomes of the battles (the first `upto` of them) and their counts."""
        keys = self.keys() if upto is None else self.keys()[:upto]
        return grouped_keys(np.bincount(keys, minlength=3 * len(self.models) ** 2), self.models)


@dataclass(frozen=True)
class Grouped:
    """Distinct (a, b, score) outcomes, in (a, b, score) order, and how often each occurred: the
    unit the bootstrap resamples."""

    models: list[str]
    outcomes: np.ndarray  # (k, 2) model indices
    score: np.ndarray
    weight: np.ndarray


def encode(battles: pd.DataFrame) -> Coded:
    n = len(battles)
    both = pd.concat([battles["model_a"], battles["model_b"]], ignore_index=True)
    codes, uniques = pd.factorize(both, use_na_sentinel=False)
    names = [str(u) for u in uniques]
    order = sorted(range(len(names)), key=names.__getitem__)
    position = np.empty(len(names), dtype=np.int64)
    position[order] = np.arange(len(names))
    codes = position[codes] if len(names) else codes.astype(np.int64)
    return Coded([names[i] for i in order], codes[:n], codes[n:], scores(battles))


def grouped_keys(counts: np.ndarray, models: list[str]) -> Grouped:
    """`Grouped` from counts per outcome key (`Coded.keys`)."""
    n = len(models)
    keys = np.flatnonzero(counts)
    pair, half = np.divmod(keys, 3)
    return Grouped(
        models,
        np.column_stack([pair // n, pair % n]).astype(np.int64) if n else np.zeros((0, 2), np.int64),
        half / 2.0,
        counts[keys].astype(float),
    )


def online_elo(
    battles: pd.DataFrame, k: float = ELO_K, scale: float = SCALE, base: float = BASE, init: float = INIT
) -> pd.Series:
    """Elo updated battle by battle in time order. Depends on the order, which is why the
    leaderboard ranks by Bradley-Terry and shows Elo only alongside."""
    return elo_of(encode(battles), _time_order(battles), k, scale, base, init)


def _time_order(battles: pd.DataFrame) -> np.ndarray | None:
    return np.argsort(battles["tstamp"].to_numpy(float), kind="stable") if "tstamp" in battles else None


def elo_of(
    coded: Coded,
    order: np.ndarray | None,
    k: float = ELO_K,
    scale: float = SCALE,
    base: float = BASE,
    init: float = INIT,
) -> pd.Series:
    """`online_elo` of coded battles taken in `order`. Sequential by nature."""
    a, b, s = (coded.a, coded.b, coded.score) if order is None else (coded.a[order], coded.b[order], coded.score[order])
    rating = elo_updates([init] * len(coded.models), a, b, s, k, scale, base)
    return pd.Series(rating, index=coded.models, name="elo", dtype=float)


def elo_updates(
    rating: list[float],
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    k: float = ELO_K,
    scale: float = SCALE,
    base: float = BASE,
) -> list[float]:
    """`rating` (per model index) carried on through the battles (a, b, score), in that order;
    the online Elo of a longer log is this applied to its newer battles. Compiled where the
    install built webui/leaderboard/stats/_elo.c (the same numbers)."""
    if _compiled_elo_updates is not None:
        codes_a, codes_b = np.ascontiguousarray(a, np.int64), np.ascontiguousarray(b, np.int64)
        return _compiled_elo_updates(rating, codes_a, codes_b, np.ascontiguousarray(score, float), k, scale, base)
    return _python_elo_updates(rating, a, b, score, k, scale, base)


def _python_elo_updates(
    rating: list[float], a: np.ndarray, b: np.ndarray, score: np.ndarray, k: float, scale: float, base: float
) -> list[float]:
    """`elo_updates` where webui/leaderboard/stats/_elo.c was not built."""
    rating = list(rating)
    for i, j, s in zip(a.tolist(), b.tolist(), score.tolist(), strict=True):
        old_i, old_j = rating[i], rating[j]
        change = k * (s - 1.0 / (1.0 + base ** ((old_j - old_i) / scale)))
        rating[i], rating[j] = old_i + change, old_j - change
    return rating


def grouped_outcomes(battles: pd.DataFrame, models: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique (a, b, score) outcomes and how often each occurred: the unit the bootstrap resamples."""
    a, b = model_codes(battles, models)
    g = Coded(models, a, b, scores(battles)).grouped()
    return g.outcomes, g.score, g.weight


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


def record_counts(battles: pd.DataFrame) -> pd.DataFrame:
    """Battles, wins, ties and losses per model."""
    return grouped_records(encode(battles).grouped())


def grouped_records(g: Grouped) -> pd.DataFrame:
    """`record_counts` of grouped outcomes."""
    n, a, b, s, w = len(g.models), g.outcomes[:, 0], g.outcomes[:, 1], g.score, g.weight

    def count(value: float) -> np.ndarray:  # battles in which the model scored `value`
        return (np.bincount(a, w * (s == value), n) + np.bincount(b, w * (s == 1.0 - value), n)).astype(np.int64)

    return pd.DataFrame(
        {
            "battles": (np.bincount(a, w, n) + np.bincount(b, w, n)).astype(np.int64),
            "wins": count(1.0),
            "ties": count(0.5),
            "losses": count(0.0),
        },
        index=pd.Index(g.models, name="model"),
    )


def _pair_matrix(g: Grouped, values: np.ndarray) -> np.ndarray:
    """Sum of `values` per (a, b) pair of the outcomes: an n x n matrix, a in rows."""
    n = len(g.models)
    return np.bincount(g.outcomes[:, 0] * n + g.outcomes[:, 1], values, n * n).reshape(n, n)


def pair_counts(battles: pd.DataFrame, order: list[str] | None = None, g: Grouped | None = None) -> pd.DataFrame:
    """Symmetric matrix: how many battles each pair of models fought. (`g`: the battles, grouped.)"""
    g = g or encode(battles).grouped()
    counts = _pair_matrix(g, g.weight)
    table = pd.DataFrame(
        (counts + counts.T).astype(np.int64),
        index=pd.Index(g.models, name="model_a"),
        columns=pd.Index(g.models, name="model_b"),
    )
    models = order or g.models
    return table.reindex(index=models, columns=models, fill_value=0)


def win_fraction(battles: pd.DataFrame, order: list[str] | None = None, g: Grouped | None = None) -> pd.DataFrame:
    """Row model's share of points against the column model (ties half), over all their battles,
    whichever side each was on. NaN where two models never met. (`g`: the battles, grouped.)"""
    g = g or encode(battles).grouped()
    counts, points = _pair_matrix(g, g.weight), _pair_matrix(g, g.weight * g.score)
    met = counts + counts.T
    share = np.divide(points + (counts - points).T, met, out=np.full(met.shape, np.nan), where=met > 0)
    table = pd.DataFrame(share, index=pd.Index(g.models, name="row"), columns=pd.Index(g.models, name="col"))
    models = order or g.models
    return table.reindex(index=models, columns=models).astype(float)


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
    return grouped_table(coded.grouped(), elo_of(coded, _time_order(battles), k=k), rounds, seed, min_battles)


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

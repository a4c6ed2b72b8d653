"""One board from human votes and a judge's verdicts: Bradley-Terry with a weight per source.

A human vote weighs 1; a judge's verdict on a battle weighs w, split between its two orders
(w/2 each: the two are one verdict asked twice). The fit is the board's own on the summed
outcome counts, so w = 0 is the human board exactly. A verdict's win probability is on the
judge's own scale k (its log-odds over people's), calibrated on every verdict whatever its weight
(`calibrated`), and the ratings are fitted at that k. `auto_weight` picks w by how well the fit
predicts human votes it did not see (k-fold, log-loss, a vote held out with its own verdicts),
once k stands clearly above 0: a judge that guesses gets w = 0; one that knows what people prefer
earns weight, most where human votes are few. A model with verdicts but no counted human vote is
marked provisional: its rating rests on the judge alone. Pure numpy/pandas."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
import pandas as pd

from webui.leaderboard.stats import newton
from webui.leaderboard.stats.battle_codes import Coded, Grouped, encode, grouped_keys
from webui.leaderboard.stats.bradley_terry import RIDGE, fit_bt
from webui.leaderboard.stats.scale import BASE, INIT, SCALE

WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0)  # what `auto` tries
FOLDS = 5
# held-out losses (nats per vote) this close are one loss, of which auto takes the smallest weight:
# judgments that only repeat votes already in the fit move it by about 1e-9 (the ridge's share)
EQUAL_LOSS = 1e-6
SIGNAL_Z = 3.0  # the judge's scale k must stand this many standard errors above 0 to earn any weight
COLUMNS = ("model", "rating", "human_battles", "judge_judgments", "provisional")
FRESH = "fresh"  # a judgments column: true where nobody voted on the battle (a replay's pairs)
# a column of both frames, where given: which human vote a judgment is about. `auto`'s folds hold a
# vote's own judgments out with it; left in, a verdict that copies the held-out vote most of the
# time scores as foresight and earns weight it has not.
VOTE = "vote"
# auto's weight for a verdict nobody voted on: 1 (a vote's), or by the variance verdicts show (`dispersion_weight`)
FreshRule = Literal["one", "dispersion"]


@dataclass(frozen=True)
class Scale:
    """The judge's own scale k (its log-odds over people's) on all the votes, with its standard error."""

    k: float
    se: float

    @property
    def shows_signal(self) -> bool:
        return self.k > SIGNAL_Z * self.se

    def text(self) -> str:
        return f"k = {self.k:.2f} ± {self.se:.2f}"


@dataclass(frozen=True)
class AutoWeight:
    weight: float  # of a verdict on a battle people voted on
    log_loss: pd.Series  # by candidate weight: mean held-out log-loss per human vote (empty: none tried)
    scale: Scale | None = None  # None: too few human votes or no verdicts to tell
    fresh_weight: float = 0.0  # of a verdict on a battle nobody voted on (FRESH rows)


def composite_board(
    human: pd.DataFrame, judged: pd.DataFrame, weight: float, fresh_weight: float | None = None
) -> pd.DataFrame:
    """Ratings from `human` battles (model_a, model_b, winner) weighing 1 each and `judged`
    judgments (the same columns, one row per order) weighing weight/2 each, or fresh_weight/2 (if
    given) for the rows whose FRESH column is true: battles nobody voted on. Best first."""
    fresh_weight = weight if fresh_weight is None else fresh_weight
    if not (0 <= weight < math.inf and 0 <= fresh_weight < math.inf):
        raise ValueError(f"judge weight: a number of 0 or more, got {weight} (fresh {fresh_weight})")
    coded_h, coded_j = _coded(human, judged)
    models = coded_h.models
    if not models:
        return pd.DataFrame(columns=list(COLUMNS))
    weights = row_weights(judged, weight, fresh_weight)
    everyone, every_judgment = np.ones(len(coded_h.a), dtype=bool), np.ones(len(coded_j.a), dtype=bool)
    k = calibrated(coded_h, coded_j, everyone, every_judgment).k if weights.any() else 1.0
    theta = _fit(coded_h, coded_j, weights, everyone, k)
    human_n = np.bincount(coded_h.a, minlength=len(models)) + np.bincount(coded_h.b, minlength=len(models))
    counted = weights > 0  # a judgment weighing nothing is not in the fit
    judge_n = (np.bincount(coded_j.a, counted, len(models)) + np.bincount(coded_j.b, counted, len(models))).astype(int)
    # centred on the models people rated, as the human board is: a judge-only model moves no one
    rated = human_n > 0 if (human_n > 0).any() else np.ones(len(models), dtype=bool)
    table = pd.DataFrame(
        {
            "model": models,
            "rating": INIT + (theta - theta[rated].mean()) * SCALE / math.log(BASE),
            "human_battles": human_n,
            "judge_judgments": judge_n,
            "provisional": (human_n == 0) & (judge_n > 0),
        }
    )
    table = table[(table["human_battles"] > 0) | (table["judge_judgments"] > 0)]
    return table.sort_values("rating", ascending=False, kind="stable").reset_index(drop=True)


def auto_weight(
    human: pd.DataFrame,
    judged: pd.DataFrame,
    weights: tuple[float, ...] = WEIGHTS,
    folds: int = FOLDS,
    seed: int = 0,
    fresh_rule: FreshRule = "one",
) -> AutoWeight:
    """0 for every verdict when the judge's scale k, fitted on all the votes, is not clearly above 0
    (`SIGNAL_Z` standard errors): a judge that guesses earns nothing. Otherwise a verdict on a
    battle nobody voted on (FRESH) weighs 1: with k fitted it is one observation of an honest
    judge's model, and it is what tells the board about a model people have barely rated; and a
    verdict on a battle people voted on, which mostly repeats that vote, weighs the one among
    `weights` whose fit best predicts held-out human votes (ties score 0.5; of equal losses the
    smallest), each vote held out with its own judgments (VOTE). In every fold the judge's scale
    is calibrated on what the fold keeps (`calibrated`). `fresh_rule` "dispersion": a FRESH
    verdict weighs instead what its measured variance makes it worth against a vote
    (`dispersion_weight`)."""
    coded_h, coded_j = _coded(human, judged)
    n = len(coded_h.a)
    if n < folds or not len(coded_j.a):
        return AutoWeight(0.0, pd.Series(dtype=float, name="log_loss"))
    scale = judge_scale(coded_h, coded_j)
    if not scale.shows_signal:
        return AutoWeight(0.0, pd.Series(dtype=float, name="log_loss"), scale)
    fold = np.random.default_rng(seed).permutation(n) % folds
    judged_fold = judgment_folds(human, judged, fold)
    emphasis = sparse_emphasis(coded_h)
    # each fold's k, from what the fold keeps: the same at every weight
    scales = [calibrated(coded_h, coded_j, fold != f, judged_fold != f).k for f in range(folds)]
    losses = {}
    for w in weights:
        total = 0.0
        for k in range(folds):
            held = fold == k
            weighed = np.where(judged_fold == k, 0.0, row_weights(judged, w, 1.0))
            theta = _fit(coded_h, coded_j, weighed, ~held, scales[k])
            p = np.clip(1.0 / (1.0 + np.exp(theta[coded_h.b[held]] - theta[coded_h.a[held]])), 1e-9, 1 - 1e-9)
            s = coded_h.score[held]
            total -= float(np.sum(emphasis[held] * (s * np.log(p) + (1 - s) * np.log(1 - p))))
        losses[w] = total / float(emphasis.sum())
    series = pd.Series(losses, name="log_loss").sort_index()
    smallest = series.index[series <= series.min() + EQUAL_LOSS][0]
    fresh = 1.0 if fresh_rule == "one" else dispersion_weight(human, judged, coded_h, coded_j, scale.k)
    return AutoWeight(float(smallest), series, scale, fresh)


def dispersion_weight(human: pd.DataFrame, judged: pd.DataFrame, coded_h: Coded, coded_j: Coded, k: float) -> float:
    """What a verdict (its two orders) is worth against a vote, by the variance each shows against
    what the fit assumes of it (quasi-likelihood: weight 1 over the dispersion, the observed squared
    residual over p (1 - p)): the human votes' at people's fit, the verdicts' (the mean of a
    vote's two orders, paired by VOTE) at k times it. 1 where no verdict has both orders paired."""
    g_h, _ = _grouped(coded_h, coded_j, np.zeros(len(coded_j.a)), np.ones(len(coded_h.a), dtype=bool))
    theta = fit_bt(g_h.outcomes, g_h.score, g_h.weight, len(g_h.models))
    p_h = 1.0 / (1.0 + np.exp(theta[coded_h.b] - theta[coded_h.a]))
    people = float(np.sum((coded_h.score - p_h) ** 2) / np.sum(p_h * (1 - p_h)))
    if VOTE not in judged or VOTE not in human:
        return 1.0
    keys = judged[VOTE].to_numpy()
    frame = pd.DataFrame({"key": keys, "score": coded_j.score, "a": coded_j.a, "b": coded_j.b})
    frame = frame[frame["key"].isin(set(human[VOTE]))]
    pairs = frame.groupby("key").agg(score=("score", "mean"), n=("score", "size"), a=("a", "first"), b=("b", "first"))
    pairs = pairs[pairs["n"] == 2]
    if pairs.empty:
        return 1.0
    p_j = 1.0 / (1.0 + np.exp(k * (theta[pairs["b"].to_numpy()] - theta[pairs["a"].to_numpy()])))
    judge = float(np.sum((pairs["score"].to_numpy() - p_j) ** 2) / np.sum(p_j * (1 - p_j)))
    return people / judge if judge > 0 else 1.0


def judgment_folds(human: pd.DataFrame, judged: pd.DataFrame, fold: np.ndarray) -> np.ndarray:
    """Each judgment's fold: that of the human vote it is about (the VOTE columns), -1 for one about
    no vote of `human` (a fresh battle, an uncounted vote) or where either frame lacks the column."""
    if VOTE not in human or VOTE not in judged:
        return np.full(len(judged), -1)
    of_vote = dict(zip(human[VOTE], fold.tolist(), strict=True))
    return np.array([of_vote.get(v, -1) for v in judged[VOTE]], dtype=int)


def row_weights(judged: pd.DataFrame, weight: float, fresh_weight: float) -> np.ndarray:
    """Each judgment's weight: `fresh_weight` on FRESH rows (battles nobody voted on), else `weight`."""
    fresh = judged[FRESH].to_numpy(dtype=bool) if FRESH in judged else np.zeros(len(judged), dtype=bool)
    return np.where(fresh, fresh_weight, weight).astype(float)


def judge_scale(human: Coded, judged: Coded) -> Scale:
    """k and its standard error on every vote and every verdict (`calibrated`)."""
    return calibrated(human, judged, np.ones(len(human.a), dtype=bool), np.ones(len(judged.a), dtype=bool))


def sparse_emphasis(human: Coded) -> np.ndarray:
    """Each human vote's share in `auto_weight`'s held-out loss: 1 over the human votes of the
    less-voted of its two models. Where every model has many votes, the judge adds little and the
    weight does not matter; where one has few (a newcomer), its few votes decide how far the judge
    is trusted, instead of drowning among the established models' many."""
    counts = np.bincount(human.a, minlength=len(human.models)) + np.bincount(human.b, minlength=len(human.models))
    return 1.0 / np.maximum(1, np.minimum(counts[human.a], counts[human.b]))


def _coded(human: pd.DataFrame, judged: pd.DataFrame) -> tuple[Coded, Coded]:
    """Both sources coded on one list of models."""
    both = encode(pd.concat([human[["model_a", "model_b", "winner"]], judged[["model_a", "model_b", "winner"]]]))
    h = len(human)
    return (
        Coded(both.models, both.a[:h], both.b[:h], both.score[:h]),
        Coded(both.models, both.a[h:], both.b[h:], both.score[h:]),
    )


def _fit(human: Coded, judged: Coded, weights: np.ndarray, keep: np.ndarray, k: float) -> np.ndarray:
    """The strengths on the human votes' scale (`keep` of them) and, each weighing its weight/2 per
    order, the judgments at the judge's scale `k` (`calibrated`)."""
    g_h, g_j = _grouped(human, judged, weights, keep)
    theta = fit_bt(g_h.outcomes, g_h.score, g_h.weight, len(g_h.models))
    if not weights.any():
        return theta
    return fit_scaled(g_h, g_j, theta, k=k).theta


def calibrated(human: Coded, judged: Coded, keep: np.ndarray, counted: np.ndarray) -> Scale:
    """The judge's scale k, with its standard error, from `fit_scaled` on the `keep` votes and every
    `counted` judgment at full weight (w/2 per order at w = 1), whatever they weigh toward the
    ratings: a verdict on a battle people voted on adds little to a rating but tells how far the
    judge's preferences follow people's; without it, a replay's verdicts, all about one new model,
    would have to find k and that model's rating at once. (k's error: the curvature of the
    log-likelihood at its optimum, the ratings profiled out.)"""
    if not counted.any():
        return Scale(1.0, math.inf)
    g_h, g_all = _grouped(human, judged, counted.astype(float), keep)
    fitted = fit_scaled(g_h, g_all, fit_bt(g_h.outcomes, g_h.score, g_h.weight, len(g_h.models)))
    return Scale(fitted.k, fitted.k_se)


def _grouped(human: Coded, judged: Coded, weights: np.ndarray, keep: np.ndarray) -> tuple[Grouped, Grouped]:
    """The `keep` human votes weighing 1 and each judgment its weight/2, as outcome counts."""
    n_keys = 3 * len(human.models) ** 2
    g_h = grouped_keys(np.bincount(human.keys()[keep], minlength=n_keys).astype(float), human.models)
    g_j = grouped_keys(np.bincount(judged.keys(), weights / 2, minlength=n_keys), human.models)
    return g_h, g_j


class Scaled(NamedTuple):
    theta: np.ndarray
    k: float
    k_se: float  # from the negative Hessian at the optimum (inf where it cannot be inverted)


def fit_scaled(human: Grouped, judged: Grouped, start: np.ndarray, k: float | None = None) -> Scaled:
    """(theta, k) maximising the human votes' Bradley-Terry log-likelihood in theta plus the
    judgments' with win probability sigmoid(k (theta_a - theta_b)): a judge that prefers the
    better reply less often than people do (k < 1), or at random (k near 0), then tells the order
    of the models without pulling their ratings together. Newton's method on (theta, k) from
    `start` and k = 1 (the objective is concave in theta at fixed k and in k at fixed theta;
    step halving keeps each step uphill). With `k` given, theta alone at that k (its k_se: nan)."""
    n = len(human.models)
    a_h, b_h, a_j, b_j = human.outcomes[:, 0], human.outcomes[:, 1], judged.outcomes[:, 0], judged.outcomes[:, 1]

    def objective(x: np.ndarray) -> float:
        t, k = x[:n], x[n]
        return (
            _log_likelihood(t[a_h] - t[b_h], human)
            + _log_likelihood(k * (t[a_j] - t[b_j]), judged)
            - (0.5 * RIDGE * t @ t)
        )

    def derivatives(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The gradient and the negative Hessian (what newton.maximise takes, as fit_bt gives it)."""
        t, k = x[:n], x[n]
        grad, hess = np.zeros(n + 1), np.zeros((n + 1, n + 1))
        grad[:n], hess[:n, :n] = -RIDGE * t, np.diag(np.full(n, RIDGE))
        for a, b, g, scale in ((a_h, b_h, human, 1.0), (a_j, b_j, judged, k)):
            d = t[a] - t[b]
            p = 1.0 / (1.0 + np.exp(-scale * d))
            residual, curvature = g.weight * (g.score - p), g.weight * p * (1 - p)
            grad[:n] += np.bincount(a, scale * residual, n) - np.bincount(b, scale * residual, n)
            inner = scale**2 * curvature
            hess[:n, :n] += np.diag(np.bincount(a, inner, n) + np.bincount(b, inner, n))
            np.add.at(hess, (a, b), -inner)
            np.add.at(hess, (b, a), -inner)
            if g is judged:  # k's own row: d/dk of the judgments' terms
                grad[n] = float(np.sum(residual * d))
                cross = scale * curvature * d - residual
                hess[:n, n] = np.bincount(a, cross, n) - np.bincount(b, cross, n)
                hess[n, :n] = hess[:n, n]
                hess[n, n] = float(np.sum(curvature * d * d)) + 1e-12
        return grad, hess

    # Near the optimum first, by turns (each concave): k at fixed theta, then theta at fixed k; from
    # there Newton on both. k first: the objective is not concave in both at once (k times a
    # difference), and a guessing judge's many verdicts at k = 1 would pull every rating to 0, a
    # local optimum with k far from 0. (From theta = 0, k has no slope: `start` is people's fit.)
    if k is not None:
        theta = _maximise_block(objective, derivatives, np.append(start, k), slice(0, n), tol=1e-9)
        return Scaled(theta, k, math.nan)
    x = np.append(start, 1.0)
    for keep in (slice(n, n + 1), slice(0, n)) * 3:
        x[keep] = _maximise_block(objective, derivatives, x, keep, tol=1e-6)
    x = newton.maximise(objective, derivatives, x, tol=1e-9, max_iter=200)
    _, hessian = derivatives(x)
    try:
        k_variance = float(np.linalg.inv(hessian)[n, n])
    except np.linalg.LinAlgError:
        k_variance = math.inf
    return Scaled(x[:n], float(x[n]), math.sqrt(k_variance) if k_variance > 0 else math.inf)


def _maximise_block(
    objective: Callable[[np.ndarray], float],
    derivatives: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    x: np.ndarray,
    keep: slice,
    tol: float,
) -> np.ndarray:
    """x[keep] maximising `objective` with the rest of x held where it is (Newton on the block)."""
    fixed = x.copy()

    def whole(free: np.ndarray) -> np.ndarray:
        point = fixed.copy()
        point[keep] = free
        return point

    def block_derivatives(free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gradient, hessian = derivatives(whole(free))
        return gradient[keep], hessian[keep, keep]

    return newton.maximise(lambda free: objective(whole(free)), block_derivatives, x[keep], tol=tol)


def _log_likelihood(diff: np.ndarray, g: Grouped) -> float:
    log_p, log_q = -np.logaddexp(0.0, -diff), -np.logaddexp(0.0, diff)
    return float(np.sum(g.weight * (g.score * log_p + (1.0 - g.score) * log_q)))

"""Style control: Bradley-Terry ratings with the replies' style held equal (Chiang et al., "Does
style matter? Disentangling style and substance in Chatbot Arena", LMSYS, 2024).

People prefer longer replies and markdown (headers, bold, lists) somewhat regardless of what they
say. Style control adds, for every battle, the style *differences* between the two replies as
covariates of the logistic regression that Bradley-Terry is:

    logit P(A beats B) = theta_A - theta_B + sum_j beta_j * x_j

x_j = (A_j - B_j) / (A_j + B_j) for each feature (words in the replies, markdown headers, bold
spans, list items; summed over the turns; 0 when both are 0), then standardised over the battles
(mean 0, standard deviation 1). The thetas are the style-controlled ratings: what a model would
score if its replies looked like its opponents'; the betas say how much each feature moves the
odds (log-odds per standard deviation). Fitted by Newton's method on the battles (the covariates
differ per battle, so they are not aggregated); a weak ridge on the thetas, as in `ratings`.

Intervals: from the one fit, not a bootstrap. A bootstrap round refits on every battle (the
covariates cannot be aggregated as the raw ratings' outcomes are), so 200 rounds cost 200 fits
over all the battles: minutes at a million votes. Instead, as lmarena's arena-rank library does,
the covariance of the estimates is the sandwich (robust) estimator H^-1 B H^-1, H the negative
Hessian of the objective at the optimum and B the sum over battles of the outer products of each
battle's score (gradient) vector; it does not lean on the logistic model's variance being right.
The ratings are centred on the reference models' mean, so the standard error is that of the
centred contrast (the covariance transformed by the centring matrix), and the 95% interval is the
estimate +- 1.96 standard errors on the Elo scale. tests/unit/leaderboard/stats/test_leaderboard_simulation.py
checks that it covers known ratings at the promised rate. `style_bootstrap` remains, unused by
the board. Pure numpy/pandas.

The model has no intercept, so the centring of the features is part of it: a shifted mean adds
-beta * shift / sd to every battle's logit, as an intercept would (FastChat's style control
standardises the same way). Between full builds the live board's tally carries this fit per vote
(webui.leaderboard.board.tally.StyleTally, from `StyleFit` and `battle_terms`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from webui.db.columns import FEATURES, STYLE_COUNT_COLUMNS
from webui.leaderboard.stats import confidence, newton
from webui.leaderboard.stats.battle_codes import Coded, encode
from webui.leaderboard.stats.bradley_terry import RIDGE, fit_bt
from webui.leaderboard.stats.ratings import ranks
from webui.leaderboard.stats.scale import BASE, INIT, SCALE

STYLE_COLUMNS = (
    "model",
    "style_rating",
    "style_lower",
    "style_upper",
    "style_rank",
    "style_p_above_next",
    "style_more_battles_next",
)
# A ridge on the style coefficients: negligible beside the data's curvature (about n/5 for n battles)
# wherever style varies within models, but where style and a model cannot be told apart (only one
# model ever writes headers) it leaves the effect with the model, as the raw ratings do, rather
# than let an unidentified coefficient take any value.
BETA_RIDGE = 1.0


def counts_of(battles: pd.DataFrame) -> pd.DataFrame:
    """The style counts `battles` carry (counted when the vote was read, webui.leaderboard.votes.features;
    as the vote index stores them: `style_differences` reads each column as float)."""
    stored = list(STYLE_COUNT_COLUMNS)
    return battles[stored]


def style_matrix(counts: pd.DataFrame) -> np.ndarray:
    """Normalised, standardised differences: one column per feature (`standardise` by each
    column's mean and spread, done in place, a column at a time: this matrix has a row per battle)."""
    diff = style_differences(counts)
    for j in range(diff.shape[1]):
        column = diff[:, j].copy()  # contiguous: the sums as before
        mean, spread = column.mean(), column.std()
        if spread > 0:
            column -= mean
            column /= spread
        else:
            column[:] = 0.0
        diff[:, j] = column
    return diff


def style_differences(counts: pd.DataFrame) -> np.ndarray:
    """Each battle's normalised differences (A - B) / (A + B), 0 when both are 0: one column per feature."""
    out = np.zeros((len(counts), len(FEATURES)))
    for j, f in enumerate(FEATURES):
        a, b = counts[f"{f}_a"].to_numpy(float), counts[f"{f}_b"].to_numpy(float)
        total = a + b
        np.divide(a - b, total, out=out[:, j], where=total > 0)
    return out


def standardise(diff: np.ndarray, mean: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """`style_differences` less each feature's `mean`, over its `spread` (a column of 0 where that is 0)."""
    safe = np.where(spread > 0, spread, 1.0)
    return np.where(spread > 0, (diff - mean) / safe, 0.0)


def fit_bt_style(
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    n_models: int,
    ridge: float = RIDGE,
    tol: float = 1e-9,
    max_iter: int = 100,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Maximise sum w [s log p + (1-s) log(1-p)] - ridge/2 |theta|^2 - BETA_RIDGE/2 |beta|^2 with
    p = sigmoid(theta_a - theta_b + x beta). Returns theta followed by beta. `start` (the fit on
    all battles, for a bootstrap round) saves most of the Newton steps."""
    last: list[np.ndarray] = []  # the logits at the point `objective` saw last (newton.maximise's guarantee)

    def objective(params: np.ndarray) -> float:
        z = _logits(params, a, b, x, n_models)
        last[:] = [z]
        return _objective(z, params, score, weight, n_models, ridge)

    def derivatives(params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _derivatives(last[0], params, a, b, score, x, weight, n_models, ridge)

    start = np.zeros(n_models + x.shape[1]) if start is None else start
    return newton.maximise(objective, derivatives, start, tol=tol, max_iter=max_iter)


def _logits(params: np.ndarray, a: np.ndarray, b: np.ndarray, x: np.ndarray, n_models: int) -> np.ndarray:
    return params[a] - params[b] + x @ params[n_models:]


def _objective(
    z: np.ndarray, params: np.ndarray, score: np.ndarray, weight: np.ndarray, n_models: int, ridge: float
) -> float:
    """The objective at `params`, whose logits are `z`: s log p + (1 - s) log(1 - p) = s z - log(1 + e^z)."""
    loglik = score * z - np.logaddexp(0.0, z)
    theta, beta = params[:n_models], params[n_models:]
    return float(np.sum(weight * loglik) - 0.5 * ridge * theta @ theta - 0.5 * BETA_RIDGE * beta @ beta)


def _derivatives(
    z: np.ndarray,
    params: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    n_models: int,
    ridge: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and negative Hessian of the objective at `params`, whose logits are `z`."""
    p = 1.0 / (1.0 + np.exp(-z))
    r, w = weight * (score - p), weight * p * (1.0 - p)
    grad = np.concatenate([_by_model(np.bincount(a * n_models + b, r, n_models * n_models), n_models), x.T @ r])
    grad[:n_models] -= ridge * params[:n_models]
    grad[n_models:] -= BETA_RIDGE * params[n_models:]
    return grad, _gram(a, b, x, w, n_models, ridge, BETA_RIDGE)


def _by_model(per_pair: np.ndarray, n_models: int) -> np.ndarray:
    """From sums over the battles of each (a, b) pair (flat, a * n + b; trailing axes kept): the
    sum over each model's battles as A minus the sum over its battles as B."""
    square = per_pair.reshape(n_models, n_models, *per_pair.shape[1:])
    return square.sum(axis=1) - square.sum(axis=0)


def _gram(
    a: np.ndarray,
    b: np.ndarray,
    x: np.ndarray,
    w: np.ndarray,
    n_models: int,
    ridge: float = 0.0,
    beta_ridge: float = 0.0,
) -> np.ndarray:
    """sum_i w_i v_i v_i^T with v_i = (e_a - e_b, x_i), the battle's design row, plus the ridges
    on the diagonal: with w = p(1 - p) the negative Hessian, with w = (s - p)^2 the sandwich's meat.
    The model blocks come from sums per (a, b) pair: one pass over the battles per column."""
    k, cells = x.shape[1], n_models * n_models
    pair = a * n_models + b
    weighted = x * w[:, None]
    per_pair_x = np.column_stack([np.bincount(pair, weighted[:, j], cells) for j in range(k)]) if k else None
    inner = weighted.T @ x + beta_ridge * np.eye(k)
    return gram_of_sums(np.bincount(pair, w, cells), per_pair_x, inner, n_models, ridge)


def gram_of_sums(
    per_pair: np.ndarray, per_pair_x: np.ndarray | None, inner: np.ndarray, n_models: int, ridge: float = 0.0
) -> np.ndarray:
    """`_gram` from its sums: of w per (a, b) pair (flat, a * n + b), of w x per pair (one column
    per feature; None: no feature) and of w x x^T over all battles (with the ridge on the betas)."""
    pairs = per_pair.reshape(n_models, n_models)
    block = np.diag(pairs.sum(axis=1) + pairs.sum(axis=0) + ridge) - pairs - pairs.T
    cross = _by_model(per_pair_x, n_models) if per_pair_x is not None else np.zeros((n_models, 0))
    return np.block([[block, cross], [cross.T, inner]])


def _centred_covariance(hess: np.ndarray, meat: np.ndarray, n_models: int, centre: np.ndarray) -> np.ndarray:
    bread = np.linalg.inv(hess)
    covariance = (bread @ meat @ bread)[:n_models, :n_models]
    centring = np.eye(n_models) - np.outer(np.ones(n_models), centre / centre.sum())
    return centring @ covariance @ centring.T * (SCALE / math.log(BASE)) ** 2


def battle_terms(
    params: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    x: np.ndarray,
    n_models: int,
    *,
    meat: bool = False,
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray | None]:
    """The battles' log-likelihood at `params` (theta, then one coefficient per column of `x`), its
    gradient, its negative Hessian and (asked for) the sandwich's meat, all without the ridges."""
    z = _logits(params, a, b, x, n_models)
    p = 1.0 / (1.0 + np.exp(-z))
    r = score - p
    grad = np.concatenate([_by_model(np.bincount(a * n_models + b, r, n_models * n_models), n_models), x.T @ r])
    loglik = float(np.sum(score * z - np.logaddexp(0.0, z)))
    return loglik, grad, _gram(a, b, x, p * (1.0 - p), n_models), _gram(a, b, x, r**2, n_models) if meat else None


def ridge_terms(params: np.ndarray, n_models: int, ridge: float = RIDGE) -> tuple[float, np.ndarray, np.ndarray]:
    """The ridges' part of the objective at `params`: its value, gradient and negative Hessian's diagonal."""
    weights = np.concatenate([np.full(n_models, ridge), np.full(len(params) - n_models, BETA_RIDGE)])
    return -0.5 * float(weights @ params**2), -weights * params, weights


@dataclass(frozen=True)
class StyleFit:
    """One style-controlled fit of `models`: theta then beta (log-odds per standard deviation of
    each feature) and, for the sandwich intervals, the negative Hessian of the objective (ridges
    included) and the meat at them; None: no interval asked for."""

    models: list[str]
    params: np.ndarray
    hess: np.ndarray | None = None
    meat: np.ndarray | None = None

    def covariance(self, centre: np.ndarray) -> np.ndarray | None:
        """The sandwich H^-1 B H^-1 of the fit, on the Elo scale (points squared), for the ratings
        centred on the `centre` models' mean."""
        if self.hess is None or self.meat is None:
            return None
        return _centred_covariance(self.hess, self.meat, len(self.models), centre)


def _to_scale(theta: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Elo scale with the mean of the `centre` models (a boolean mask) at 1000."""
    return INIT + (theta - theta[centre].mean()) * SCALE / math.log(BASE)


def from_scale(rating: np.ndarray) -> np.ndarray:
    """The thetas of a fit from its ratings (`_to_scale`): the ridge puts the optimum's mean at 0."""
    theta = (rating - INIT) * math.log(BASE) / SCALE
    return theta - theta.mean()


def _mask(models: list[str], reference: list[str] | None) -> np.ndarray:
    wanted = set(reference or models)
    mask = np.array([m in wanted for m in models])
    return mask if mask.any() else np.ones(len(models), dtype=bool)


def _inputs(
    battles: pd.DataFrame, counts: pd.DataFrame | None, coded: Coded | None = None
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    coded = coded or encode(battles)
    x = style_matrix(counts if counts is not None else counts_of(battles))
    return coded.models, coded.a, coded.b, coded.score, x


def style_fit(
    battles: pd.DataFrame, counts: pd.DataFrame | None = None, reference: list[str] | None = None
) -> tuple[pd.Series, pd.Series]:
    """(style-controlled ratings on the Elo scale, the `reference` models (default: all) averaging
    1000; the style coefficients in log-odds per standard deviation of each feature)."""
    rating, coefficients, _, _ = _fit_columns(_style_fit(battles, counts, intervals=False), reference)
    return rating, coefficients


def _style_fit(
    battles: pd.DataFrame, counts: pd.DataFrame | None, *, intervals: bool, coded: Coded | None = None
) -> StyleFit:
    """The fit on `battles`, with the sandwich's parts when `intervals`."""
    coded = coded or encode(battles)
    models, a, b, s, x = _inputs(battles, counts, coded)
    g = coded.grouped()  # start from the raw ratings (fitted on a few hundred counts): fewer Newton steps
    start = np.concatenate([fit_bt(g.outcomes, g.score, g.weight, len(models)), np.zeros(x.shape[1])])
    params = fit_bt_style(a, b, s, x, np.ones(len(s)), len(models), start=start)
    if not intervals:
        return StyleFit(models, params)
    _, _, hess, meat = battle_terms(params, a, b, s, x, len(models), meat=True)
    return StyleFit(models, params, hess + np.diag(ridge_terms(params, len(models))[2]), meat)


def _fit_columns(
    fit: StyleFit, reference: list[str] | None, level: float = 0.95
) -> tuple[pd.Series, pd.Series, pd.DataFrame, pd.DataFrame | None]:
    """A fit's ratings (the `reference` models averaging 1000), coefficients, interval (columns
    lower, upper: the rating itself without the sandwich's parts) and covariance."""
    models, n = fit.models, len(fit.models)
    centre = _mask(models, reference)
    rating = pd.Series(_to_scale(fit.params[:n], centre), index=models, name="style_rating")
    coefficients = pd.Series(fit.params[n:], index=list(FEATURES), name="coefficient")
    spread = fit.covariance(centre)
    if spread is None:
        return rating, coefficients, pd.DataFrame({"lower": rating, "upper": rating}), None
    covariance = pd.DataFrame(spread, index=models, columns=models)
    half = NormalDist().inv_cdf((1.0 + level) / 2.0) * np.sqrt(np.clip(np.diag(spread), 0.0, None))
    return rating, coefficients, pd.DataFrame({"lower": rating - half, "upper": rating + half}), covariance


def style_intervals(
    battles: pd.DataFrame, level: float = 0.95, counts: pd.DataFrame | None = None, reference: list[str] | None = None
) -> pd.DataFrame:
    """Sandwich intervals of the style-controlled ratings (see the module docstring): columns
    lower, upper, one row per model."""
    return _fit_columns(_style_fit(battles, counts, intervals=True), reference, level)[2]


def style_bootstrap(
    battles: pd.DataFrame,
    rounds: int,
    seed: int = 0,
    counts: pd.DataFrame | None = None,
    reference: list[str] | None = None,
) -> pd.DataFrame:
    """Style-controlled ratings refitted on `rounds` resamples of the battles; NaN for a model
    absent from a round. (The features are standardised once, on all battles.) Slow: the board
    uses `style_intervals`."""
    models, a, b, s, x = _inputs(battles, counts)
    centre = _mask(models, reference)
    rng = np.random.default_rng(seed)
    start = fit_bt_style(a, b, s, x, np.ones(len(s)), len(models))
    rows = []
    for w in rng.multinomial(len(s), np.full(len(s), 1.0 / len(s)), size=rounds).astype(float):
        theta = fit_bt_style(a, b, s, x, w, len(models), start=start)[: len(models)]
        present = np.bincount(a, w, len(models)) + np.bincount(b, w, len(models)) > 0
        rows.append(
            np.where(present, _to_scale(theta, centre & present if (centre & present).any() else present), np.nan)
        )
    return pd.DataFrame(rows, columns=models)


def style_table(
    battles: pd.DataFrame,
    rounds: int = 200,
    seed: int = 0,
    counts: pd.DataFrame | None = None,
    ranked: list[str] | None = None,
    coded: Coded | None = None,
) -> tuple[pd.DataFrame, pd.Series]:
    """The style-controlled columns for the leaderboard (style_rating, its 95% sandwich interval,
    its rank among the `ranked` models, who also set the scale's mean) and the style coefficients.
    `rounds` 0: no interval (the point), as for the raw ratings; any other number gives the same
    closed-form interval (`seed` is not used: nothing is drawn). `coded`: the battles, encoded."""
    if battles.empty:
        return pd.DataFrame(columns=list(STYLE_COLUMNS)), pd.Series(dtype=float, name="coefficient")
    return style_columns(_style_fit(battles, counts, intervals=rounds > 0, coded=coded), ranked)


def style_columns(fit: StyleFit, ranked: list[str] | None) -> tuple[pd.DataFrame, pd.Series]:
    """`style_table` of a fit (intervals and rank confidence where it has the sandwich's parts)."""
    rating, coefficients, bounds, covariance = _fit_columns(fit, ranked)
    table = pd.DataFrame({"style_rating": rating, "style_lower": bounds["lower"], "style_upper": bounds["upper"]})
    keep = [m for m in (ranked if ranked is not None else list(table.index)) if m in table.index]
    table.loc[~table.index.isin(keep), ["style_lower", "style_upper"]] = np.nan  # preliminary: see ratings
    table["style_rank"] = (
        ranks(table.loc[keep, "style_lower"], table.loc[keep, "style_upper"]).reindex(table.index).astype("Int64")
    )
    # Rank confidence in the style ranking's own order, from the sandwich covariance (confidence.py).
    order = list(table.loc[keep].sort_values(["style_rank", "style_rating"], ascending=[True, False]).index)
    se = functools.partial(confidence.se_from_covariance, covariance) if covariance is not None else None
    pairs = confidence.neighbours(order, rating, se, SCALE / math.log(BASE)).set_index("upper")
    table["style_p_above_next"] = table.index.map(pairs["p_order"]).astype(float)
    table["style_more_battles_next"] = table.index.map(pairs["more_battles"]).astype(float)
    return table.rename_axis("model").reset_index()[list(STYLE_COLUMNS)], coefficients

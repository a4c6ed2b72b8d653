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
Intervals: the percentile bootstrap over battles, as for the raw ratings. Pure numpy/pandas.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from webui.leaderboard.ratings import BASE, INIT, RIDGE, SCALE, intervals, model_codes, models_of, ranks, scores

FEATURES = ("length", "headers", "bold", "lists")
STYLE_COLUMNS = ("model", "style_rating", "style_lower", "style_upper", "style_rank")
_HEADER = re.compile(r"^#{1,6}\s+\S", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+?\*\*|__[^_\n]+?__")
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.MULTILINE)
_WORDS = re.compile(r"\S+")
# A ridge on the style coefficients: negligible beside the data's curvature (about n/5 for n battles)
# wherever style varies within models, but where style and a model cannot be told apart (only one
# model ever writes headers) it leaves the effect with the model, as the raw ratings do, rather
# than let an unidentified coefficient take any value.
BETA_RIDGE = 1.0


def reply_style(messages: list[dict[str, str]]) -> tuple[int, int, int, int]:
    """(words, headers, bold spans, list items) over the assistant messages of one conversation."""
    text = "\n".join(m.get("content", "") for m in messages if m.get("role") == "assistant")
    return (len(_WORDS.findall(text)), len(_HEADER.findall(text)), len(_BOLD.findall(text)),
            len(_LIST.findall(text)))


def style_counts(battles: pd.DataFrame) -> pd.DataFrame:
    """Each side's raw counts: columns length_a, headers_a, ..., length_b, ... (one row per battle)."""
    a = [reply_style(c) for c in battles["conversation_a"]]
    b = [reply_style(c) for c in battles["conversation_b"]]
    columns = [f"{f}_a" for f in FEATURES] + [f"{f}_b" for f in FEATURES]
    rows = [list(x) + list(y) for x, y in zip(a, b, strict=True)]
    return pd.DataFrame(rows, columns=columns, index=battles.index, dtype=float)


def style_matrix(counts: pd.DataFrame) -> np.ndarray:
    """Normalised, standardised differences: one column per feature."""
    out = []
    for f in FEATURES:
        a, b = counts[f"{f}_a"].to_numpy(float), counts[f"{f}_b"].to_numpy(float)
        total = a + b
        diff = np.divide(a - b, total, out=np.zeros_like(total), where=total > 0)
        spread = diff.std()
        out.append((diff - diff.mean()) / spread if spread > 0 else np.zeros_like(diff))
    return np.column_stack(out) if out else np.zeros((len(counts), 0))


def fit_bt_style(a: np.ndarray, b: np.ndarray, score: np.ndarray, x: np.ndarray, weight: np.ndarray,
                 n_models: int, ridge: float = RIDGE, tol: float = 1e-9, max_iter: int = 100,
                 start: np.ndarray | None = None) -> np.ndarray:
    """Maximise sum w [s log p + (1-s) log(1-p)] - ridge/2 |theta|^2 - BETA_RIDGE/2 |beta|^2 with
    p = sigmoid(theta_a - theta_b + x beta). Returns theta followed by beta. `start` (the fit on
    all battles, for a bootstrap round) saves most of the Newton steps."""
    k = x.shape[1]
    params = np.zeros(n_models + k) if start is None else start.copy()
    objective = _objective(params, a, b, score, x, weight, n_models, ridge)
    for _ in range(max_iter):
        grad, hess = _derivatives(params, a, b, score, x, weight, n_models, ridge)
        step = np.linalg.solve(hess, grad)
        size = 1.0
        while True:
            candidate = params + size * step
            new_objective = _objective(candidate, a, b, score, x, weight, n_models, ridge)
            if new_objective >= objective - 1e-12 or size < 1e-6:
                break
            size /= 2
        params, objective = candidate, new_objective
        if np.max(np.abs(size * step)) < tol:
            break
    return params


def _logits(params: np.ndarray, a: np.ndarray, b: np.ndarray, x: np.ndarray, n_models: int) -> np.ndarray:
    return params[a] - params[b] + x @ params[n_models:]


def _objective(params, a, b, score, x, weight, n_models, ridge) -> float:
    z = _logits(params, a, b, x, n_models)
    loglik = score * -np.logaddexp(0.0, -z) + (1.0 - score) * -np.logaddexp(0.0, z)
    theta, beta = params[:n_models], params[n_models:]
    return float(np.sum(weight * loglik) - 0.5 * ridge * theta @ theta - 0.5 * BETA_RIDGE * beta @ beta)


def _derivatives(params, a, b, score, x, weight, n_models, ridge) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and negative Hessian of the objective."""
    k = x.shape[1]
    p = 1.0 / (1.0 + np.exp(-_logits(params, a, b, x, n_models)))
    r, w = weight * (score - p), weight * p * (1.0 - p)
    grad = np.concatenate([np.bincount(a, r, n_models) - np.bincount(b, r, n_models), x.T @ r])
    grad[:n_models] -= ridge * params[:n_models]
    grad[n_models:] -= BETA_RIDGE * params[n_models:]
    pairs = np.bincount(a * n_models + b, w, n_models * n_models).reshape(n_models, n_models)
    block = np.diag(np.bincount(a, w, n_models) + np.bincount(b, w, n_models) + ridge) - pairs - pairs.T
    cross = np.column_stack([np.bincount(a, w * x[:, j], n_models) - np.bincount(b, w * x[:, j], n_models)
                             for j in range(k)]) if k else np.zeros((n_models, 0))
    inner = (x * w[:, None]).T @ x + BETA_RIDGE * np.eye(k)
    hess = np.block([[block, cross], [cross.T, inner]])
    return grad, hess


def _to_scale(theta: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Elo scale with the mean of the `centre` models (a boolean mask) at 1000."""
    return INIT + (theta - theta[centre].mean()) * SCALE / math.log(BASE)


def _mask(models: list[str], reference: list[str] | None) -> np.ndarray:
    wanted = set(reference or models)
    mask = np.array([m in wanted for m in models])
    return mask if mask.any() else np.ones(len(models), dtype=bool)


def _inputs(battles: pd.DataFrame, counts: pd.DataFrame | None) -> tuple[list[str], np.ndarray, np.ndarray,
                                                                         np.ndarray, np.ndarray]:
    models = models_of(battles)
    a, b = model_codes(battles, models)
    x = style_matrix(counts if counts is not None else style_counts(battles))
    return models, a, b, scores(battles), x


def style_fit(battles: pd.DataFrame, counts: pd.DataFrame | None = None,
              reference: list[str] | None = None) -> tuple[pd.Series, pd.Series]:
    """(style-controlled ratings on the Elo scale, the `reference` models (default: all) averaging
    1000; the style coefficients in log-odds per standard deviation of each feature)."""
    models, a, b, s, x = _inputs(battles, counts)
    params = fit_bt_style(a, b, s, x, np.ones(len(s)), len(models))
    centre = _mask(models, reference)
    return (pd.Series(_to_scale(params[:len(models)], centre), index=models, name="style_rating"),
            pd.Series(params[len(models):], index=list(FEATURES), name="coefficient"))


def style_bootstrap(battles: pd.DataFrame, rounds: int, seed: int = 0, counts: pd.DataFrame | None = None,
                    reference: list[str] | None = None) -> pd.DataFrame:
    """Style-controlled ratings refitted on `rounds` resamples of the battles; NaN for a model
    absent from a round. (The features are standardised once, on all battles.)"""
    models, a, b, s, x = _inputs(battles, counts)
    centre = _mask(models, reference)
    rng = np.random.default_rng(seed)
    start = fit_bt_style(a, b, s, x, np.ones(len(s)), len(models))
    rows = []
    for w in rng.multinomial(len(s), np.full(len(s), 1.0 / len(s)), size=rounds).astype(float):
        theta = fit_bt_style(a, b, s, x, w, len(models), start=start)[:len(models)]
        present = np.bincount(a, w, len(models)) + np.bincount(b, w, len(models)) > 0
        rows.append(np.where(present, _to_scale(theta, centre & present if (centre & present).any() else present),
                             np.nan))
    return pd.DataFrame(rows, columns=models)


def style_table(battles: pd.DataFrame, rounds: int = 200, seed: int = 0, counts: pd.DataFrame | None = None,
                ranked: list[str] | None = None) -> tuple[pd.DataFrame, pd.Series]:
    """The style-controlled columns for the leaderboard (style_rating, its interval, its rank
    among the `ranked` models, who also set the scale's mean) and the style coefficients."""
    if battles.empty:
        return pd.DataFrame(columns=list(STYLE_COLUMNS)), pd.Series(dtype=float, name="coefficient")
    rating, coefficients = style_fit(battles, counts, ranked)
    if rounds > 0:
        bounds = intervals(style_bootstrap(battles, rounds, seed, counts, ranked))
    else:
        bounds = pd.DataFrame({"lower": rating, "upper": rating})
    table = pd.DataFrame({"style_rating": rating, "style_lower": bounds["lower"], "style_upper": bounds["upper"]})
    keep = [m for m in (ranked if ranked is not None else list(table.index)) if m in table.index]
    table.loc[~table.index.isin(keep), ["style_lower", "style_upper"]] = np.nan  # preliminary: see ratings
    table["style_rank"] = ranks(table.loc[keep, "style_lower"], table.loc[keep, "style_upper"]).reindex(
        table.index).astype("Int64")
    return table.rename_axis("model").reset_index()[list(STYLE_COLUMNS)], coefficients

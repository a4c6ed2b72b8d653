"""One board from human votes and a judge's verdicts: Bradley-Terry with a weight per source.

A human vote weighs 1; a judge's verdict on a battle weighs w, split between its two orders
(w/2 each: the two are one verdict asked twice). The fit is the board's own on the summed
outcome counts, so w = 0 is the human board exactly. `auto_weight` picks w by how well the fit
predicts human votes it did not see (k-fold, log-loss): a judge that guesses only pulls the
ratings together, so its w falls to about 0 (at most the smallest step, where a few human votes
gain from a little shrinkage); a judge that knows what people prefer earns weight, most
where human votes are few. A model with verdicts but no counted human vote is marked
provisional: its rating rests on the judge alone. Pure numpy/pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from webui.leaderboard.stats.ratings import BASE, INIT, SCALE, Coded, encode, fit_bt, grouped_keys

WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0)  # what `auto` tries
FOLDS = 5
COLUMNS = ("model", "rating", "human_battles", "judge_judgments", "provisional")


@dataclass(frozen=True)
class AutoWeight:
    weight: float
    log_loss: pd.Series  # by candidate weight: mean held-out log-loss per human vote


def composite_board(human: pd.DataFrame, judged: pd.DataFrame, weight: float) -> pd.DataFrame:
    """Ratings from `human` battles (model_a, model_b, winner) weighing 1 each and `judged`
    judgments (the same columns, one row per order) weighing weight/2 each, best first."""
    if not 0 <= weight < math.inf:
        raise ValueError(f"judge weight: a number of 0 or more, got {weight}")
    coded_h, coded_j = _coded(human, judged)
    models = coded_h.models
    if not models:
        return pd.DataFrame(columns=list(COLUMNS))
    theta = _fit(coded_h, coded_j, weight, np.ones(len(coded_h.a), dtype=bool))
    human_n = np.bincount(coded_h.a, minlength=len(models)) + np.bincount(coded_h.b, minlength=len(models))
    judge_n = np.bincount(coded_j.a, minlength=len(models)) + np.bincount(coded_j.b, minlength=len(models))
    # centred on the models people rated, as the human board is: a judge-only model moves no one
    rated = human_n > 0 if (human_n > 0).any() else np.ones(len(models), dtype=bool)
    table = pd.DataFrame(
        {
            "model": models,
            "rating": INIT + (theta - theta[rated].mean()) * SCALE / math.log(BASE),
            "human_battles": human_n,
            "judge_judgments": judge_n if weight else np.zeros_like(judge_n),
            "provisional": (human_n == 0) & (judge_n > 0),
        }
    )
    if not weight:
        table = table[table["human_battles"] > 0]
    return table.sort_values("rating", ascending=False, kind="stable").reset_index(drop=True)


def auto_weight(
    human: pd.DataFrame, judged: pd.DataFrame, weights: tuple[float, ...] = WEIGHTS, folds: int = FOLDS, seed: int = 0
) -> AutoWeight:
    """The weight among `weights` whose fit best predicts held-out human votes (ties score 0.5)."""
    coded_h, coded_j = _coded(human, judged)
    n = len(coded_h.a)
    if n < folds or not len(coded_j.a):
        return AutoWeight(0.0, pd.Series({0.0: math.nan}))
    fold = np.random.default_rng(seed).permutation(n) % folds
    losses = {}
    for w in weights:
        total = 0.0
        for k in range(folds):
            held = fold == k
            theta = _fit(coded_h, coded_j, w, ~held)
            p = 1.0 / (1.0 + np.exp(theta[coded_h.b[held]] - theta[coded_h.a[held]]))
            p = np.clip(p, 1e-9, 1 - 1e-9)
            s = coded_h.score[held]
            total -= float(np.sum(s * np.log(p) + (1 - s) * np.log(1 - p)))
        losses[w] = total / n
    series = pd.Series(losses, name="log_loss")
    return AutoWeight(float(series.idxmin()), series)


def _coded(human: pd.DataFrame, judged: pd.DataFrame) -> tuple[Coded, Coded]:
    """Both sources coded on one list of models."""
    both = encode(pd.concat([human[["model_a", "model_b", "winner"]], judged[["model_a", "model_b", "winner"]]]))
    h = len(human)
    return (
        Coded(both.models, both.a[:h], both.b[:h], both.score[:h]),
        Coded(both.models, both.a[h:], both.b[h:], both.score[h:]),
    )


def _fit(human: Coded, judged: Coded, weight: float, keep: np.ndarray) -> np.ndarray:
    counts = np.bincount(human.keys()[keep], minlength=3 * len(human.models) ** 2).astype(float)
    if weight:
        counts += weight / 2 * np.bincount(judged.keys(), minlength=len(counts))
    g = grouped_keys(counts, human.models)
    return fit_bt(g.outcomes, g.score, g.weight, len(g.models))

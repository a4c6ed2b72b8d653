"""Vote hygiene per voter: a daily cap on counted votes, and voters whose votes disagree with
everyone else's far beyond chance. Pure pandas/numpy.

A voter is the `voter` column of the battles table: the hashed user when logged in, else the
hashed address (webui.leaderboard.battles.voter_of); votes without either are never capped or
flagged (there is nothing to tell their voters apart by).

The disagreement check, for each voter with enough decisive votes (ties say nothing here):
Bradley-Terry is fitted on every *other* voter's battles, and each of the voter's decisive votes
is compared with the favourite of that fit. An honest voter picks the favourite with probability
q_i = max(p_i, 1 - p_i), so the number of agreements has mean sum q_i and variance
sum q_i (1 - q_i); the one-sided normal p-value of the observed count, multiplied by the number
of voters tested (Bonferroni), flags voters below `alpha`. It catches a voter who systematically
votes for the weaker model; it cannot catch one who votes like everyone else, nor tell a
sincere minority taste from sabotage, which is why flagged votes are left out only on request.
"""

from __future__ import annotations

import datetime as dt
import math
from statistics import NormalDist

import numpy as np
import pandas as pd

from webui.leaderboard.ratings import fit_bt, model_codes, models_of, scores

MIN_VOTES = 20  # decisive votes before a voter is checked
ALPHA = 0.01  # family-wise false-flag rate over the voters checked
VOTER_COLUMNS = ("voter", "votes", "decisive", "agreed", "expected", "z", "p_value", "flagged")


def utc_day(tstamp: float) -> str:
    return dt.datetime.fromtimestamp(float(tstamp), tz=dt.timezone.utc).strftime("%Y-%m-%d")


def over_daily_cap(battles: pd.DataFrame, eligible: pd.Series, cap: int) -> pd.Series:
    """Which eligible battles come after the voter's first `cap` eligible ones of the same UTC
    day (in time order). cap 0: none."""
    out = pd.Series(False, index=battles.index)
    if cap <= 0 or battles.empty:
        return out
    pool = battles[eligible & (battles["voter"] != "")].sort_values("tstamp", kind="stable")
    days = pool["tstamp"].map(utc_day)
    nth = pool.groupby([pool["voter"], days]).cumcount()
    out.loc[nth.index[nth >= cap]] = True
    return out


def voter_agreement(battles: pd.DataFrame, min_votes: int = MIN_VOTES, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per voter with at least `min_votes` decisive votes: how often they picked the
    favourite of everyone else's ratings, against how often an honest voter would."""
    if battles.empty:
        return pd.DataFrame(columns=list(VOTER_COLUMNS))
    voters = battles["voter"].to_numpy(dtype=object)
    decisive = battles["winner"].isin(["model_a", "model_b"]).to_numpy() & (voters != "")
    totals = pd.Series(voters[voters != ""]).value_counts()
    counts = pd.Series(voters[decisive]).value_counts()
    candidates = [v for v, n in counts.items() if n >= min_votes]
    if not candidates:
        return pd.DataFrame(columns=list(VOTER_COLUMNS))
    models = models_of(battles)
    a, b = model_codes(battles, models)
    outcomes, score, inverse = _unique_outcomes(a, b, scores(battles))
    everyone = np.bincount(inverse, minlength=len(score)).astype(float)
    rows = []
    for voter in candidates:
        mine = voters == voter
        others = everyone - np.bincount(inverse[mine], minlength=len(score))
        theta = fit_bt(outcomes, score, others, len(models))
        played = (np.bincount(outcomes[:, 0], others, len(models)) + np.bincount(outcomes[:, 1], others, len(models))) > 0
        rows.append(_check(voter, theta, played, a[mine & decisive], b[mine & decisive],
                           battles["winner"].to_numpy()[mine & decisive]))
    table = pd.DataFrame([r for r in rows if r is not None], columns=list(VOTER_COLUMNS[:-1]))
    if table.empty:
        return pd.DataFrame(columns=list(VOTER_COLUMNS))
    table["votes"] = table["voter"].map(totals).astype(int)
    table["flagged"] = table["p_value"] * len(table) < alpha
    return table.sort_values("z").reset_index(drop=True)[list(VOTER_COLUMNS)]


def _unique_outcomes(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (a, b, score) rows, their scores, and which one each battle is."""
    rows = np.column_stack([a, b, np.round(s * 2)]).astype(np.int64)
    unique, inverse = np.unique(rows, axis=0, return_inverse=True)
    return unique[:, :2], unique[:, 2] / 2.0, inverse.ravel()


def _check(voter: str, theta: np.ndarray, played: np.ndarray, a: np.ndarray, b: np.ndarray,
           winner: np.ndarray) -> dict | None:
    """Agreement of one voter's decisive votes with the favourites of everyone else's ratings
    (only battles between models the others have rated)."""
    known = played[a] & played[b]
    if not known.any():
        return None
    a, b, winner = a[known], b[known], winner[known]
    p_a = 1.0 / (1.0 + np.exp(theta[b] - theta[a]))
    favourite_a = p_a >= 0.5
    q = np.where(favourite_a, p_a, 1.0 - p_a)
    agreed = int(((winner == "model_a") == favourite_a).sum())
    expected, variance = float(q.sum()), float((q * (1.0 - q)).sum())
    z = (agreed - expected) / math.sqrt(variance) if variance > 0 else 0.0
    return {"voter": voter, "votes": 0, "decisive": int(known.sum()), "agreed": agreed, "expected": expected,
            "z": z, "p_value": NormalDist().cdf(z)}

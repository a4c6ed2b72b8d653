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

from webui.leaderboard.ratings import Coded, Grouped, encode, fit_bt, fit_bt_many

MIN_VOTES = 20  # decisive votes before a voter is checked
ALPHA = 0.01  # family-wise false-flag rate over the voters checked
VOTER_COLUMNS = ("voter", "votes", "decisive", "agreed", "expected", "z", "p_value", "flagged")


def utc_day(tstamp: float) -> str:
    return dt.datetime.fromtimestamp(float(tstamp), tz=dt.timezone.utc).strftime("%Y-%m-%d")


def utc_day_number(tstamps: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 UTC of each timestamp: the same days as `utc_day`, as integers
    (POSIX time has no leap seconds, so a UTC day is always 86,400 of them)."""
    return np.floor(np.asarray(tstamps, dtype=float) / 86400.0).astype(np.int64)


def over_daily_cap(battles: pd.DataFrame, eligible: pd.Series, cap: int) -> pd.Series:
    """Which eligible battles come after the voter's first `cap` eligible ones of the same UTC
    day (in time order). cap 0: none."""
    out = pd.Series(False, index=battles.index)
    if cap <= 0 or battles.empty:
        return out
    pool = battles[eligible & (battles["voter"] != "")].sort_values("tstamp", kind="stable")
    voter, _ = pd.factorize(pool["voter"])
    nth = pd.Series(np.zeros(len(pool)), index=pool.index).groupby(
        [voter, utc_day_number(pool["tstamp"].to_numpy(float))]).cumcount()
    out.loc[nth.index[nth.to_numpy() >= cap]] = True
    return out


def voter_agreement(battles: pd.DataFrame, min_votes: int = MIN_VOTES, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per voter with at least `min_votes` decisive votes: how often they picked the
    favourite of everyone else's ratings, against how often an honest voter would. Voters and
    models are integer codes; each voter's fit starts from everyone's (a few Newton steps)."""
    if battles.empty:
        return pd.DataFrame(columns=list(VOTER_COLUMNS))
    voter, names = pd.factorize(battles["voter"].fillna(""))
    names = np.asarray(names, dtype=object)
    voter = np.where(names[voter] == "", -1, voter) if len(names) else voter  # "" is no voter
    coded = encode(battles)
    decisive = (coded.score != 0.5) & (voter >= 0)
    totals, counts = np.bincount(voter[voter >= 0], minlength=len(names)), np.bincount(voter[decisive],
                                                                                        minlength=len(names))
    candidates = [int(v) for v in pd.Series(counts).sort_values(ascending=False, kind="stable").index
                  if counts[v] >= min_votes]
    if not candidates:
        return pd.DataFrame(columns=list(VOTER_COLUMNS))
    g = coded.grouped()
    lookup = np.zeros(len(coded.models) ** 2 * 3, dtype=np.int64)
    lookup[np.flatnonzero(np.bincount(coded.keys(), minlength=len(lookup)))] = np.arange(len(g.score))
    rows = _checks(candidates, names, voter, lookup[coded.keys()], g, coded, decisive)
    table = pd.DataFrame([{**r, "votes": int(totals[v])} for v, r in rows if r is not None],
                         columns=list(VOTER_COLUMNS[:-1]))
    if table.empty:
        return pd.DataFrame(columns=list(VOTER_COLUMNS))
    table["flagged"] = table["p_value"] * len(table) < alpha
    return table.sort_values("z").reset_index(drop=True)[list(VOTER_COLUMNS)]


def _checks(candidates: list[int], names: np.ndarray, voter: np.ndarray, outcome: np.ndarray, g: Grouped,
            coded: Coded, decisive: np.ndarray, chunk: int = 256) -> list[tuple[int, dict | None]]:
    """`_check` of each candidate voter, whose battles are a slice of the battles sorted by voter;
    the leave-one-voter-out fits run `chunk` voters at a time, each from everyone's fit."""
    n = len(g.models)
    order = np.argsort(voter, kind="stable")
    ends = np.searchsorted(voter[order], np.arange(len(names) + 1), side="left")
    everyone = fit_bt(g.outcomes, g.score, g.weight, n)
    rows = []
    for first in range(0, len(candidates), chunk):
        group = candidates[first:first + chunk]
        others = np.stack([g.weight - np.bincount(outcome[order[ends[v]:ends[v + 1]]], minlength=len(g.score))
                           for v in group])
        thetas = fit_bt_many(g.outcomes, g.score, others, n, start=everyone)
        for v, theta, w in zip(group, thetas, others, strict=True):
            played = (np.bincount(g.outcomes[:, 0], w, n) + np.bincount(g.outcomes[:, 1], w, n)) > 0
            mine = order[ends[v]:ends[v + 1]]
            votes = mine[decisive[mine]]
            rows.append((v, _check(str(names[v]), theta, played, coded.a[votes], coded.b[votes],
                                   coded.score[votes] == 1.0)))
    return rows


def _check(voter: str, theta: np.ndarray, played: np.ndarray, a: np.ndarray, b: np.ndarray,
           a_won: np.ndarray) -> dict | None:
    """Agreement of one voter's decisive votes with the favourites of everyone else's ratings
    (only battles between models the others have rated)."""
    known = played[a] & played[b]
    if not known.any():
        return None
    a, b, a_won = a[known], b[known], a_won[known]
    p_a = 1.0 / (1.0 + np.exp(theta[b] - theta[a]))
    favourite_a = p_a >= 0.5
    q = np.where(favourite_a, p_a, 1.0 - p_a)
    agreed = int((a_won == favourite_a).sum())
    expected, variance = float(q.sum()), float((q * (1.0 - q)).sum())
    z = (agreed - expected) / math.sqrt(variance) if variance > 0 else 0.0
    return {"voter": voter, "votes": 0, "decisive": int(known.sum()), "agreed": agreed, "expected": expected,
            "z": z, "p_value": NormalDist().cdf(z)}

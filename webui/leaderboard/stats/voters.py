"""Vote hygiene per voter: a daily cap on counted votes, and voters whose votes disagree with
everyone else's far beyond chance. Pure pandas/numpy.

A voter is the `voter` column of the battles table: the hashed user when logged in, else the
hashed address (webui.leaderboard.votes.rows.voter_of); votes without either are never capped or
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
from statistics import NormalDist

import numpy as np
import pandas as pd

from webui.leaderboard.stats.battle_codes import Coded, encode
from webui.leaderboard.stats.bradley_terry import fit_bt, fit_bt_many

MIN_VOTES = 20  # decisive votes before a voter is checked
ALPHA = 0.01  # family-wise false-flag rate over the voters checked
VOTER_COLUMNS = ("voter", "votes", "decisive", "agreed", "expected", "z", "p_value", "flagged")
AGREEMENT_READS = ("voter", "model_a", "model_b", "winner")  # the battles' columns voter_agreement reads


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
    nth = (
        pd.Series(np.zeros(len(pool)), index=pool.index)
        .groupby([voter, utc_day_number(pool["tstamp"].to_numpy(float))])
        .cumcount()
    )
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
    totals, counts = (
        np.bincount(voter[voter >= 0], minlength=len(names)),
        np.bincount(voter[decisive], minlength=len(names)),
    )
    candidates = [
        int(v) for v in pd.Series(counts).sort_values(ascending=False, kind="stable").index if counts[v] >= min_votes
    ]
    if not candidates:
        return pd.DataFrame(columns=list(VOTER_COLUMNS))
    thetas, played = _leave_one_out(candidates, voter, coded)
    table = _agreement(np.array(candidates), voter, coded, decisive, thetas, played)
    table["voter"] = [str(names[v]) for v in table["voter"]]
    table["votes"] = totals[table["votes"].to_numpy(int)] if len(table) else []
    if table.empty:
        return pd.DataFrame(columns=list(VOTER_COLUMNS))
    table["flagged"] = table["p_value"] * len(table) < alpha
    return table.sort_values("z").reset_index(drop=True)[list(VOTER_COLUMNS)]


def _leave_one_out(
    candidates: list[int], voter: np.ndarray, coded: Coded, chunk: int = 256
) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate voter (rows): the strengths fitted on everyone else's battles, and which
    models those battles involve. The fits run `chunk` voters at a time, from everyone's fit."""
    g = coded.grouped()
    n, k = len(g.models), len(g.score)
    lookup = np.zeros(3 * n * n, dtype=np.int64)
    lookup[np.flatnonzero(np.bincount(coded.keys(), minlength=len(lookup)))] = np.arange(k)
    row = np.full(voter.max() + 1, -1)
    row[candidates] = np.arange(len(candidates))
    mine = np.where(voter >= 0, row[np.maximum(voter, 0)], -1)
    own = np.bincount(mine[mine >= 0] * k + lookup[coded.keys()][mine >= 0], minlength=len(candidates) * k).reshape(
        len(candidates), k
    )
    others = g.weight - own
    involved = np.zeros((k, n))
    involved[np.arange(k), g.outcomes[:, 0]] = involved[np.arange(k), g.outcomes[:, 1]] = 1.0
    everyone = fit_bt(g.outcomes, g.score, g.weight, n)
    thetas = np.concatenate(
        [
            fit_bt_many(g.outcomes, g.score, others[i : i + chunk], n, start=everyone)
            for i in range(0, len(candidates), chunk)
        ]
    )
    return thetas, others @ involved > 0


def _agreement(
    candidates: np.ndarray,
    voter: np.ndarray,
    coded: Coded,
    decisive: np.ndarray,
    thetas: np.ndarray,
    played: np.ndarray,
) -> pd.DataFrame:
    """Agreement of each candidate's decisive votes with the favourites of everyone else's
    ratings (only battles between models the others have rated). Columns VOTER_COLUMNS but
    flagged, with voter and votes holding the voter's code."""
    row = np.full(voter.max() + 1, -1)
    row[candidates] = np.arange(len(candidates))
    mine = np.where(decisive, row[np.maximum(voter, 0)], -1)
    take = np.flatnonzero(mine >= 0)
    c, a, b = mine[take], coded.a[take], coded.b[take]
    known = played[c, a] & played[c, b]
    c, a, b, a_won = c[known], a[known], b[known], coded.score[take][known] == 1.0
    p_a = 1.0 / (1.0 + np.exp(thetas[c, b] - thetas[c, a]))
    favourite_a = p_a >= 0.5
    q = np.where(favourite_a, p_a, 1.0 - p_a)
    size = len(candidates)
    counted = np.bincount(c, minlength=size)
    agreed = np.bincount(c, a_won == favourite_a, size).astype(np.int64)
    expected, variance = np.bincount(c, q, size), np.bincount(c, q * (1.0 - q), size)
    z = np.divide(agreed - expected, np.sqrt(variance), out=np.zeros(size), where=variance > 0)
    table = pd.DataFrame(
        {
            "voter": candidates,
            "votes": candidates,
            "decisive": counted,
            "agreed": agreed,
            "expected": expected,
            "z": z,
            "p_value": [NormalDist().cdf(v) for v in z],
        }
    )
    return table[counted > 0].reset_index(drop=True)

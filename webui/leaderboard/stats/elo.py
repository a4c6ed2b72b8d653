"""Online Elo: ratings updated battle by battle in time order (FastChat's), shown beside the
Bradley-Terry ratings the board ranks by. Pure pandas/numpy; compiled where the install built
webui/leaderboard/stats/_elo.c (the same numbers).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from webui.leaderboard.stats.battle_codes import Coded, encode
from webui.leaderboard.stats.scale import BASE, INIT, SCALE

ELO_K = 4.0  # FastChat's online Elo step
_compiled_elo_updates: Callable[..., list[float]] | None
try:
    from webui.leaderboard.stats._elo import elo_updates as _compiled_elo_updates
except ImportError:  # not built (no C compiler at install): the Python version below
    _compiled_elo_updates = None


def online_elo(
    battles: pd.DataFrame, k: float = ELO_K, scale: float = SCALE, base: float = BASE, init: float = INIT
) -> pd.Series:
    """Elo updated battle by battle in time order. Depends on the order, which is why the
    leaderboard ranks by Bradley-Terry and shows Elo only alongside."""
    return elo_of(encode(battles), time_order(battles), k, scale, base, init)


def time_order(battles: pd.DataFrame) -> np.ndarray | None:
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

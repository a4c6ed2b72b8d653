"""Tournaments between synthetic models of known strength: the leaderboard must recover the order,
and its 95% intervals must cover the true ratings about 95% of the time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from webui.leaderboard import ratings

TRUE = {"m0": 1150.0, "m1": 1050.0, "m2": 1000.0, "m3": 900.0, "m4": 900.0}


def tournament(true: dict[str, float], battles: int, rng: np.random.Generator) -> pd.DataFrame:
    """Random pairs; A wins with the Bradley-Terry probability of the true ratings."""
    names = list(true)
    a = rng.integers(0, len(names), battles)
    b = (a + rng.integers(1, len(names), battles)) % len(names)  # never the same model twice
    strength = np.array([true[n] for n in names])
    p_a = 1.0 / (1.0 + 10.0 ** ((strength[b] - strength[a]) / 400.0))
    return pd.DataFrame({
        "model_a": np.array(names)[a], "model_b": np.array(names)[b],
        "winner": np.where(rng.random(battles) < p_a, "model_a", "model_b"),
        "tstamp": np.arange(battles, dtype=float),
    })


def centred(true: dict[str, float]) -> pd.Series:
    """Ratings are only defined up to a shift; ours put the mean at 1000."""
    series = pd.Series(true)
    return series - series.mean() + 1000.0


def test_the_ranking_is_recovered():
    true = {f"m{i}": 1000.0 + 80.0 * (5 - i) for i in range(6)}
    table = ratings.leaderboard(tournament(true, 6000, np.random.default_rng(11)), rounds=100, seed=0)
    assert list(table["model"]) == list(true)  # best first, in the true order
    assert list(table["rank"]) == [1, 2, 3, 4, 5, 6]  # 80 points apart: every interval separates
    errors = (table.set_index("model")["rating"] - centred(true)).abs()
    assert errors.max() < 30


def coverage(level: float, simulations: int = 60, rounds: int = 200, battles: int = 800) -> float:
    rng = np.random.default_rng(2024)
    truth = centred(TRUE)
    hits: list[bool] = []
    for sim in range(simulations):
        samples = ratings.bootstrap_bt(tournament(TRUE, battles, rng), rounds, seed=sim)
        bounds = ratings.intervals(samples, level)
        hits += list((bounds["lower"] <= truth[bounds.index]) & (truth[bounds.index] <= bounds["upper"]))
    return float(np.mean(hits))


def test_intervals_cover_the_true_ratings_at_the_promised_rate():
    rate = coverage(0.95)
    assert 0.90 <= rate <= 0.99, f"95% intervals covered the truth {rate:.1%} of the time"


def test_the_coverage_check_can_fail():
    """Intervals that are too narrow are caught: 50% intervals fall far below 90% coverage."""
    assert coverage(0.50, simulations=20) < 0.75

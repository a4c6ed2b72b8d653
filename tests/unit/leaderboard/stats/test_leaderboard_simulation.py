"""Tournaments between synthetic models of known strength: the leaderboard must recover the order,
and its 95% intervals must cover the true ratings about 95% of the time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from webui.leaderboard.stats import bradley_terry, ratings, style

TRUE = {"m0": 1150.0, "m1": 1050.0, "m2": 1000.0, "m3": 900.0, "m4": 900.0}


def tournament(true: dict[str, float], battles: int, rng: np.random.Generator) -> pd.DataFrame:
    """Random pairs; A wins with the Bradley-Terry probability of the true ratings."""
    names = list(true)
    a = rng.integers(0, len(names), battles)
    b = (a + rng.integers(1, len(names), battles)) % len(names)  # never the same model twice
    strength = np.array([true[n] for n in names])
    p_a = 1.0 / (1.0 + 10.0 ** ((strength[b] - strength[a]) / 400.0))
    return pd.DataFrame(
        {
            "model_a": np.array(names)[a],
            "model_b": np.array(names)[b],
            "winner": np.where(rng.random(battles) < p_a, "model_a", "model_b"),
            "tstamp": np.arange(battles, dtype=float),
        }
    )


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
        samples = bradley_terry.bootstrap_bt(tournament(TRUE, battles, rng), rounds, seed=sim)
        bounds = bradley_terry.intervals(samples, level)
        hits += list((bounds["lower"] <= truth[bounds.index]) & (truth[bounds.index] <= bounds["upper"]))
    return float(np.mean(hits))


def test_intervals_cover_the_true_ratings_at_the_promised_rate():
    rate = coverage(0.95)
    assert 0.90 <= rate <= 0.99, f"95% intervals covered the truth {rate:.1%} of the time"


def test_the_coverage_check_can_fail():
    """Intervals that are too narrow are caught: 50% intervals fall far below 90% coverage."""
    assert coverage(0.50, simulations=20) < 0.75


STYLE_LENGTH = {"m0": 100, "m1": 400, "m2": 100, "m3": 250, "m4": 100}  # typical reply length of each model


def style_tournament(battles: int, beta: float, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`tournament`, with style: voters also prefer the longer reply (log-odds `beta` per unit of
    (len_a - len_b) / (len_a + len_b)), and some models write longer replies than others. Returns
    the battles and their style counts (the markdown counts are noise, with no effect)."""
    names = list(TRUE)
    a = rng.integers(0, len(names), battles)
    b = (a + rng.integers(1, len(names), battles)) % len(names)
    typical = np.array([STYLE_LENGTH[n] for n in names], dtype=float)
    la = np.floor(typical[a] * rng.lognormal(0.0, 0.6, battles)) + 1
    lb = np.floor(typical[b] * rng.lognormal(0.0, 0.6, battles)) + 1
    strength = np.array([TRUE[n] for n in names]) * np.log(10.0) / 400.0
    z = strength[a] - strength[b] + beta * (la - lb) / (la + lb)
    frame = pd.DataFrame(
        {
            "model_a": np.array(names)[a],
            "model_b": np.array(names)[b],
            "winner": np.where(rng.random(battles) < 1.0 / (1.0 + np.exp(-z)), "model_a", "model_b"),
            "tstamp": np.arange(battles, dtype=float),
        }
    )
    counts = pd.DataFrame({"length_a": la, "length_b": lb})
    for feature in ("headers", "bold", "lists"):
        counts[f"{feature}_a"], counts[f"{feature}_b"] = rng.poisson(1.0, battles), rng.poisson(1.0, battles)
    return frame, counts.astype(float)


def style_coverage(level: float, simulations: int = 150, battles: int = 800) -> float:
    rng = np.random.default_rng(7)
    truth = centred(TRUE)
    hits: list[bool] = []
    for _ in range(simulations):
        frame, counts = style_tournament(battles, 1.5, rng)
        bounds = style.style_intervals(frame, level, counts)
        hits += list((bounds["lower"] <= truth[bounds.index]) & (truth[bounds.index] <= bounds["upper"]))
    return float(np.mean(hits))


def test_style_intervals_cover_the_true_ratings_at_the_promised_rate():
    """The sandwich intervals of the style-controlled ratings, on battles with a known style effect
    (and models whose replies differ in length, so style and model are correlated)."""
    rate = style_coverage(0.95)
    assert 0.90 <= rate <= 0.99, f"95% style intervals covered the truth {rate:.1%} of the time"


def test_the_style_coverage_check_can_fail():
    assert style_coverage(0.50, simulations=40) < 0.75


def test_style_control_recovers_a_known_style_effect():
    frame, counts = style_tournament(20000, 1.5, np.random.default_rng(3))
    rating, _ = style.style_fit(frame, counts)
    raw = bradley_terry.bradley_terry(frame)
    truth = centred(TRUE)
    assert (rating - truth).abs().max() < 20 < (raw - truth).abs().max()

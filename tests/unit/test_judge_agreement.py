"""A judge's agreement with people, against cases worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from webui.leaderboard.stats.agreement import Share, agreement, board_agreement, cohen_kappa


def table(rows: list[tuple[str, str | None, str | None]], models: tuple[str, str] = ("x", "y")) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"model_a": models[0], "model_b": models[1], "human": h, "verdict_ab": ab, "verdict_ba": ba}
            for h, ab, ba in rows
        ]
    )


def test_a_share_has_its_wilson_interval() -> None:
    # p = 0.8, n = 10, z = 1.96: centre (0.8 + z²/20) / (1 + z²/10) = 0.7167, half-width 0.2266
    share = Share.of(8, 10)
    assert (share.value, share.lower, share.upper) == pytest.approx((0.8, 0.4902, 0.9433), abs=1e-4)
    assert Share.of(0, 5).lower == 0.0 and Share.of(5, 5).upper == 1.0
    assert math.isnan(Share.of(0, 0).value) and Share.of(0, 0).text() == "n/a (none)"


def test_kappa_by_hand() -> None:
    # observed 3/4; chance: people say a half of the time each, the judge a quarter / three quarters
    # of the time: 0.5 * 0.25 + 0.5 * 0.75 = 0.5; kappa = (0.75 - 0.5) / (1 - 0.5) = 0.5
    human = np.array(["model_a", "model_a", "model_b", "model_b"], dtype=object)
    judge = np.array(["model_a", "model_b", "model_b", "model_b"], dtype=object)
    assert cohen_kappa(human, judge) == pytest.approx(0.5)
    assert cohen_kappa(human, human) == pytest.approx(1.0)
    assert math.isnan(cohen_kappa(np.array(["tie"] * 3, dtype=object), np.array(["tie"] * 3, dtype=object)))


def test_the_figures_of_a_small_table() -> None:
    figures = agreement(
        table(
            [
                ("model_a", "model_a", "model_a"),  # both orders right
                ("model_b", "model_a", "model_b"),  # the order decided: one right, inconsistent
                ("tie", "tie", "tie (bothbad)"),  # both ties: right with ties, out of "without ties"
                ("model_a", "model_b", None),  # one wrong, one unparsed
            ]
        ),
        rounds=0,
    )
    assert figures.battles == 4
    assert (figures.with_ties.k, figures.with_ties.n) == (5, 7)  # 7 parsed judgments, 5 equal to the vote
    assert (figures.without_ties.k, figures.without_ties.n) == (3, 5)  # the 2 tie judgments left out
    assert (figures.consistency.k, figures.consistency.n) == (2, 3)  # the last battle has one order only
    assert (figures.unparsed.k, figures.unparsed.n) == (1, 8)
    assert math.isnan(figures.kappa_lower)  # no rounds, no interval


def test_a_judge_that_guesses_has_a_kappa_about_zero_and_one_that_knows_about_one() -> None:
    rng = np.random.default_rng(3)
    human = rng.choice(["model_a", "model_b", "tie"], 600, p=[0.45, 0.45, 0.1])
    guess = table([(h, rng.choice(["model_a", "model_b"]), rng.choice(["model_a", "model_b"])) for h in human])
    figures = agreement(guess, rounds=100)
    assert figures.kappa_lower < 0 < figures.kappa_upper and abs(figures.kappa) < 0.1
    assert figures.consistency.lower < 0.5 < figures.consistency.upper
    knows = agreement(table([(h, h, h) for h in human]), rounds=50)
    assert knows.kappa == pytest.approx(1.0) and knows.with_ties.value == 1.0 and knows.consistency.value == 1.0


def battles_between(strength: dict[str, float], n: int, judge_flips: bool, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    names, rows = list(strength), []
    for _ in range(n):
        a, b = rng.choice(names, 2, replace=False)
        p = 1 / (1 + math.exp(strength[b] - strength[a]))
        human = "model_a" if rng.random() < p else "model_b"
        judged = "model_a" if rng.random() < (1 - p if judge_flips else p) else "model_b"
        rows.append({"model_a": a, "model_b": b, "human": human, "verdict_ab": judged, "verdict_ba": judged})
    return pd.DataFrame(rows)


def test_the_judges_board_against_the_peoples() -> None:
    strength = {"w": -1.5, "x": -0.5, "y": 0.5, "z": 1.5}
    same = board_agreement(battles_between(strength, 800, judge_flips=False), rounds=50)
    assert same.models == 4 and same.spearman == pytest.approx(1.0) and same.discordant == []
    flipped = board_agreement(battles_between(strength, 800, judge_flips=True), rounds=50)
    assert flipped.spearman == pytest.approx(-1.0)
    assert len(flipped.discordant) == 6 and ("z", "w") in flipped.discordant  # people put z above w
    two = board_agreement(battles_between({"x": 0.0, "y": 1.0}, 100, judge_flips=False), rounds=20)
    assert two.models == 2 and math.isnan(two.spearman)  # a rank correlation needs three models

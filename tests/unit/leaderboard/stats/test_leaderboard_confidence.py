"""Rank confidence (webui.leaderboard.stats.confidence) and speed beside quality (webui.leaderboard.stats.speed),
on constructed counts whose answers are known, and the speeds carried from a reply to the board."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.records import battle, chat_event, vote
from webui.db.columns import STYLE_COUNT_COLUMNS
from webui.leaderboard.board.build import BoardOptions, board_from_logs
from webui.leaderboard.stats import ratings, scale, style
from webui.leaderboard.stats.confidence import battles_to_separate, gain_per_battle, next_comparison, order_probability
from webui.leaderboard.stats.speed import model_speeds
from webui.leaderboard.votes.rows import vote_row
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder, read_logs
from webui.types import Finished, FinishReason

POINTS_PER_LOG_ODDS = scale.SCALE / math.log(scale.BASE)  # 173.7


def counts(*pairs: tuple[str, str, int, int]) -> pd.DataFrame:
    """Battles from (model_a, model_b, wins of a, wins of b) counts."""
    rows = []
    for a, b, wins, losses in pairs:
        rows += [{"model_a": a, "model_b": b, "winner": "model_a", "tstamp": 0.0}] * wins
        rows += [{"model_a": a, "model_b": b, "winner": "model_b", "tstamp": 0.0}] * losses
    return pd.DataFrame(rows)


def pair_of(a_wins: int, b_wins: int, rounds: int = 400, seed: int = 1) -> pd.Series:
    """The board's row of A (the upper model) for A against B alone."""
    table = ratings.leaderboard(counts(("A", "B", a_wins, b_wins)), rounds=rounds, seed=seed)
    assert list(table["model"]) == ["A", "B"] or a_wins == b_wins
    return table.iloc[0]


def test_the_worked_example_of_the_docs():
    """docs/leaderboard.md: 30 points apart with a standard error of 20 points."""
    assert order_probability(30.0, 20.0) == pytest.approx(0.9332, abs=1e-4)
    # x = 0.1727, var = 0.01325 (1/var = 75.4), (1.96/x)^2 = 128.8, p(1 - p) = 0.2481: (128.8 - 75.4) / 0.2481
    assert battles_to_separate(30.0, 20.0, POINTS_PER_LOG_ODDS) == 216
    assert gain_per_battle(30.0, 20.0, POINTS_PER_LOG_ODDS) == pytest.approx(0.00032, abs=5e-6)  # phi(1.5) x ... / 2


def test_the_formulas_at_their_edges():
    assert order_probability(0.0, 20.0) == 0.5
    assert order_probability(-30.0, 20.0) == pytest.approx(1 - 0.9332, abs=1e-4)  # an upper model rated lower
    assert order_probability(5.0, 0.0) == 1.0
    assert np.isnan(order_probability(30.0, np.nan))
    assert battles_to_separate(0.0, 20.0, POINTS_PER_LOG_ODDS) == math.inf
    assert battles_to_separate(100.0, 20.0, POINTS_PER_LOG_ODDS) == 0  # already 5 standard errors apart
    assert battles_to_separate(-30.0, 20.0, POINTS_PER_LOG_ODDS) == 216  # either order: how far apart
    assert np.isnan(battles_to_separate(30.0, np.nan, POINTS_PER_LOG_ODDS))


def test_a_clearly_separated_pair_is_sure_and_an_equal_pair_is_a_coin_toss():
    separated = pair_of(90, 10)
    assert separated["p_above_next"] > 0.999 and separated["more_battles_next"] == 0
    equal = pair_of(50, 50)
    assert equal["p_above_next"] == 0.5 and equal["more_battles_next"] == math.inf


def test_more_battles_needed_shrink_as_the_counts_grow():
    needed = [pair_of(53 * k, 47 * k)["more_battles_next"] for k in (1, 2, 4)]
    assert needed[0] > needed[1] > needed[2] > 0
    sure = [pair_of(53 * k, 47 * k)["p_above_next"] for k in (1, 2, 4)]
    assert 0.5 < sure[0] < sure[1] < sure[2] < 0.975


def test_the_battles_it_asks_for_separate_the_pair_at_95_percent():
    """525-475 is not yet significant; played on at the same share for the number of battles the
    board asks for, the pair reaches P(order right) = 0.975 (significant at 95%); half as many fall
    short, twice as many overshoot. (Many battles, so that a share in whole battles stays 52.5%.)"""
    first = pair_of(525, 475)
    extra = int(first["more_battles_next"])
    assert first["p_above_next"] < 0.96 and 200 < extra < 1000

    def sure_after(more: int) -> float:
        total = 1000 + more
        wins = round(total * 0.525)
        return float(pair_of(wins, total - wins, rounds=1000, seed=2)["p_above_next"])

    assert sure_after(extra) == pytest.approx(0.975, abs=0.006)
    assert sure_after(extra // 2) < 0.97 and sure_after(2 * extra) > 0.98


def test_the_gain_per_battle_is_the_slope_of_p_order_right():
    """The derivative of P(n) = Phi(x sqrt(1/s^2 + n p(1 - p))) at n = 0, against a finite difference."""
    difference, se = 30.0, 20.0
    x, s = difference / POINTS_PER_LOG_ODDS, se / POINTS_PER_LOG_ODDS
    w = 1.0 / (1.0 + math.exp(-x)) * (1.0 - 1.0 / (1.0 + math.exp(-x)))

    def sure(n: float) -> float:
        return float(order_probability(x * math.sqrt(1.0 / s**2 + n * w), 1.0))

    assert gain_per_battle(difference, se, POINTS_PER_LOG_ODDS) == pytest.approx(
        (sure(0.01) - sure(0.0)) / 0.01, rel=1e-3
    )
    assert gain_per_battle(0.0, se, POINTS_PER_LOG_ODDS) == 0.0  # a level pair: battles do not separate it
    assert gain_per_battle(difference, 0.0, POINTS_PER_LOG_ODDS) == 0.0  # nothing left to learn
    assert gain_per_battle(300.0, se, POINTS_PER_LOG_ODDS) < 1e-6  # already sure


def test_the_next_comparison_is_the_unsure_pair_a_battle_helps_most():
    """A far above B and C, who are close: B vs C. With B and C level instead (no battle would
    separate them) the least sure pair is B vs C, but the useful one is the unsure A vs B."""
    battles = counts(("A", "B", 90, 10), ("A", "C", 92, 8), ("B", "C", 56, 44))
    table = ratings.leaderboard(battles, rounds=200)
    assert list(table["model"]) == ["A", "B", "C"]
    assert table.loc[0, "p_above_next"] > 0.999 and 0.5 < table.loc[1, "p_above_next"] < 0.975
    assert np.isnan(table.loc[2, "p_above_next"])  # nobody below the last
    line = next_comparison(table)
    assert line.startswith("Most useful next comparison: B vs C (P(order right) = ") and "more battles between" in line
    assert next_comparison(ratings.leaderboard(battles, rounds=0)) == ""  # no bootstrap: no confidence to rank by

    level = ratings.leaderboard(counts(("A", "B", 55, 45), ("A", "C", 55, 45), ("B", "C", 50, 50)), rounds=400)
    assert list(level["model"]) == ["A", "B", "C"] and level.loc[0, "p_above_next"] < 0.975
    assert level.loc[1, "p_above_next"] == 0.5 and level.loc[1, "more_battles_next"] == math.inf
    assert next_comparison(level).startswith("Most useful next comparison: A vs B")

    sure = ratings.leaderboard(counts(("A", "B", 90, 10)), rounds=200)
    assert next_comparison(sure).startswith("Every neighbouring pair of ranked models is in a sure order")

    # B's old and new weights (two fingerprints, two rows) cannot be paired: the next pair down can
    split = table.assign(model=["B @ 1a2b3c", "B @ 9f8e7d", "C"])
    split.loc[0, ["p_above_next", "gain_next"]] = [0.6, 1.0]  # else the most useful pair
    assert next_comparison(split).startswith("Most useful next comparison: B @ 9f8e7d vs C")


def test_style_confidence_from_the_sandwich_agrees_with_the_bootstraps_without_a_style_effect():
    """Two ways to the same numbers: with no style differences the style fit is plain Bradley-Terry,
    and P(order right) from its sandwich covariance matches the raw board's from the bootstrap."""
    four = counts(
        ("A", "B", 120, 110), ("B", "C", 125, 105), ("A", "C", 130, 100), ("C", "D", 118, 112), ("B", "D", 140, 90)
    )
    two = counts(("A", "B", 525, 475))  # centred, B's rating is minus A's: the covariance is all of it
    for battles, models in ((four, list("ABCD")), (two, list("AB"))):
        raw = ratings.leaderboard(battles, rounds=1000).set_index("model")
        flat = pd.DataFrame(0.0, index=battles.index, columns=list(STYLE_COUNT_COLUMNS))
        styled = style.style_table(battles, 200, 0, flat, ranked=models)[0].set_index("model")
        assert list(raw.index) == list(styled.index) == models
        middling = raw["p_above_next"].dropna()
        assert ((middling > 0.6) & (middling < 0.97)).any()  # not at the ends, where any method agrees
        assert styled["style_p_above_next"].dropna().to_numpy() == pytest.approx(middling.to_numpy(), abs=0.02)
        assert styled["style_more_battles_next"].dropna().to_numpy() == pytest.approx(
            raw["more_battles_next"].dropna().to_numpy(), rel=0.15
        )
    no_rounds = style.style_table(two, 0, 0, flat, ranked=list("AB"))[0]  # no interval: no confidence either
    assert no_rounds["style_p_above_next"].isna().all()


def test_preliminary_models_are_not_neighbours():
    battles = counts(("A", "B", 60, 40), ("A", "C", 1, 0))
    table = ratings.leaderboard(battles, rounds=100, min_battles=50)
    assert list(table["model"]) == ["A", "B", "C"] and bool(table.loc[2, "preliminary"])
    assert table.loc[0, "p_above_next"] > 0.5 and table.loc[1:, "p_above_next"].isna().all()


def test_median_speeds_per_model_are_blank_where_not_logged():
    battles = pd.DataFrame(
        {
            "model_a": ["x", "x", "y", "z"],
            "model_b": ["y", "y", "x", "x"],
            "ttft_s_a": [0.2, 0.4, 1.0, None],
            "ttft_s_b": [1.2, None, 0.3, 0.9],
            "tokens_per_s_a": [30.0, 50.0, 10.0, None],
            "tokens_per_s_b": [12.0, None, 40.0, 20.0],
            "winner": ["model_a"] * 4,
        }
    )
    speeds = model_speeds(battles).set_index("model")
    assert speeds.loc["x", "ttft_s"] == pytest.approx(0.35) and speeds.loc["x", "tokens_per_s"] == 35.0
    assert speeds.loc["y", "ttft_s"] == 1.1 and speeds.loc["y", "tokens_per_s"] == 11.0
    assert speeds.loc["z"].isna().all()  # z's reply had no speed logged


def test_a_replys_speed_goes_from_the_recorder_to_the_board(tmp_path: Path):
    """The recorder stamps each reply's measured speed onto the votes on its conversation (with
    transcripts off too, when no chat record is written); the board takes the judged reply's."""
    rec = JsonlRecorder(tmp_path, IdentityPolicy("none"), log_transcripts=False)
    for i in range(3):
        left, right = battle("fast", "slow")
        for conv, ttft, rate in ((left, 0.1 * (i + 1), 40.0 + i), (right, 2.0, 5.0)):
            done = Finished(FinishReason.STOP, completion_tokens=9, ttft_s=ttft, tokens_per_s=rate)
            rec.chat(dataclasses.replace(chat_event(conv), finished=done))
        rec.vote(vote("rightvote", (left, right)))
    records = read_logs(tmp_path).records
    assert [r["type"] for r in records] == ["rightvote"] * 3  # no chat records: transcripts are off
    assert records[0]["states"][0]["ttft_s"] == [0.1] and records[0]["states"][1]["tokens_per_s"] == [5.0]
    row = vote_row(records[2])
    assert row is not None
    assert (row["ttft_s_a"], row["tokens_per_s_a"], row["ttft_s_b"], row["tokens_per_s_b"]) == (
        pytest.approx(0.3),
        42.0,
        2.0,
        5.0,
    )
    table = board_from_logs(tmp_path, BoardOptions(rounds=0, min_battles=1)).table.set_index("model")
    assert table.loc["fast", "ttft_s"] == pytest.approx(0.2) and table.loc["fast", "tokens_per_s"] == 41.0
    assert table.loc["slow", "ttft_s"] == 2.0 and table.loc["slow", "tokens_per_s"] == 5.0


def test_a_multi_turn_vote_carries_every_turns_speed_and_the_board_takes_the_judged_one(tmp_path: Path):
    rec = JsonlRecorder(tmp_path, IdentityPolicy("none"))
    first = battle("fast", "slow")
    second = tuple(dataclasses.replace(c, turn=2) for c in first)  # the same conversations, a turn later
    for convs, ttft in ((first, 5.0), (second, 0.7)):  # turn 1 waited for a model to load
        for conv in convs:
            done = Finished(FinishReason.STOP, ttft_s=ttft, tokens_per_s=None if ttft > 1 else 30.0)
            rec.chat(dataclasses.replace(chat_event(conv), finished=done))
    rec.vote(vote("leftvote", second))
    (record,) = [r for r in read_logs(tmp_path).records if r["type"] == "leftvote"]
    assert record["states"][0]["ttft_s"] == [5.0, 0.7] and record["states"][0]["tokens_per_s"] == [None, 30.0]
    row = vote_row(record)
    assert row is not None and (row["ttft_s_a"], row["tokens_per_s_a"]) == (0.7, 30.0)
    bad = {**record, "states": [{**s, "ttft_s": ["soon"], "tokens_per_s": [float("nan")]} for s in record["states"]]}
    row = vote_row(bad)  # not a number: no speed, and the vote still counts
    assert row is not None and row["ttft_s_a"] is None and row["tokens_per_s_b"] is None and row["base_reason"] is None

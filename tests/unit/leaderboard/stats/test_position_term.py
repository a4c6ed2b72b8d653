"""The position term: how much being shown first wins, beyond the models' strengths."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from webui.leaderboard.stats.position import position_term


def test_by_hand_two_equal_models_and_the_first_shown_wins_three_times_in_four() -> None:
    # each model is first half the time, so their strengths stay equal and gamma = logit(3/4) = ln 3
    rows = []
    for first, second in (("x", "y"), ("y", "x")):
        rows += [{"model_a": first, "model_b": second, "winner": "model_a"}] * 300
        rows += [{"model_a": first, "model_b": second, "winner": "model_b"}] * 100
    term = position_term(pd.DataFrame(rows).assign(tstamp=0.0))
    assert term.points == pytest.approx(400 * math.log(3) / math.log(10), abs=0.5)  # 190.8
    # the information of 800 battles at p = 3/4: se = 1 / sqrt(800 * 3/16) in log-odds
    se = 400 / math.log(10) / math.sqrt(800 * 3 / 16)
    assert (term.upper - term.lower) / 2 == pytest.approx(1.96 * se, rel=0.01)
    assert term.battles == 800 and "+191 Elo points" in term.text()


@pytest.mark.parametrize("gamma", [0.0, 0.4])
def test_a_known_position_effect_is_found_beside_unequal_models(gamma: float) -> None:
    strengths = {"w": -1.0, "x": 0.0, "y": 0.5, "z": 1.2}
    rng = np.random.default_rng(4)
    rows = []
    for _ in range(6000):
        a, b = rng.choice(list(strengths), 2, replace=False)
        won = rng.random() < 1 / (1 + math.exp(-(strengths[a] - strengths[b] + gamma)))
        rows.append({"model_a": a, "model_b": b, "winner": "model_a" if won else "model_b"})
    term = position_term(pd.DataFrame(rows).assign(tstamp=0.0))
    truth = gamma * 400 / math.log(10)
    assert term.lower <= truth <= term.upper, term


def test_no_battles_no_term() -> None:
    term = position_term(pd.DataFrame(columns=["model_a", "model_b", "winner", "tstamp"]))
    assert math.isnan(term.points) and term.text() == "n/a (no battles)"


def test_the_board_says_whether_voters_favour_a_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.records import battle, vote
    from webui.leaderboard.__main__ import main
    from webui.leaderboard.board.build import BoardOptions
    from webui.leaderboard.board.view import LeaderboardView
    from webui.records.privacy import IdentityPolicy
    from webui.records.storage import JsonlRecorder

    recorder = JsonlRecorder(tmp_path, IdentityPolicy("none"))
    for i in range(60):  # equal models, each on the left half the time; the left reply wins 3 in 4
        a, b = ("x", "y") if i % 2 else ("y", "x")
        recorder.vote(vote("leftvote" if i % 4 else "rightvote", battle(a, b, prompt=f"q{i}")))
    recorder.close()
    assert main([str(tmp_path), "--rounds", "0"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("Position: the left reply's edge +"))
    assert line.endswith(
        "; 60 battles); sides are drawn at random in every battle, so an interval around 0 means voters do not favour a side."
    )
    view = LeaderboardView(tmp_path, BoardOptions(rounds=0))
    try:
        view.live.sync()
        assert "Position: the left reply's edge +" in view.outputs()[2]
    finally:
        view.close()

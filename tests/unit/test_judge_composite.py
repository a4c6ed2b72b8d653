"""The composite board: human votes and a judge's verdicts in one Bradley-Terry fit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from webui.leaderboard.stats.composite import auto_weight, composite_board
from webui.leaderboard.stats.ratings import bradley_terry

TRUE = {"w": -1.0, "x": -0.3, "y": 0.3, "z": 1.0}  # log-odds strengths


def battles(n: int, seed: int, judge: str = "people") -> pd.DataFrame:
    """n battles between TRUE's models; winners as people vote, or as a judge that knows the
    strengths ("knows"), or one that tosses a coin ("guesses")."""
    rng = np.random.default_rng(seed)
    names, rows = list(TRUE), []
    for i in range(n):
        a, b = rng.choice(names, 2, replace=False)
        p = 1 / (1 + math.exp(TRUE[b] - TRUE[a]))
        won = rng.random() < (0.5 if judge == "guesses" else p)
        rows.append({"model_a": a, "model_b": b, "winner": "model_a" if won else "model_b", "tstamp": float(i)})
    return pd.DataFrame(rows)


def test_weight_zero_is_the_human_board_and_weight_two_a_fit_on_both_as_votes() -> None:
    human, judged = battles(300, 1), battles(400, 2, judge="knows")
    alone = composite_board(human, judged, 0.0).set_index("model")["rating"]
    assert alone.to_dict() == pytest.approx(bradley_terry(human).to_dict(), abs=1e-6)
    # at w = 2 each judgment weighs 1, as a vote does: the board of the two tables together
    together = composite_board(human, judged, 2.0).set_index("model")["rating"]
    direct = bradley_terry(pd.concat([human, judged], ignore_index=True))
    assert together.to_dict() == pytest.approx(direct.to_dict(), abs=1e-6)
    half = composite_board(human, judged, 1.0).set_index("model")["rating"]
    assert all(min(alone[m], together[m]) - 1e-9 <= half[m] <= max(alone[m], together[m]) + 1e-9 for m in TRUE)


def test_a_model_with_verdicts_only_is_provisional() -> None:
    human = battles(200, 3)
    judged = pd.concat(
        [battles(100, 4, judge="knows"), pd.DataFrame([{"model_a": "new", "model_b": "w", "winner": "model_a"}] * 6)]
    )
    table = composite_board(human, judged, 0.5).set_index("model")
    assert bool(table.loc["new", "provisional"]) and table.loc["new", "human_battles"] == 0
    assert not table.drop(index="new")["provisional"].any()
    assert "new" not in set(composite_board(human, judged, 0.0)["model"])  # no weight, no row
    with pytest.raises(ValueError, match="judge weight"):
        composite_board(human, judged, -1.0)


def test_auto_weight_trusts_a_judge_that_knows_and_not_one_that_guesses() -> None:
    human = battles(120, 5)  # few human votes
    knows = auto_weight(human, battles(3000, 6, judge="knows"))
    guesses = auto_weight(human, battles(3000, 7, judge="guesses"))
    assert knows.weight >= 0.5 and knows.log_loss[knows.weight] < knows.log_loss[0.0]
    # about 0: a coin-tossing judge pulls ratings together, which a little shrinkage of 120 votes
    # may reward, never more
    assert guesses.weight <= 0.05
    assert auto_weight(human.iloc[:3], battles(10, 8)).weight == 0.0  # too few votes to hold out

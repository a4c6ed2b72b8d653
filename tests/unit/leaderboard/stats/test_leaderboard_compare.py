"""`--compare A B`: is B better than A, with what a decision needs."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from webui.leaderboard.__main__ import main
from webui.leaderboard.simulate import simulate
from webui.leaderboard.stats.bradley_terry import bradley_terry
from webui.leaderboard.stats.compare import compare


def battles(rows: list[tuple[str, str, str, int]]) -> pd.DataFrame:
    out = []
    for a, b, winner, n in rows:
        out += [{"model_a": a, "model_b": b, "winner": winner}] * n
    return pd.DataFrame(out).assign(tstamp=lambda f: range(len(f)))


def test_the_record_the_difference_and_the_battles_to_settle_it() -> None:
    counted = battles(
        [
            ("a", "b", "model_b", 30),  # b beats a 30 times
            ("b", "a", "model_b", 12),  # ... and loses 12 (a was model_b there)
            ("a", "b", "tie", 5),
            ("a", "c", "model_a", 20),
            ("c", "b", "model_b", 20),
        ]
    )
    ratings = bradley_terry(counted)
    result = compare(counted, ratings, "a", "b", rounds=200, seed=1)
    assert (result.b_wins, result.ties, result.a_wins) == (30, 5, 12)
    assert result.difference == pytest.approx(ratings["b"] - ratings["a"])
    assert result.lower < result.difference < result.upper and result.p_b_better > 0.9
    reverse = compare(counted, ratings, "b", "a", rounds=200, seed=1)
    assert reverse.p_b_better == pytest.approx(1 - result.p_b_better) and reverse.a_wins == 30
    close = battles([("a", "b", "model_a", 11), ("a", "b", "model_b", 10)])
    near = compare(close, bradley_terry(close), "a", "b", rounds=200, seed=1)
    assert 0.2 < near.p_b_better < 0.5 and near.more_battles > 100  # a coin toss so far: many more needed
    assert "more battles between the two would settle it at 95%" in near.lines()[2]
    plain = compare(close, bradley_terry(close), "a", "b", rounds=0)
    assert math.isnan(plain.p_b_better) and "no interval without bootstrap rounds" in plain.lines()[0]


def test_the_command_line_answers_and_refuses_an_unknown_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    simulate(tmp_path, battles=1500, seed=4)
    assert main([str(tmp_path), "--rounds", "50", "--compare", "falcon-7b", "granite-3-8b"]) == 0
    out = capsys.readouterr().out
    assert "Is granite-3-8b better than falcon-7b? P(granite-3-8b better) = " in out
    assert "head to head: granite-3-8b won" in out
    assert main([str(tmp_path), "--rounds", "0", "--compare", "falcon-7b", "gpt-9"]) == 2
    assert "--compare: no row 'gpt-9' on the board" in capsys.readouterr().err


def test_rank_ranges_by_hand() -> None:
    from webui.leaderboard.board.display import display_table
    from webui.leaderboard.stats.ratings import ranks, worst_ranks

    lower = pd.Series({"a": 10.0, "b": 15.0, "c": 30.0})
    upper = pd.Series({"a": 20.0, "b": 25.0, "c": 40.0})
    # c is surely first; a and b overlap each other: either may be second or third
    assert ranks(lower, upper).to_dict() == {"a": 2, "b": 2, "c": 1}
    assert worst_ranks(lower, upper).to_dict() == {"a": 3, "b": 3, "c": 1}
    table = pd.DataFrame(
        {"rank": [1, 2, 2, None], "rank_worst": [1, 3, 3, None], "model": ["c", "b", "a", "new"]}
    ).astype({"rank": "Int64", "rank_worst": "Int64"})
    for column, value in (("rating", 1000.0), ("lower", 990.0), ("upper", 1010.0), ("elo", 1000.0)):
        table[column] = value
    for column in ("battles", "wins", "ties", "losses"):
        table[column] = 10
    table = table.assign(preliminary=[False, False, False, True], p_above_next=0.5, more_battles_next=3.0)
    assert list(display_table(table)["Rank"]) == ["1", "2–3", "2–3", "—"]


def test_the_board_and_its_csv_carry_the_rank_range(tmp_path: Path) -> None:
    simulate(tmp_path / "logs", battles=1500, seed=4)
    assert main([str(tmp_path / "logs"), "--rounds", "50", "--csv", str(tmp_path / "board.csv")]) == 0
    table = pd.read_csv(tmp_path / "board.csv")
    ranked = table[~table["preliminary"]]
    assert (ranked["rank_worst"] >= ranked["rank"]).all() and (ranked["rank_worst"] <= len(ranked)).all()
    assert (ranked["rank_worst"] > ranked["rank"]).any()  # somebody's interval overlaps a neighbour's
    assert table.loc[table["preliminary"], "rank_worst"].isna().all()

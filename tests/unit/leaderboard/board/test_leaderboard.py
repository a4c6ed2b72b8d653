"""Leaderboard statistics on small battles tables whose answers can be worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests.records import battle_table
from webui.leaderboard.board.build import BoardOptions, build_board
from webui.leaderboard.stats import battle_codes, bradley_terry, ratings
from webui.leaderboard.stats import elo as elo_module
from webui.leaderboard.votes.rows import Hygiene, battles_frame, counted
from webui.records.identity import identity_words


def test_online_elo_follows_the_k4_update():
    elo = elo_module.online_elo(battle_table([("a", "b", "model_a"), ("a", "b", "model_b")]))
    first = 1000 + 4 * 0.5  # equal ratings: expected score 0.5
    expected_b = 1 / (1 + 10 ** ((first - (2000 - first)) / 400))
    b_after = (2000 - first) + 4 * (1 - expected_b)
    assert elo["b"] == pytest.approx(b_after)
    assert elo["a"] + elo["b"] == pytest.approx(2000)  # Elo moves points, it never creates them


def test_ties_count_half():
    """One win and one tie: a 0.75 share, so the MLE gap is 400 * log10(3) (the ridge moves it by
    far less than a point)."""
    bt = bradley_terry.bradley_terry(battle_table([("a", "b", "model_a"), ("b", "a", "tie (bothbad)")]))
    assert bt["a"] - bt["b"] == pytest.approx(400 * math.log10(3), abs=0.5)
    assert bt.mean() == pytest.approx(1000)
    only_ties = bradley_terry.bradley_terry(battle_table([("a", "b", "tie"), ("b", "c", "tie")]))
    assert only_ties.max() - only_ties.min() == pytest.approx(0, abs=1e-6)


def test_an_unbeaten_model_gets_a_finite_rating():
    bt = bradley_terry.bradley_terry(battle_table([("a", "b", "model_a")] * 5 + [("b", "c", "model_a")] * 5))
    assert np.isfinite(bt).all() and bt["a"] > bt["b"] > bt["c"]


def test_bradley_terry_recovers_strengths():
    true = {"a": 1200.0, "b": 1000.0, "c": 800.0}
    rows = []
    for (x, y), n in {("a", "b"): 400, ("b", "c"): 400, ("a", "c"): 400}.items():
        p = 1 / (1 + 10 ** ((true[y] - true[x]) / 400))
        wins = round(n * p)
        rows += [(x, y, "model_a")] * wins + [(y, x, "model_a")] * (n - wins)  # side does not matter
    bt = bradley_terry.bradley_terry(battle_table(rows))
    for model, value in true.items():
        assert bt[model] == pytest.approx(value, abs=5)


def test_rank_counts_models_whose_interval_is_entirely_above():
    lower = pd.Series({"a": 1100, "b": 1050, "c": 990, "d": 900})
    upper = pd.Series({"a": 1200, "b": 1120, "c": 1060, "d": 1000})
    assert ratings.ranks(lower, upper).to_dict() == {"a": 1, "b": 1, "c": 2, "d": 3}


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    battles = battle_table([("a", "b", "model_a")] * 30 + [("a", "b", "model_b")] * 10 + [("b", "c", "tie")] * 20)
    first = bradley_terry.bootstrap_bt(battles, rounds=50, seed=3)
    assert first.equals(bradley_terry.bootstrap_bt(battles, rounds=50, seed=3))
    assert not first.equals(bradley_terry.bootstrap_bt(battles, rounds=50, seed=4))
    table = ratings.leaderboard(battles, rounds=100, seed=0).set_index("model")
    assert (table["lower"] <= table["rating"]).all() and (table["rating"] <= table["upper"]).all()
    assert table.loc["a", "battles"] == 40 and table.loc["b", "battles"] == 60
    assert (table.loc["b", ["wins", "ties", "losses"]] == [10, 20, 30]).all()


def test_without_rounds_the_interval_is_the_point():
    table = ratings.leaderboard(battle_table([("a", "b", "model_a"), ("a", "b", "model_b")] * 3), rounds=0)
    assert (table["lower"] == table["rating"]).all() and (table["upper"] == table["rating"]).all()
    assert list(ratings.leaderboard(battle_table([]).astype({"model_a": str}), rounds=10).columns) == list(
        ratings.TABLE_COLUMNS
    )


def test_pair_counts_and_win_fraction():
    battles = battle_table([("a", "b", "model_a"), ("b", "a", "model_a"), ("a", "b", "tie"), ("a", "c", "model_b")])
    counts = battle_codes.pair_counts(battles)
    assert counts.loc["a", "b"] == counts.loc["b", "a"] == 3 and counts.loc["a", "c"] == 1
    assert counts.loc["b", "c"] == 0 and counts.loc["a", "a"] == 0
    wins = battle_codes.win_fraction(battles)
    assert wins.loc["a", "b"] == pytest.approx(0.5)  # a win, a loss and a tie, sides swapped
    assert wins.loc["c", "a"] == pytest.approx(1.0) and wins.loc["a", "c"] == pytest.approx(0.0)
    assert math.isnan(wins.loc["b", "c"])


# --- hygiene: from records to battles -------------------------------------------------------------


def record(
    kind: str,
    names=("m1", "m2"),
    replies=("fine", "fine"),
    anonymous=True,
    reasons=(("stop",), ("stop",)),
    prompt="hello",
    tstamp=1.0,
) -> dict:
    states = [
        {
            "messages": [["user", prompt], ["assistant", reply]],
            "offset": 0,
            "conv_id": f"c{i}",
            "model_name": name,
            "roles": ["user", "assistant"],
            "finish_reasons": list(r),
        }
        for i, (name, reply, r) in enumerate(zip(names, replies, reasons, strict=True))
    ]
    return {
        "type": kind,
        "tstamp": tstamp,
        "models": ["", ""] if anonymous else list(names),
        "states": states,
        "ip": "h:x",
    }


def reasons(battles: pd.DataFrame) -> list:
    return [None if pd.isna(r) else r for r in battles["drop_reason"]]


def test_battles_keep_fastchat_winner_names():
    battles = battles_frame(
        [
            record("leftvote"),
            record("rightvote"),
            record("tievote"),
            record("bothbad_vote"),
            {"type": "chat"},
            {"type": "upvote"},
        ]
    )
    assert list(battles["winner"]) == ["model_a", "model_b", "tie", "tie (bothbad)"]
    assert battles["drop_reason"].isna().all()


def test_hygiene_drops_identity_errors_and_stopped_replies():
    words = identity_words(["SmolLM2-135M-Instruct", "tiny-a"], "acme")
    assert {"smollm2-135m-instruct", "smollm2", "tiny-a", "acme", "llama"} <= set(words)
    assert "tiny" not in words  # an English word is no family name on its own; "tiny-a" still is
    rows = [
        record("leftvote", replies=("I am SmolLM2, made by you", "ok")),
        record("leftvote", replies=("ok", "Built by ACME labs")),
        record("leftvote", prompt="are you llama?"),  # the user may ask; only replies count
        record("leftvote", reasons=(("stop", "error"), ("stop",))),
        record("leftvote", reasons=(("stop",), ("cancelled",))),
        record("leftvote", names=("m1", "m1")),
        record("leftvote", anonymous=False),
        {**record("leftvote"), "models": ["", "m2"]},
    ]
    battles = battles_frame(rows, Hygiene(words))
    assert reasons(battles) == ["identity", "identity", None, "error", "stopped", "same_model", None, "invalid"]
    keep_stopped = battles_frame(rows, Hygiene(words, drop_stopped=False))
    assert reasons(keep_stopped)[4] is None
    assert len(counted(battles)) == 1  # anonymous only by default
    assert len(counted(battles, include_named=True)) == 2


def test_redacted_votes_use_the_check_made_when_they_were_written():
    rec = record("leftvote", replies=("", ""))
    for s in rec["states"]:
        s["redacted"] = True
    leaked = {**rec, "hygiene": {"identity_leak": True}}
    battles = battles_frame([rec, leaked])
    assert reasons(battles) == [None, "identity"]


def test_fastchat_role_names_are_understood():
    rec = record("leftvote", replies=("I am Vicuna", "ok"))
    for s in rec["states"]:
        s["roles"] = ["USER", "ASSISTANT"]
        s["messages"] = [["USER" if r == "user" else "ASSISTANT", t] for r, t in s["messages"]]
    battles = battles_frame([rec])
    assert battles["drop_reason"][0] == "identity"
    assert battles["conversation_a"][0][0] == {"role": "user", "content": "hello"}


def test_board_summary_says_what_it_is_based_on():
    rows = [record("leftvote", tstamp=i) for i in range(5)] + [record("leftvote", replies=("llama", "x"))]
    board = build_board(rows, BoardOptions(rounds=20))
    assert len(board.counted) == 5
    assert board.summary() == (
        "Based on 5 battles between 2 models (6 battle votes read). Left out: 1 identity. "
        "2 models are preliminary (fewer than 50 battles): no rank yet."
    )
    empty = build_board([], BoardOptions(rounds=20))
    assert empty.summary().startswith("No battles count yet") and empty.table.empty

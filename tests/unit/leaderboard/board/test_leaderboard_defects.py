"""Five defects the board once had, each on a small hand-made log whose right answer is known."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.records import battle_table
from webui.leaderboard.board.build import BoardOptions, build_board
from webui.leaderboard.board.export import preference_pairs
from webui.leaderboard.stats import bradley_terry, ratings
from webui.leaderboard.votes.rows import battles_frame
from webui.records.identity import find_identity, identity_words

MODELS = [
    "ember-7b",
    "command-r",
    "solar-10.7b",
    "granite-3b",
    "falcon-7b",
    "nous-hermes",
    "SmolLM2-135M-Instruct",
    "gpt-4",
]


def record(
    a: str,
    b: str,
    replies: tuple[str, str],
    kind: str = "leftvote",
    *,
    models=("", ""),
    prompt="hello",
    roles=("user", "assistant"),
    systems=("", ""),
    tstamp: float = 1.0,
    ip: str = "h:x",
) -> dict:
    states = [
        {
            "messages": [[roles[0], prompt], [roles[1], reply]],
            "offset": 0,
            "conv_id": f"c{i}{tstamp}",
            "model_name": name,
            "roles": list(roles),
            "system_message": system,
            "finish_reasons": ["stop"],
        }
        for i, (name, reply, system) in enumerate(zip((a, b), replies, systems, strict=True))
    ]
    return {"type": kind, "tstamp": tstamp, "models": list(models), "states": states, "ip": ip}


# --- 1. ordinary replies are not identity leaks -------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "Remember to drink water.",
        "That mushroom is poisonous.",
        "Run this command in a terminal.",
        "Solar panels turn light into power.",
        "A granite worktop lasts.",
        "The falcon dives at 300 km/h.",
        "Llamas are kept for their wool.",
    ],
)
def test_ordinary_words_are_not_identity_leaks(reply: str):
    assert find_identity([reply], identity_words(MODELS)) is None


@pytest.mark.parametrize(
    ("reply", "found"),
    [
        ("I am command-r, made by Cohere.", "command-r"),
        ("I'm Command R.", "Command R"),
        ("I am SmolLM2-135M-Instruct.", "SmolLM2-135M-Instruct"),
        ("SmolLM2 here!", "SmolLM2"),
        ("I am nous-hermes.", "nous-hermes"),
        ("I am GPT-4o.", "GPT-4"),
        ("Llama3 is my name", "Llama"),
        ("我是Qwen。", "Qwen"),
        ("I am ember-7b", "ember-7b"),
    ],
)
def test_names_still_match_as_names(reply: str, found: str):
    assert find_identity([reply], identity_words(MODELS)) == found


def test_three_battles_that_say_remember_to_drink_water_all_count():
    rows = [record("ember-7b", "command-r", ("Remember to drink water.", "Fine."), tstamp=i) for i in range(3)]
    rows.append(record("ember-7b", "command-r", ("I am ember-7b.", "Fine."), tstamp=4))
    board = build_board(rows, BoardOptions(rounds=0, model_names=MODELS))
    assert len(board.counted) == 3
    assert board.dropped["identity"] == 1
    drops = board.drops_table().set_index("filter")["left out"]
    assert drops["identity"] == 1 and drops["error"] == 0 and drops["named (not anonymous)"] == 0
    assert "Left out: 1 identity." in board.summary()


# --- 2. FastChat's older anonymous logs ---------------------------------------------------------


def test_model_a_model_b_logs_are_anonymous_battles():
    rows = [
        record(
            "vicuna-13b",
            "koala-13b",
            ("Paris.", "Lyon."),
            models=("Model A", "Model B"),
            roles=("USER", "ASSISTANT"),
            tstamp=i,
        )
        for i in range(4)
    ]
    battles = battles_frame(rows)
    assert battles["drop_reason"].isna().all()
    assert battles["anony"].all() and set(battles["model_a"]) == {"vicuna-13b"}
    assert len(build_board(rows, BoardOptions(rounds=0)).counted) == 4


def test_html_wrapped_public_names_are_read():
    rows = [record("a-1", "b-1", ("x", "y"), models=("<h3>Model A: a-1</h3>\n", "<h3>Model B: b-1</h3>\n"))]
    battles = battles_frame(rows)
    assert battles["drop_reason"].isna().all() and not battles["anony"][0]


# --- 3. models with few battles ------------------------------------------------------------------


def test_a_model_that_lost_its_only_two_battles_is_preliminary_with_an_honest_interval():
    """x lost both its battles to a and b, who are evenly matched (80 battles each way). The 95%
    likelihood-ratio interval is open below (no win bounds it) and ends where two losses become
    too unlikely: (1 - p)^2 = exp(-3.84 / 2), i.e. 400 log10(p / (1 - p)) = 82.8 points above a and b."""
    rows = [("a", "b", "model_a"), ("b", "a", "model_a")] * 40 + [("a", "c", "tie")] * 40
    rows += [("x", "a", "model_b"), ("b", "x", "model_a")]
    table = ratings.leaderboard(battle_table(rows), rounds=100, min_battles=10).set_index("model")
    x = table.loc["x"]
    assert bool(x["preliminary"]) and pd.isna(x["rank"])
    assert x["lower"] == -math.inf
    assert x["upper"] - table.loc["a", "rating"] == pytest.approx(82.8, abs=3)
    assert list(table["rank"].dropna()) == [1, 1, 1]  # x shares no rank, and moves nobody's
    assert (table.loc[["a", "b", "c"], "upper"] - table.loc[["a", "b", "c"], "lower"] < 120).all()


def test_bootstrap_leaves_out_rounds_without_the_model():
    battles = battle_table([("a", "b", "model_a")] * 50 + [("a", "b", "model_b")] * 50 + [("x", "a", "model_b")])
    samples = bradley_terry.bootstrap_bt(battles, rounds=200, seed=1)
    absent = samples["x"].isna()
    assert 0 < absent.sum() < 200  # P(no battle of x in a resample) = (1 - 1/101)^101, about 37%
    assert not samples.loc[absent, ["a", "b"]].isna().any().any()


# --- 4. the battles export ------------------------------------------------------------------------


def test_battles_carry_language_and_fastchat_judge():
    rows = [
        record("m1", "m2", ("ok", "ok"), prompt="What is the capital of France?"),
        record("m1", "m2", ("ok", "ok"), prompt="法国的首都是哪里？", tstamp=2),
    ]
    battles = battles_frame(rows)
    assert list(battles["language"]) == ["English", "Chinese"]
    assert list(battles["judge"]) == ["arena_user_h:x"] * 2


# --- 5. preference pairs keep each side's system prompt -------------------------------------------


def test_pairs_record_each_sides_system_prompt():
    rows = [
        record("m1", "m2", ("short", "long answer"), "rightvote", systems=("", "Answer briefly.")),
        record("m1", "m2", ("one", "two"), "leftvote", systems=("Be kind.", "Be kind."), tstamp=2),
    ]
    pairs = preference_pairs(battles_frame(rows))
    first, second = pairs.iloc[0], pairs.iloc[1]
    assert (first["system_chosen"], first["system_rejected"]) == ("Answer briefly.", "")
    assert first["prompt"] == [{"role": "user", "content": "hello"}]  # different prompts: none shared
    assert (second["system_chosen"], second["system_rejected"]) == ("Be kind.", "Be kind.")
    assert second["prompt"][0] == {"role": "system", "content": "Be kind."}


SELF_NAMED = [*MODELS, "glacier-1b", "atlas-70b-instruct", "orbit-v2", "late-7b"]


@pytest.mark.parametrize(
    ("reply", "found"),
    [
        ("This is Glacier speaking. How can I help?", "Glacier"),
        ("I'm Atlas, a helpful assistant.", "Atlas"),
        ("Hello! I am Atlas.", "Atlas"),
        ("As Orbit, I cannot browse the web.", "Orbit"),
        ("My name is Glacier.", "Glacier"),
        ("I\u2019m Ember, nice to meet you.", "Ember"),
        ("THIS IS Glacier", "Glacier"),
    ],
)
def test_a_reply_introducing_itself_by_its_stem_is_a_leak(reply: str, found: str):
    """A name less its size, version and tuning ("Glacier" of glacier-1b), as a reply introduces
    itself (in the fault battery of issue 37, 19 of 100 such replies passed the check)."""
    assert find_identity([reply], identity_words(SELF_NAMED)) == found


@pytest.mark.parametrize(
    "reply",
    [
        "The Atlas mountains cross Morocco.",
        "Atlas holds up the sky in the myth.",
        "As Atlas grew older, the maps changed.",
        "Sorry, I'm late today.",
        "This is late for a reply.",
        "A glacier moves slowly.",
        "We took the Orbit line home.",
        "i am glacier",  # a lower-case introduction is missed: the price of not flagging prose
    ],
)
def test_the_same_word_in_ordinary_prose_is_no_leak(reply: str):
    assert find_identity([reply], identity_words(SELF_NAMED)) is None

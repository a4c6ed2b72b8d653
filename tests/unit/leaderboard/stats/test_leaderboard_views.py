"""Style control, categories, ratings over time and "my votes", on simulated battles whose effects
are known; and the language detector."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from webui.leaderboard.board.build import BoardOptions, build_board, category_board, my_votes
from webui.leaderboard.stats import bradley_terry
from webui.leaderboard.stats.categories import CODING, category_masks
from webui.leaderboard.stats.history import ratings_over_time
from webui.leaderboard.stats.style import style_table
from webui.leaderboard.votes.features import has_code, reply_style, with_features
from webui.leaderboard.votes.language import detect_language


def conversation(prompt: str, reply: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]


def style_battles(n: int, beta: float, seed: int = 0) -> pd.DataFrame:
    """plain = verbose in substance; verbose writes four times longer. Voters prefer longer replies
    with strength `beta` (log-odds per unit of (len_a - len_b) / (len_a + len_b)); strong and weak
    are 0.5 log-odds above and below."""
    rng = np.random.default_rng(seed)
    true = {"plain": 0.0, "verbose": 0.0, "strong": 0.5, "weak": -0.5}
    length = {"plain": 80, "verbose": 320, "strong": 80, "weak": 80}
    names, rows = list(true), []
    for i in range(n):
        a, b = (names[j] for j in rng.choice(4, 2, replace=False))
        la, lb = (int(length[m] * rng.lognormal(0, 0.7)) + 1 for m in (a, b))
        z = true[a] - true[b] + beta * (la - lb) / (la + lb)
        rows.append(
            {
                "model_a": a,
                "model_b": b,
                "tstamp": float(i),
                "winner": "model_a" if rng.random() < 1 / (1 + np.exp(-z)) else "model_b",
                "conversation_a": conversation("q", "w " * la),
                "conversation_b": conversation("q", "w " * lb),
            }
        )
    return with_features(pd.DataFrame(rows))


def test_a_model_that_wins_only_by_length_loses_its_lead_under_style_control():
    battles = style_battles(4000, beta=1.5)
    raw = bradley_terry.bradley_terry(battles)
    styled, coefficients = style_table(battles, rounds=30)
    styled = styled.set_index("model")
    assert raw["verbose"] - raw["plain"] > 60  # raw: verbose looks far better than plain
    assert abs(styled.loc["verbose", "style_rating"] - styled.loc["plain", "style_rating"]) < 25
    assert (
        styled.loc["verbose", "style_lower"]
        < styled.loc["plain", "style_rating"]
        < styled.loc["verbose", "style_upper"]
    )
    assert styled["style_rating"].idxmax() == "strong" and raw.idxmax() == "verbose"
    assert coefficients["length"] > 0.3


def test_without_a_style_effect_style_control_changes_little():
    battles = style_battles(4000, beta=0.0, seed=1)
    raw = bradley_terry.bradley_terry(battles)
    styled, coefficients = style_table(battles, rounds=0)
    diff = styled.set_index("model")["style_rating"] - raw
    assert diff.abs().max() < 15 and abs(coefficients["length"]) < 0.1


def test_reply_style_counts_markdown():
    text = "# Title\n\nSome **bold** and __more__.\n- one\n- two\n1. three\n```\ncode\n```"
    words, headers, bold, lists = reply_style(conversation("q", text))
    assert (headers, bold, lists) == (1, 2, 3) and words == len(text.split())


def category_battles(n: int, seed: int = 0) -> pd.DataFrame:
    """coder wins 85% of coding prompts and loses 70% of the others; talker the reverse."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        code = rng.random() < 0.3
        prompt = "Fix this:\n```python\nprint(1 +)\n```" if code else "What is the capital of France?"
        p_coder = 0.85 if code else 0.3
        winner = "model_a" if rng.random() < p_coder else "model_b"
        pair = ("coder", "talker") if rng.random() < 0.5 else ("talker", "coder")
        if pair[0] == "talker":
            winner = {"model_a": "model_b", "model_b": "model_a"}[winner]
        rows.append(
            {
                "model_a": pair[0],
                "model_b": pair[1],
                "winner": winner,
                "tstamp": float(i),
                "turn": 1,
                "language": detect_language(prompt),
                "conversation_a": conversation(prompt, "a"),
                "conversation_b": conversation(prompt, "b"),
            }
        )
    return with_features(pd.DataFrame(rows))


def test_categories_split_the_board():
    battles = category_battles(1000)
    masks = category_masks(battles)
    assert masks[CODING].sum() == sum("```" in c[0]["content"] for c in battles["conversation_a"])
    assert masks["language: English"].sum() == len(battles) - masks[CODING].sum()
    overall = bradley_terry.bradley_terry(battles)
    coding = bradley_terry.bradley_terry(battles[masks[CODING]])
    assert overall["talker"] > overall["coder"] and coding["coder"] - coding["talker"] > 200


def test_category_board_and_counts_from_records():
    records = []
    for i, row in category_battles(300).iterrows():
        states = [
            {
                "messages": [["user", c[0]["content"]], ["assistant", c[1]["content"]]],
                "offset": 0,
                "conv_id": f"{i}{k}",
                "model_name": m,
                "roles": ["user", "assistant"],
            }
            for k, (m, c) in enumerate(((row.model_a, row.conversation_a), (row.model_b, row.conversation_b)))
        ]
        kind = {"model_a": "leftvote", "model_b": "rightvote"}[row.winner]
        records.append({"type": kind, "tstamp": float(i), "models": ["", ""], "states": states, "ip": "h:1"})
    board = build_board(records, BoardOptions(rounds=10, min_battles=0))
    counts = board.categories.set_index("category")["battles"]
    assert counts["all"] == 300 and counts[CODING] + counts["language: English"] == 300
    rated, n = category_board(board, CODING)
    assert n == counts[CODING] and rated.table["model"].iloc[0] == "coder"
    assert board.table["model"].iloc[0] == "talker"
    with pytest.raises(ValueError, match="unknown category"):
        category_board(board, "poetry")


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("What is the capital of France?", "English"),
        ("¿Cómo puedo aprender a cocinar?", "Spanish"),
        ("Quelle est la capitale de la France ?", "French"),
        ("Wie groß ist die Stadt und was ist dort?", "German"),
        ("法国的首都是哪里？", "Chinese"),
        ("日本の首都はどこですか？", "Japanese"),
        ("한국의 수도는?", "Korean"),
        ("Какая столица России?", "Russian"),
        ("ما هي عاصمة مصر؟", "Arabic"),
        ("ok", "unknown"),
        ("", "unknown"),
    ],
)
def test_language_detector(text: str, language: str):
    assert detect_language(text) == language


def test_code_detector():
    assert has_code("```js\nx()\n```") and has_code("def f(x):\n    return x") and has_code("int main() {")
    assert not has_code("What is the capital of France?") and not has_code("Tell me a story about a cat.")


def test_ratings_over_time_end_at_the_tables_ratings():
    battles = style_battles(600, beta=0.0, seed=2)
    late = battles.index >= 300
    battles.loc[late & (battles["model_a"] == "plain"), "model_a"] = "newcomer"
    battles.loc[~late & (battles["model_a"] == "newcomer"), "model_a"] = "plain"
    history = ratings_over_time(battles, points=6)
    assert sorted(history["battles"].unique()) == [100, 200, 300, 400, 500, 600]
    first_seen = history.groupby("model")["battles"].min()
    assert first_seen["newcomer"] == 400 and first_seen["strong"] == 100
    last = history[history["battles"] == 600].set_index("model")["rating"]
    assert (last - bradley_terry.bradley_terry(battles)).abs().max() < 1e-9


def test_my_votes_are_only_the_sessions_own():
    def rec(i: int, session: str, kind: str) -> dict:
        states = [
            {
                "messages": [["user", "q"], ["assistant", "r"]],
                "offset": 0,
                "conv_id": f"{i}{m}",
                "model_name": m,
                "roles": ["user", "assistant"],
            }
            for m in ("m1", "m2")
        ]
        return {
            "type": kind,
            "tstamp": float(i),
            "models": ["", ""],
            "states": states,
            "ip": "h:same",
            "extra": {"session": session},
        }

    records = [rec(i, "h:alice", "leftvote") for i in range(3)] + [rec(9, "h:bob", "rightvote")]
    board = build_board(records, BoardOptions(rounds=0))
    alice = my_votes(board, "h:alice").set_index("model")
    assert alice.loc["m1", "wins"] == 3 and alice.loc["m2", "losses"] == 3 and alice["battles"].sum() == 6
    bob = my_votes(board, "h:bob").set_index("model")
    assert bob.loc["m2", "wins"] == 1 and bob["battles"].sum() == 2
    assert my_votes(board, "").empty and my_votes(board, "h:nobody").empty

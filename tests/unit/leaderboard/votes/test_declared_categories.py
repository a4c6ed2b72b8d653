"""Categories the operator declares (--categories-file): the file and its errors, which votes a rule
and a visitor's tag put in a category, the category board shrunk toward the overall one, and the
shrinkage's goal on simulated categories (webui.leaderboard.votes.declared, stats.shrink)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.records import battle, vote
from webui.errors import ConfigError
from webui.leaderboard.__main__ import main
from webui.leaderboard.board.build import BoardOptions, board_from_index, category_board
from webui.leaderboard.simulate import simulate
from webui.leaderboard.simulate_battles import category_battles
from webui.leaderboard.stats import ratings
from webui.leaderboard.stats.categories import category_masks
from webui.leaderboard.stats.shrink import SHRINK_COLUMNS, Z, shrink
from webui.leaderboard.votes.declared import TAG_FIELD, Declared, Membership, load, parse
from webui.leaderboard.votes.index import VoteIndex
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder

GOOD = """\
categories:
  - name: gardening
    keywords: [tomato, "green beans"]
  - name: arithmetic
    regex: '\\d+\\s*[-+*/]\\s*\\d+'
    min_chars: 10
  - name: french-or-long
    language: French
    min_chars: 200
    match: any
  - name: tagged-only
    description: chosen by visitors
"""


def test_a_good_file_reads_in_order():
    declared = parse(GOOD)
    assert declared.names == ("gardening", "arithmetic", "french-or-long", "tagged-only")
    gardening, arithmetic, either, tagged = declared.categories
    assert gardening.keywords == ("tomato", "green beans") and gardening.match == "all"
    assert arithmetic.regex is not None and arithmetic.min_chars == 10
    assert either.language == "French" and either.match == "any"
    assert not tagged.has_rule and tagged.description == "chosen by visitors"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("categories:\n  - name: a\n    keyword: [x]\n", 3, "unknown key 'keyword'"),
        ("categories:\n  - name: a\n    regex: '(unclosed'\n", 3, "does not compile"),
        ("categories:\n  - name: a\n  - name: a\n", 3, "declared twice"),
        ("categories:\n  - name: a\n    min_chars: 0\n", 3, "whole number of at least 1"),
        ("categories:\n  - name: a\n    min_chars: ten\n", 3, "whole number of at least 1"),
        ("categories:\n  - name: coding\n", 2, "built-in category"),
        ("categories:\n  - name: 'language: Welsh'\n", 2, "built-in category"),
        ("categories:\n  - name: a\n    match: most\n", 3, "must be one of all, any"),
        ("categories:\n  - name: a\n    keywords: tomato\n", 3, "list of words"),
        ("categories:\n  - keywords: [x]\n", 2, "needs a `name:`"),
        ("categories:\n  - name: a\n  -  [1, 2\n", 4, "not YAML"),
        ("categories: []\n", 1, "non-empty list"),
        ("categorys:\n  - name: a\n", 1, "one key, `categories:`"),
        ("categories:\n  - just a name\n", 2, "must be a mapping"),
    ],
)
def test_a_malformed_file_is_refused_with_its_line_and_reason(text: str, line: int, reason: str):
    with pytest.raises(ConfigError) as caught:
        parse(text, "categories file c.yaml")
    message = str(caught.value)
    assert message.startswith(f"categories file c.yaml, line {line}: "), message
    assert reason in message, message


def test_a_missing_file_and_none_declared(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read it"):
        load(tmp_path / "nope.yaml")
    assert not load("") and load("").names == ()


def _record(prompt: str, tag: str | None = None) -> dict:
    state = {"roles": ["user", "assistant"], "messages": [["user", prompt], ["assistant", "ok"]], "offset": 0}
    return {"type": "leftvote", "states": [state, dict(state)], "extra": {TAG_FIELD: tag} if tag else {}}


@pytest.mark.parametrize(
    ("prompt", "tag", "expected"),
    [
        ("How do I grow a Tomato?", None, ("gardening",)),
        ("Tomatoes and green  beans", None, ()),  # whole words, one space as written in the file
        ("I like green beans", None, ("gardening",)),
        ("what is 12 * 7 ?", None, ("arithmetic",)),
        ("12*7", None, ()),  # the regex holds, the minimum length does not: match all
        ("Quelle est la capitale de la France et pourquoi est-elle célèbre ?", None, ("french-or-long",)),
        ("x " * 100, None, ("french-or-long",)),  # not French, but long enough: match any
        ("hello", "tagged-only", ("tagged-only",)),
        ("grow a tomato", "arithmetic", ("gardening", "arithmetic")),  # the rule and the tag both count
        ("hello", "not-declared", ()),
    ],
)
def test_which_categories_a_vote_is_in(prompt: str, tag: str | None, expected: tuple[str, ...]):
    assert parse(GOOD).of(_record(prompt, tag)) == expected


def _logs(tmp_path: Path, prompts: list[tuple[str, str, str | None]]) -> Path:
    """One anonymous battle per (prompt, winner side, visitor tag): strong vs weak."""
    folder = tmp_path / "logs"
    rec = JsonlRecorder(folder, IdentityPolicy("none"))
    for i, (prompt, kind, tag) in enumerate(prompts):
        convs = battle("strong", "weak", (f"good {i}", f"fine {i}"), prompt=prompt)
        rec.vote(vote(kind, convs, **({TAG_FIELD: tag} if tag else {})))
    rec.close()
    return folder


def test_the_board_marks_each_row_from_its_own_log_line(tmp_path: Path):
    prompts = [
        ("grow a tomato", "leftvote", None),
        ("grow a tomato please", "rightvote", None),
        ("hello", "leftvote", "gardening"),  # a visitor's tag puts it in
        ("hello", "leftvote", None),
        ("what is 12 * 7 ?", "rightvote", None),
    ]
    logs = _logs(tmp_path, prompts)
    declared = parse(GOOD)
    index = VoteIndex(logs)
    membership = Membership(declared)
    read: list[int] = []

    def counting(rows: pd.DataFrame):
        read.append(len(rows))
        return index.records(rows)

    index.catch_up()
    rows = membership.columns(index.rows(), counting)
    assert list(rows["declared: gardening"]) == [True, True, True, False, False]
    assert list(rows["declared: arithmetic"]) == [False, False, False, False, True]
    assert list(rows["declared: tagged-only"]) == [False] * 5
    membership.columns(index.rows(), counting)  # the answers are remembered: no line is read again
    assert read == [5]
    board = board_from_index(index, BoardOptions(rounds=0, min_battles=0), membership=membership)
    index.close()
    counts = board.categories.set_index("category")["battles"]
    assert counts["gardening"] == 3 and counts["arithmetic"] == 1 and counts["tagged-only"] == 0
    rated, n = category_board(board, "gardening")
    assert n == 3
    assert rated.table.set_index("model")["battles"].to_dict() == {"strong": 3, "weak": 3}


def test_the_cli_prints_a_declared_categorys_board_and_says_it_is_shrunk(tmp_path: Path, capsys):
    prompts = [("grow a tomato", "leftvote" if i % 4 else "rightvote", None) for i in range(12)]
    prompts += [("hello", "rightvote" if i % 3 else "leftvote", None) for i in range(12)]
    logs = _logs(tmp_path, prompts)
    categories = tmp_path / "c.yaml"
    categories.write_text(GOOD)
    exported = tmp_path / "battles.jsonl"
    code = main(
        [
            str(logs),
            "--rounds",
            "20",
            "--min-battles",
            "0",
            "--categories-file",
            str(categories),
            "--category",
            "gardening",
            "--categories",
            "--battles",
            str(exported),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    rows = [json.loads(line) for line in exported.read_text().splitlines()]  # the export says which rows are in it
    assert [r["declared: gardening"] for r in rows] == [True] * 12 + [False] * 12
    assert "Category 'gardening': 12 battles" in out
    assert "Shrunk toward the overall board (a normal prior of sd 50 Elo" in out
    assert "rating (own)" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("categories:\n  - name: a\n    regex: '['\n")
    assert main([str(logs), "--categories-file", str(bad)]) == 2
    assert "line 3: `regex:` does not compile" in capsys.readouterr().err


def test_shrinkage_against_a_direct_computation():
    """Two models on the overall board and a category's own fit: the posterior combination by hand."""
    overall = pd.DataFrame(
        {"model": ["a", "b"], "rating": [1040.0, 960.0], "lower": [1020.4, 940.4], "upper": [1059.6, 979.6]}
    )
    own = pd.DataFrame(
        {
            "model": ["a", "b"],
            "rating": [1100.0, 900.0],
            "lower": [1100.0 - Z * 80, 900.0 - Z * 40],
            "upper": [1100.0 + Z * 80, 900.0 + Z * 40],
            "preliminary": [False, False],
            "rank": [1, 2],
            "rank_worst": [1, 2],
        }
    )
    table = shrink(own, overall, prior_sd=50.0).set_index("model")
    se_c = {"a": 80.0, "b": 40.0}
    se_o = (1059.6 - 1020.4) / (2 * Z)
    inverse = {m: 1 / s**2 for m, s in se_c.items()}
    offset = ((1040 - 1100) * inverse["a"] + (960 - 900) * inverse["b"]) / sum(inverse.values())
    for model, r_o, r_c in (("a", 1040.0, 1100.0), ("b", 960.0, 900.0)):
        w = 50.0**2 / (50.0**2 + se_c[model] ** 2)
        expected = r_o + w * (r_c + offset - r_o)
        sd = math.sqrt(w * se_c[model] ** 2 + (1 - w) ** 2 * se_o**2)
        row = table.loc[model]
        assert row["rating"] == pytest.approx(expected)
        assert row["weight (own)"] == pytest.approx(w)
        assert row["rating (own)"] == pytest.approx(r_c + offset)
        assert (row["lower"], row["upper"]) == (pytest.approx(expected - Z * sd), pytest.approx(expected + Z * sd))
    no_prior = shrink(own, overall, prior_sd=0.0).set_index("model")
    assert no_prior["rating"].to_dict() == {"a": 1100.0, "b": 900.0}


def test_an_open_interval_leans_on_the_overall_rating_alone():
    overall = pd.DataFrame(
        {"model": ["a", "b"], "rating": [1040.0, 960.0], "lower": [1030.0, 950.0], "upper": [1050.0, 970.0]}
    )
    own = pd.DataFrame(
        {
            "model": ["a", "b"],
            "rating": [1300.0, 700.0],
            "lower": [1000.0, 600.0],
            "upper": [np.inf, 800.0],
            "preliminary": [True, True],
            "rank": [pd.NA, pd.NA],
            "rank_worst": [pd.NA, pd.NA],
        }
    )
    table = shrink(own, overall).set_index("model")
    assert table.loc["a", "weight (own)"] == 0.0 and table.loc["a", "rating"] == pytest.approx(1040.0)
    every_open = shrink(own.assign(lower=[1000.0, -np.inf]), overall).set_index("model")
    assert every_open["weight (own)"].tolist() == [0.0, 0.0]
    assert every_open["rating"].tolist() == [pytest.approx(1040.0), pytest.approx(960.0)]


def _errors(seed: int, n: int) -> tuple[float, float]:
    """Root-mean-square error against the true category ratings (both centred on their mean), of the
    category's own fit and of the shrunk board, over three categories of `n` battles."""
    battles, truth = category_battles(seed, [n] * 3, overall=3000)
    overall = ratings.leaderboard(battles, rounds=30, seed=0, min_battles=50)
    masks = category_masks(battles.assign(language="English", turn=1, long_prompt=False, coding=False))
    own_errors, shrunk_errors = [], []
    for name, true in truth.items():
        table = shrink(
            ratings.leaderboard(battles[masks[name]].reset_index(drop=True), rounds=30, min_battles=50), overall
        )
        table = table.set_index("model")
        target = pd.Series(true).reindex(table.index)
        for column, errors in ((SHRINK_COLUMNS[0], own_errors), ("rating", shrunk_errors)):
            gap = (table[column] - table[column].mean()) - (target - target.mean())
            errors.append(float(np.sqrt((gap**2).mean())))
    return float(np.mean(own_errors)), float(np.mean(shrunk_errors))


@pytest.mark.parametrize("n", [40, 200])
def test_shrunk_category_boards_are_nearer_the_truth(n: int):
    """The issue's goal on simulated categories (true ratings of their own, sd 40 around the overall
    ones): at 40 and 200 battles per category the shrunk board's error is the lower, seed by seed."""
    for seed in range(3):
        own, shrunk = _errors(seed, n)
        assert shrunk < own, (seed, n, own, shrunk)


def test_declared_names_and_no_declared():
    assert Declared().of(_record("tomato")) == ()


def test_snapshots_and_diffs_carry_the_declared_categories(tmp_path: Path, capsys):
    """A snapshot keeps each declared category's (shrunk) board as a view of its own, and --diff
    reports it beside the raw and style views; without declared categories nothing changes."""
    prompts = [("grow a tomato", "leftvote" if i % 4 else "rightvote", None) for i in range(8)]
    logs = _logs(tmp_path, prompts)
    categories = tmp_path / "c.yaml"
    categories.write_text(GOOD)
    snapshots = tmp_path / "snapshots"
    common = ["--rounds", "10", "--min-battles", "0", "--categories-file", str(categories)]
    assert main([str(logs), *common, "--snapshot", str(snapshots)]) == 0
    document = json.loads(next(snapshots.glob("*.json")).read_text())
    assert document["settings"]["declared_categories"] == ["gardening", "arithmetic", "french-or-long", "tagged-only"]
    assert document["settings"]["category_prior_sd"] == 50.0
    garden = {e["model"]: e for e in document["views"]["category: gardening"]}
    index = VoteIndex(logs)
    board = board_from_index(index, BoardOptions(rounds=10, min_battles=0), membership=Membership(parse(GOOD)))
    index.close()
    expected = category_board(board, "gardening")[0].table.set_index("model")
    assert {m: e["rating"] for m, e in garden.items()} == pytest.approx(expected["rating"].to_dict())
    assert document["views"]["category: tagged-only"] == []

    rec = JsonlRecorder(logs, IdentityPolicy("none"))
    for i in range(6):  # weak now wins every gardening battle
        rec.vote(vote("rightvote", battle("strong", "weak", (f"a {i}", f"b {i}"), prompt="tomato again")))
    rec.close()
    capsys.readouterr()
    diff_json = tmp_path / "diff.json"
    assert main([str(logs), *common, "--diff", str(snapshots), "--diff-json", str(diff_json)]) == 0
    out = capsys.readouterr().out
    assert "Category 'gardening' (declared; shrunk toward the overall board):" in out
    moved = json.loads(diff_json.read_text())["views"]
    assert {c["model"] for c in moved["category: gardening"]} == {"strong", "weak"}

    plain = tmp_path / "plain"
    assert main([str(logs), "--rounds", "0", "--snapshot", str(plain)]) == 0
    settings = json.loads(next(plain.glob("*.json")).read_text())["settings"]
    assert "category_prior_sd" not in settings and "declared_categories" not in settings


def test_through_the_logs_a_small_category_is_nearer_the_truth_shrunk(tmp_path: Path):
    """The simulator's log with a declared category of 40 battles (prompts naming a topic, won at the
    topic's own true ratings), read back through the vote index and the board: the shrunk board is
    nearer the topic's true ratings than the category's own fit, for each of three seeds."""
    for seed in range(3):
        logs = tmp_path / f"logs{seed}"
        truth = simulate(logs, 1500, seed=seed, category_votes=[40])
        index = VoteIndex(logs)
        membership = Membership(load(logs / "categories.yaml"))
        board = board_from_index(index, BoardOptions(rounds=20), membership=membership)
        index.close()
        (name, true), *_ = truth["categories"].items()
        table = category_board(board, name)[0].table.set_index("model")
        assert int(table["battles"].sum()) // 2 == 40
        target = pd.Series(true).reindex(table.index)
        errors = {}
        for column in (SHRINK_COLUMNS[0], "rating"):
            gap = (table[column] - table[column].mean()) - (target - target.mean())
            errors[column] = float(np.sqrt((gap**2).mean()))
        assert errors["rating"] < errors[SHRINK_COLUMNS[0]], (seed, errors)


def test_the_example_file_is_a_good_categories_file():
    example = Path(__file__).resolve().parents[4] / "assets" / "categories.example.yaml"
    assert load(example).names == ("maths", "writing", "long-german", "our-product")


def test_settings_refuse_visitor_tags_without_categories_and_a_prior_out_of_range():
    from webui.config import Settings

    with pytest.raises(ConfigError, match="visitor_tags: needs --categories-file"):
        Settings(visitor_tags=True)
    with pytest.raises(ConfigError, match="category_prior_sd: must be 0"):
        Settings(category_prior_sd=-1.0)
    assert Settings(categories_file="c.yaml", visitor_tags=True).visitor_tags

"""A judge's category labels, without a judge: the labelling prompt and its strict parsing
(webui.judge.label_prompt), the label files read back incrementally (webui.leaderboard.votes.labels),
which of a rule, a visitor's tag and a label places a vote (votes.declared.Membership), and the
built-in categories' boards shrunk toward the overall one like the declared ones'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.records import battle, vote
from webui.errors import ConfigError
from webui.judge.label_prompt import LabelPrompt
from webui.leaderboard.board.build import BoardOptions, build_board, category_board, rate
from webui.leaderboard.stats.categories import CODING, category_masks
from webui.leaderboard.stats.shrink import SHRINK_COLUMNS, shrink, shrink_line
from webui.leaderboard.votes.declared import TAG_FIELD, Declared, Membership, parse
from webui.leaderboard.votes.index import VoteIndex
from webui.leaderboard.votes.labels import LabelBook
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder

CATEGORIES = parse(
    "categories:\n  - name: gardening\n    keywords: [tomato]\n    description: growing plants\n  - name: poetry\n"
)
PROMPT = "Pick one.\n{categories}\n<<{prompt}>>\n"


def test_the_prompt_lists_the_categories_and_fills_each_placeholder_once():
    prompt = LabelPrompt.from_text("# a comment\n" + PROMPT, CATEGORIES)
    text = prompt.render("my {categories} and {prompt}")
    assert text == (
        "Pick one.\n[[gardening]]: growing plants\n[[poetry]]\n[[none]]: none of the categories above\n"
        "<<my {categories} and {prompt}>>\n"
    )
    # the version covers the text sent: other categories, another series of labels; comments do not count
    assert prompt.version == LabelPrompt.from_text(PROMPT, CATEGORIES).version
    assert prompt.version != LabelPrompt.from_text(PROMPT, parse("categories:\n  - name: poetry\n")).version
    assert LabelPrompt.load(CATEGORIES).names == ("gardening", "poetry")  # ours reads


@pytest.mark.parametrize(
    ("answer", "mark"),
    [
        ("It is a poem.\n[[poetry]]", "poetry"),
        ("[[poetry]] ... so [[poetry]]", "poetry"),
        ("[[none]]", "none"),
        ("[[poetry]] or maybe [[none]]", None),  # marks that disagree
        ("[[Poetry]]", None),  # a near miss: not a name as declared
        ("[poetry]", None),
        ("[[cooking]]", None),  # not declared
        ("poetry", None),
        ("", None),
    ],
)
def test_parsing_is_strict(answer: str, mark: str | None):
    assert LabelPrompt.from_text(PROMPT, CATEGORIES).parse(answer) == mark


@pytest.mark.parametrize(
    ("text", "categories", "reason"),
    [
        ("{categories}\n", CATEGORIES, "{prompt} exactly once"),
        ("{prompt}{prompt}{categories}", CATEGORIES, r"\{prompt\} exactly once \(found 2\)"),
        (PROMPT, parse("categories:\n  - name: none\n"), "cannot be labelled"),
        (PROMPT, Declared(), "no categories declared"),
    ],
)
def test_a_prompt_or_categories_that_cannot_label_are_refused(text, categories, reason):
    with pytest.raises(ConfigError, match=reason):
        LabelPrompt.from_text(text, categories)


def _label(vote_place: tuple[str, int, float], mark: str | None, tstamp: float) -> bytes:
    file, offset, vote_tstamp = vote_place
    category = mark if mark not in (None, "none") else None
    record = {"type": "label", "tstamp": tstamp, "file": file, "offset": offset, "vote_tstamp": vote_tstamp}
    return (json.dumps({**record, "mark": mark, "category": category}) + "\n").encode()


def test_the_book_reads_whole_lines_incrementally_and_the_latest_parsed_label_stands(tmp_path: Path):
    a, b = ("2026-11-28-conv.json", 0, 1.0), ("2026-11-28-conv.json", 900, 2.0)
    path = tmp_path / "2026-11-28-labels.json"
    path.write_bytes(_label(a, "poetry", 10.0))
    book = LabelBook(tmp_path)
    assert book.refresh() == {a: "poetry"}
    with path.open("ab") as file:
        file.write(_label(a, None, 11.0))  # unparsed: never replaces a label
        file.write(_label(b, "gardening", 12.0)[:-9])  # torn: waits
    assert book.refresh() == {a: "poetry"}
    with path.open("ab") as file:
        file.write(_label(b, "gardening", 12.0)[-9:])
    assert book.refresh() == {a: "poetry", b: "gardening"}
    (tmp_path / "2026-11-29-labels.json").write_bytes(_label(a, "none", 13.0))  # a later run: "none" stands
    assert book.refresh() == {a: None, b: "gardening"}
    path.write_bytes(_label(b, "poetry", 14.0))  # rewritten shorter: read again from its start
    assert book.refresh() == {a: None, b: "poetry"}
    (tmp_path / "2026-11-29-labels.json").unlink()
    assert book.refresh() == {b: "poetry"}


def test_a_label_places_only_what_no_rule_and_no_visitor_places(tmp_path: Path):
    logs = tmp_path / "logs"
    recorder = JsonlRecorder(logs, IdentityPolicy("none"))
    for prompt, tag in (("a sonnet", None), ("grow a tomato", None), ("a sonnet", "gardening"), ("hi", None)):
        recorder.vote(vote("leftvote", battle("strong", "weak", prompt=prompt), **({TAG_FIELD: tag} if tag else {})))
    recorder.close()
    index = VoteIndex(logs)
    index.catch_up()
    rows = index.rows()
    places = list(zip(rows["file"], rows["offset"].astype(int), rows["tstamp"].astype(float), strict=True))
    # the judge says poetry of every vote, and a category no longer declared of the last
    labels = b"".join(_label(p, "poetry", 20.0) for p in places[:3]) + _label(places[3], "cooking", 20.0)
    (logs / "2026-11-28-labels.json").write_bytes(labels)
    marked = Membership.with_labels(CATEGORIES, logs).columns(rows, index.records)
    index.close()
    assert list(marked["declared: poetry"]) == [True, False, False, False]  # the rule's, the visitor's stand
    assert list(marked["declared: gardening"]) == [False, True, True, False]
    without = Membership(CATEGORIES).columns(rows, VoteIndex(logs).records)
    assert not without["declared: poetry"].any()


def _coding_records(n: int) -> list[dict]:
    """`n` battles, a third of them coding prompts; the coder wins those, the talker the rest."""
    records = []
    for i in range(n):
        coding = i % 3 == 0
        prompt = "```python\nprint(1)\n```" if coding else f"tell me a story {i}"
        winner_left = (i % 5 != 0) == coding  # the coder (left) wins most coding battles, loses most others
        states = [
            {
                "messages": [["user", prompt], ["assistant", f"reply {k} {i}"]],
                "offset": 0,
                "conv_id": f"{i}{m}",
                "model_name": m,
                "roles": ["user", "assistant"],
            }
            for k, m in enumerate(("coder", "talker"))
        ]
        kind = "leftvote" if winner_left else "rightvote"
        records.append({"type": kind, "tstamp": float(i), "models": ["", ""], "states": states, "ip": "h:1"})
    return records


def test_a_built_in_categorys_board_is_shrunk_toward_the_overall_one():
    board = build_board(_coding_records(150), BoardOptions(rounds=20, min_battles=0))
    rated, n = category_board(board, CODING)
    assert n == 50
    used = board.counted[category_masks(board.counted)[CODING]].reset_index(drop=True)
    expected = shrink(rate(used, board.options).table, board.table).set_index("model")
    table = rated.table.set_index("model")
    assert set(SHRINK_COLUMNS) <= set(table.columns)
    assert table["rating"].to_dict() == pytest.approx(expected["rating"].to_dict())
    assert (table["rating"] - table[SHRINK_COLUMNS[0]]).abs().max() > 1  # it moved
    assert shrink_line(rated.table).startswith("Shrunk toward the overall board")
    unshrunk = BoardOptions(rounds=20, min_battles=0, category_prior_sd=0)
    own = category_board(build_board(_coding_records(150), unshrunk), CODING)[0].table.set_index("model")["rating"]
    aligned = table[SHRINK_COLUMNS[0]]  # the category's own figures, on the overall scale
    assert (own - own.mean()).to_dict() == pytest.approx((aligned - aligned.mean()).to_dict(), abs=1e-6)
    assert SHRINK_COLUMNS[0] not in category_board(board, "all")[0].table  # the overall board itself: as it was

"""A battle vote's features and identity check, computed once when the vote is written and read
back by the index (issue 33, item 2): the record keeps them, the index takes them where they are of
its version and word list and counts the text again everywhere else, and the board is the same
either way."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.records import battle, vote
from webui.db.columns import ROW_COLUMNS, STYLE_COUNT_COLUMNS
from webui.leaderboard.__main__ import main
from webui.leaderboard.simulate import simulate
from webui.leaderboard.votes import features, ingest
from webui.leaderboard.votes import rows as vote_rows
from webui.records.identity import identity_words, word_list_version
from webui.records.privacy import IdentityPolicy
from webui.records.storage import VoteContext, vote_record

WORDS = identity_words(["strong", "weak"])


def written(replies: tuple[str, str] = ("**Paris**, of course.", "Lyon"), redact: bool = False) -> dict[str, Any]:
    """A battle vote record as the app writes it, features counted."""
    ctx = VoteContext(lambda conv: [], WORDS, redact=redact, features=vote_rows.vote_features)
    left, right = battle("strong", "weak", replies, prompt="What is the capital of France?")
    return vote_record(vote("leftvote", (left, right)), IdentityPolicy("none"), 1_767_225_600.0, ctx)


def test_a_battle_vote_keeps_its_features_and_its_word_lists_version():
    record = written()
    assert record["hygiene"] == {"identity_leak": False, "identity_words": word_list_version(WORDS)}
    assert record["features"] == {
        "version": features.FEATURES_VERSION,
        "language": "English",
        "coding": False,
        "long_prompt": False,
        **dict(zip(STYLE_COUNT_COLUMNS, (3, 0, 1, 0, 1, 0, 0, 0), strict=True)),
    }
    json.dumps(record)  # as the log line holds it
    # what the index would count from the record as logged: with transcripts off, the redacted text
    assert written(redact=True)["features"] == features.text_features([""], [""], [""])
    assert written(("I am Strong.", "hm"))["hygiene"]["identity_leak"] is True


def test_the_word_lists_version_follows_its_words_not_their_order():
    assert word_list_version(WORDS) == word_list_version(reversed(WORDS)) == word_list_version([*WORDS, WORDS[0]])
    assert word_list_version(WORDS) != word_list_version(identity_words(["strong", "weak", "new-1b"]))
    assert len(word_list_version(WORDS)) == 16


def forged(record: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """`record` whose kept features say other than its text: which one a row holds shows which was read."""
    out = copy.deepcopy(record)
    out["features"].update({"language": "Klingon", "coding": True, "length_a": 999, "lists_b": 7, **changes})
    return out


def row_of(record: dict[str, Any], compiled: bool) -> dict[str, Any]:
    if not compiled:
        found = vote_rows.unchecked_vote_row(copy.deepcopy(record))
        assert found is not None
        return found[0]
    if ingest._compiled_vote_values is None:
        pytest.skip("the C extensions are not built here (setup.py)")
    fast = ingest._compiled_vote_values(copy.deepcopy(record))
    assert fast is not None
    return dict(zip(ROW_COLUMNS, fast[0], strict=True))


@pytest.mark.parametrize("compiled", [False, True], ids=["python", "compiled"])
def test_the_row_takes_kept_features_of_its_version_and_counts_the_rest(compiled: bool):
    record = written()
    row = row_of(forged(record), compiled)
    assert (row["language"], row["coding"], row["length_a"], row["lists_b"]) == ("Klingon", True, 999, 7)
    counted = row_of({k: v for k, v in record.items() if k != "features"}, compiled)  # an older log's vote
    stale = row_of(forged(record, version=features.FEATURES_VERSION - 1), compiled)  # counted differently then
    for row in (counted, stale):
        assert (row["language"], row["coding"], row["length_a"], row["lists_b"]) == ("English", False, 3, 0)


ODD_VALUES = [None, True, False, 0, 1, -1, 2**63 - 1, 2**63, 10**30, 1.0, "3", [1], {"n": 1}]


def odd_features(rng: random.Random, good: dict[str, Any]) -> Any:
    """A "features" value a damaged or hand-edited log may hold: of another type, a key missing, a
    value of another type, or one out of range."""
    roll = rng.random()
    if roll < 0.1:
        return rng.choice([None, [], "features", 1, [good]])
    out = dict(good)
    for _ in range(rng.randint(1, 3)):
        key = rng.choice([*out, "version", "language", "coding"])
        if rng.random() < 0.2:
            out.pop(key, None)
        else:
            out[key] = rng.choice(ODD_VALUES)
    return out


def test_odd_kept_features_are_read_alike_in_c_and_python():
    """webui/leaderboard/votes/_rows.c's test of a kept "features" value is features.stored_features':
    the same row from either, kept values or counted ones."""
    if ingest._compiled_vote_values is None:
        pytest.skip("the C extensions are not built here (setup.py)")
    rng = random.Random(7)
    base = written()
    kept = 0
    for _ in range(600):
        record = {**base, "features": odd_features(rng, base["features"])}
        python = vote_rows.unchecked_vote_row(copy.deepcopy(record))
        fast = ingest._compiled_vote_values(copy.deepcopy(record))
        assert python is not None and fast is not None
        assert fast[0] == list(ingest.sql_values(python[0])), record["features"]
        kept += features.stored_features(record["features"]) is not None
    assert 0 < kept < 300  # both kinds were tried: some odd values are still valid (a count of 0)


def chunk_leaks(records: list[dict[str, Any]]) -> list[int]:
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    chunk = ingest.derive(data, 0, True, [], ("strong", "weak"), "")
    assert all(checked for _, _, checked, *_ in chunk.rows)
    return [values[ROW_COLUMNS.index("leak")] for _, _, _, *values in chunk.rows]


def test_a_kept_identity_check_is_reused_only_for_its_own_word_list():
    """A vote whose replies name no model, with a kept check that says they do: read where the check
    was made with the index's own word list, made again where with another."""
    said_so = {"identity_leak": True, "identity_words": word_list_version(WORDS)}
    other_list = {"identity_leak": True, "identity_words": word_list_version(identity_words(["strong"]))}
    plain = written()
    assert chunk_leaks([plain]) == [0]
    assert chunk_leaks([{**plain, "hygiene": said_so}]) == [1]
    assert chunk_leaks([{**plain, "hygiene": other_list}]) == [0]
    assert chunk_leaks([{**plain, "hygiene": {"identity_leak": True}}]) == [0]  # no version: older logs
    leaked = written(("I am Strong.", "hm"))
    assert chunk_leaks([leaked, {**leaked, "hygiene": {**said_so, "identity_leak": False}}]) == [1, 0]


def without_written_keys(source: Path, target: Path) -> int:
    """Copy the log files of `source` into `target` without the keys the app adds at write time
    (as older logs are); returns how many records had them."""
    target.mkdir()
    had = 0
    for path in sorted(source.glob("*-conv.json")):
        lines = []
        for line in path.read_text().splitlines():
            record = json.loads(line)
            had += "features" in record and "identity_words" in record["hygiene"]
            record.pop("features", None)
            record.pop("hygiene", None)
            lines.append(json.dumps(record))
        (target / path.name).write_text("\n".join(lines) + "\n")
    return had


def test_the_board_is_the_same_with_and_without_the_written_keys(tmp_path: Path, capsys: pytest.CaptureFixture):
    """Golden: the command line's board of one simulated log, with the keys the app writes, and of
    the same votes without them (every feature and check computed while indexing)."""
    kept, bare = tmp_path / "kept", tmp_path / "bare"
    truth = simulate(kept, 3000, seed=5, days=3)
    assert without_written_keys(kept, bare) > 0.9 * truth["votes"]  # all but the older-form votes
    outputs = []
    for folder in (kept, bare):
        assert main([str(folder), "--rounds", "20", "--csv", "-"]) == 0  # the board, style control included
        assert main([str(folder), "--categories"]) == 0  # languages, code, long prompts: battle counts
        outputs.append(capsys.readouterr().out)
    assert "granite-3-8b" in outputs[0] and "language: Chinese" in outputs[0]
    assert outputs[0] == outputs[1]

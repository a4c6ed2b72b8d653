"""A battle vote's features and identity check, computed once when the vote is written and read
back by the index (issue 33, item 2): the record keeps them, the index takes them where they are of
its version and word list and counts the text again everywhere else, and the board is the same
either way."""

from __future__ import annotations

import json
from typing import Any

from tests.records import battle, vote
from webui.db.columns import STYLE_COUNT_COLUMNS
from webui.leaderboard.votes import features
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

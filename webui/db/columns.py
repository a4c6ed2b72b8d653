"""The vote index's row: its columns and their types, one table that the index writes
(webui.leaderboard.votes), the statistics read (webui.leaderboard.stats) and the migrations create
(webui.db.schema). Names only: importing it opens nothing."""

from __future__ import annotations

# The replies' style, counted per side when the vote is read (webui.leaderboard.votes.features)
# and read by style control (webui.leaderboard.stats.style).
FEATURES = ("length", "headers", "bold", "lists")
STYLE_COUNT_COLUMNS = tuple(f"{f}_{side}" for side in ("a", "b") for f in FEATURES)  # each side's raw counts
# What a vote index keeps of each battle vote (webui.leaderboard.votes.index): no conversation text.
# `base_reason` is the drop reason that no setting changes (invalid, same_model); `leak` is the
# identity check under the word list the row was checked with (`redacted`: the write-time check,
# final); `error`/`stopped` say how the replies ended; the style counts and the prompt flags feed
# style control and the categories; the speeds are the judged replies' (None where not logged).
SPEED_FIELDS = ("ttft_s", "tokens_per_s")  # per turn in each vote state (webui.records.storage.vote_state)
SPEED_COLUMNS = tuple(f"{f}_{side}" for side in ("a", "b") for f in SPEED_FIELDS)
# What served each side (webui.models.fingerprint), None in older logs: the board keeps a name's
# fingerprints apart (webui.leaderboard.stats.fingerprints).
FINGERPRINT_COLUMNS = ("fingerprint_a", "fingerprint_b")
# The columns of a battles table that say whether a battle is in a category the operator declared
# (webui.leaderboard.votes.declared writes them at board time, webui.leaderboard.stats.categories
# reads them): this prefix and the category's name. Never stored in the index.
DECLARED_PREFIX = "declared: "
ROW_COLUMNS = (
    "tstamp",
    "model_a",
    "model_b",
    "winner",
    "anony",
    "mode",
    "battle_id",
    "question_id",
    "turn",
    "judge",
    "language",
    "voter",
    "session",
    "base_reason",
    "redacted",
    "leak",
    "error",
    "stopped",
    "coding",
    "long_prompt",
    *STYLE_COUNT_COLUMNS,
    *SPEED_COLUMNS,
    *FINGERPRINT_COLUMNS,
)
BOOL_COLUMNS = ("anony", "redacted", "leak", "error", "stopped", "coding", "long_prompt")
# The row columns by type (the rest are text); booleans are kept as 0/1, as SQLite has no other.
REAL_COLUMNS = ("tstamp", *SPEED_COLUMNS)
INTEGER_COLUMNS = ("turn", *BOOL_COLUMNS, *STYLE_COUNT_COLUMNS)
TEXT_COLUMNS = tuple(c for c in ROW_COLUMNS if c not in REAL_COLUMNS + INTEGER_COLUMNS)

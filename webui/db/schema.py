"""The vote index's tables, as numbered migrations that SQLite and PostgreSQL run alike.

`migrate` brings a store to the newest version inside the caller's transaction (one writer at a
time, so two servers starting at once never both create a table) and records each version it
applies in `migrations`. A store that a newer version of the arena migrated further is refused
rather than guessed at. An SQLite index written before migrations were numbered (it has
`meta.schema_version` and no `migrations` rows) is a cache: its tables are dropped and the logs
read again. Add a change as a new migration at the end; never edit one that has shipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webui.db.columns import (
    FINGERPRINT_COLUMNS,
    INTEGER_COLUMNS,
    REAL_COLUMNS,
    ROW_COLUMNS,
)
from webui.db.store import Dialect, Store, StoreError

# Ours, dropped by a rebuild. `migrations` and `meta` go too: a rebuild starts from version 0.
TABLES = ("votes", "files", "names", "word_sets", "meta", "migrations", "boards", "board_rows")
# Row columns that later migrations add (migration 1 creates the others): append, never reorder.
ADDED_COLUMNS = FINGERPRINT_COLUMNS


def quoted(names: tuple[str, ...] | list[str]) -> str:
    """Column names for a statement: "offset" is a reserved word in PostgreSQL."""
    return ", ".join(f'"{n}"' for n in names)


def _column_type(d: Dialect, column: str) -> str:
    return d.real if column in REAL_COLUMNS else d.integer if column in INTEGER_COLUMNS else "TEXT"


def _first(d: Dialect) -> tuple[str, ...]:
    # The row columns as this shipped: a column added to ROW_COLUMNS since is in ADDED_COLUMNS and
    # has a migration of its own.
    row_columns = ", ".join(f'"{c}" {_column_type(d, c)}' for c in ROW_COLUMNS if c not in ADDED_COLUMNS)
    return (
        # A log file, by name (which carries its server's name), and which server reads it.
        f"CREATE TABLE files (name {d.text_key} PRIMARY KEY, server TEXT NOT NULL, head TEXT NOT NULL, "
        f'"offset" {d.integer} NOT NULL, bad {d.integer} NOT NULL, torn {d.integer} NOT NULL)',
        "CREATE TABLE names (name TEXT PRIMARY KEY)",
        # `key` is a digest of `words`: a word list may outgrow what a unique index can hold.
        f"CREATE TABLE word_sets (id {d.serial_key}, key TEXT UNIQUE NOT NULL, words TEXT NOT NULL)",
        f'CREATE TABLE votes (id {d.serial_key}, file {d.text_key} NOT NULL, "offset" {d.integer} NOT NULL, '
        f"length {d.integer} NOT NULL, word_set {d.integer}, {row_columns})",
        "CREATE INDEX votes_session ON votes (session)",
        "CREATE INDEX votes_file ON votes (file)",
    )


def _rate_hits(d: Dialect) -> tuple[str, ...]:
    # Not derived from the logs, so a rebuild keeps it (it is not in TABLES): IF NOT EXISTS lets the
    # rebuild's fresh run of the migrations pass over it. One row per counted action
    # (webui/access/shared_ratelimit.py); `client` is a keyed hash, never an address.
    return (
        f"CREATE TABLE IF NOT EXISTS rate_hits (name TEXT NOT NULL, client TEXT NOT NULL, at {d.real} NOT NULL)",
        "CREATE INDEX IF NOT EXISTS rate_hits_client ON rate_hits (name, client, at)",
    )


def _fingerprints(d: Dialect) -> tuple[str, ...]:
    # NULL in the rows indexed before: their logs had no fingerprints either (or are read again).
    return tuple(f'ALTER TABLE votes ADD COLUMN "{c}" {_column_type(d, c)}' for c in FINGERPRINT_COLUMNS)


def _shared_board(d: Dialect) -> tuple[str, ...]:
    # webui/leaderboard/board/lease.py. The lease is not derived from the logs, so a rebuild keeps it
    # (IF NOT EXISTS, as for rate_hits); the board is, and a rebuild drops it with the rows.
    return (
        f"CREATE TABLE IF NOT EXISTS board_lease (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires {d.real} NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS boards (name TEXT PRIMARY KEY, version {d.integer} NOT NULL, "
        f"built_at {d.real} NOT NULL, build_s {d.real} NOT NULL, votes {d.integer} NOT NULL, "
        f"built_by TEXT NOT NULL, code TEXT NOT NULL, board {d.blob} NOT NULL)",
    )


def _board_in_parts(d: Dialect) -> tuple[str, ...]:
    # webui/leaderboard/board/codec.py: the stored board as data, not pickle, its battle rows apart
    # (`board_rows`, written once per full build) from the tables that change with every vote
    # (`boards`, which names the rows it goes with). The old pickled board is a cache: dropped.
    return (
        "DROP TABLE IF EXISTS boards",
        "DROP TABLE IF EXISTS board_rows",
        f"CREATE TABLE boards (name TEXT PRIMARY KEY, version {d.integer} NOT NULL, "
        f"built_at {d.real} NOT NULL, build_s {d.real} NOT NULL, votes {d.integer} NOT NULL, "
        f"built_by TEXT NOT NULL, code TEXT NOT NULL, rows_id {d.integer} NOT NULL, tables {d.blob} NOT NULL)",
        f"CREATE TABLE board_rows (name TEXT PRIMARY KEY, rows_id {d.integer} NOT NULL, rows {d.blob} NOT NULL)",
    )


# An index that a catch-up into an empty SQLite index drops while it inserts and makes again at
# its end (webui.leaderboard.votes.catch_up): each row would update it at a random place, a page written
# to the WAL per row at a million rows. Made again on every open too, should that catch-up die.
DEFERRED_INDEXES = ("CREATE INDEX IF NOT EXISTS votes_session ON votes (session)",)
DEFERRED_INDEX_NAMES = ("votes_session",)


@dataclass(frozen=True)
class Migration:
    version: int
    what: str
    statements: Callable[[Dialect], tuple[str, ...]]


MIGRATIONS = (
    Migration(1, "votes, log files and their offsets, model names, word lists", _first),
    Migration(2, "rate limits shared by several servers", _rate_hits),
    Migration(3, "the fingerprint of what served each side", _fingerprints),
    Migration(4, "the board one server builds and the others read, and its builder's lease", _shared_board),
    Migration(5, "the shared board stored as data, its battle rows apart", _board_in_parts),
)
LATEST = MIGRATIONS[-1].version


def migrate(store: Store) -> list[int]:
    """Apply the migrations `store` lacks, inside the caller's transaction; the versions applied."""
    store.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    store.execute("CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, what TEXT NOT NULL)")
    applied = {int(v) for (v,) in store.execute("SELECT version FROM migrations").fetchall()}
    if max(applied, default=0) > LATEST:
        raise StoreError(
            f"the vote index at {store.location} is at version {max(applied)}, newer than this "
            f"arena knows ({LATEST}): upgrade this server, or point it at another database"
        )
    if not applied and store.execute("SELECT 1 FROM meta WHERE key = 'schema_version'").fetchone():
        for table in ("votes", "files", "names", "word_sets"):  # an unnumbered SQLite cache: read again
            store.execute(f"DROP TABLE IF EXISTS {table}")
        store.execute("DELETE FROM meta WHERE key IN ('schema_version', 'identity')")
    done = []
    for migration in MIGRATIONS:
        if migration.version in applied:
            continue
        for statement in migration.statements(store.dialect):
            store.execute(statement)
        store.execute("INSERT INTO migrations (version, what) VALUES (?, ?)", (migration.version, migration.what))
        done.append(migration.version)
    return done


def drop_all(store: Store) -> None:
    for table in TABLES:
        store.execute(f"DROP TABLE IF EXISTS {table}")

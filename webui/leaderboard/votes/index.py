"""The vote index: one compact row per battle vote, kept in SQLite beside the logs.

The JSON Lines logs stay the source of truth (webui.records.storage); this index is a cache
derived from them, so that the board never re-reads transcripts. Guarantees:

- **It says how far it has read, and only whole lines** (catch_up): a crash anywhere leaves a
  chunk's rows and the file's new offset either both committed or neither, so nothing is counted
  twice or lost.
- **Rebuildable.** `reindex` drops everything and reads the logs again; so does a schema change,
  and so does a damaged SQLite file, which is first renamed aside (`set_aside`).
- **Identity checks follow the word list** (identity_checks): when the list changes, the rows
  checked with another one are checked again from their own lines. Redacted votes keep the check
  made when they were written.
- **No conversation text.** Rows hold what the board needs (`webui.db.columns.ROW_COLUMNS`).

- **Several servers, one store.** On PostgreSQL (`database=`) the index of each server's own log
  folder goes into one shared set of tables: file names carry the server's name, each file row
  says which server reads it (only that one may, and only it re-checks the file's rows), and the
  board is built from every server's rows.

The store (webui.db.store) is an SQLite file in WAL mode by default, where readers never
block the writer and the app, the command line and a catch-up in another process may share one
file; or a PostgreSQL database. Writers take turns in either. docs/leaderboard.md says why SQLite
and not DuckDB; webui.db.schema holds the tables, as numbered migrations.

`VoteIndex` puts the parts together: the store and its bookkeeping (tables), the catch-up
(catch_up, with cold_copy and identity_checks), and the reading side (reading).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from webui.db.schema import drop_all
from webui.db.store import is_damaged, set_aside
from webui.leaderboard.votes.catch_up import CatchUp, CatchUpReport
from webui.leaderboard.votes.reading import IndexReader
from webui.leaderboard.votes.tables import SET_META, IndexTables
from webui.progress import Progress

log = logging.getLogger(__name__)

INDEX_NAME = "votes-index.sqlite3"
SHARED_SNAPSHOT_NAME = "votes-index.postgresql.rows.npz"  # this server's columnar copy of a shared store


class VoteIndex:
    """The index of one log folder, in the SQLite file `path` (default LOG_DIR/votes-index.sqlite3)
    or, with `database` (a postgresql:// URL), in a store several servers share, each naming
    itself `server`. Thread-safe: writing (catching up, rebuilding) holds one connection and its
    lock; reading has a connection of its own, so that a reader never waits for a long catch-up
    (it sees what was committed). Several processes may open one store. Its parts: `tables`
    (the store), `writer` (the catch-up), `reader` (the queries)."""

    def __init__(self, log_dir: Path, path: Path | None = None, *, database: str = "", server: str = "") -> None:
        self.log_dir = Path(log_dir)
        self.server = server
        if database:
            self.path: Path | None = None
            self.snapshot_path = self.log_dir / SHARED_SNAPSHOT_NAME
            target: str | Path = database
        else:
            self.path = target = Path(path) if path is not None else self.log_dir / INDEX_NAME
            self.snapshot_path = self.path.with_name(self.path.name + ".rows.npz")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tables = IndexTables(target, server)
        self.writer = CatchUp(self.tables, self.log_dir, self.snapshot_path, sqlite=self.path is not None)
        self.reader = IndexReader(self.tables, self.log_dir, self.snapshot_path)
        self.set_aside_as: Path | None = None  # where a damaged index file went (`set_aside`)
        try:
            self.tables.open()
        except sqlite3.DatabaseError as exc:  # a damaged file (--reindex, a start): set aside, begin anew
            if self.set_aside(exc, opened=False) is None:
                raise
        self.location = self.tables.db.location

    def set_aside(self, exc: BaseException, *, opened: bool = True) -> Path | None:
        """Where `exc` says the SQLite index file is damaged (store.is_damaged: overwritten,
        truncated): rename it aside (never deleted), open a new empty one in its place, which the
        next catch-up fills from the logs, and say so once in the log. What it was renamed to;
        None, doing nothing, for any other error, on PostgreSQL (not ours to rename) or where the
        folder cannot be written."""
        if self.path is None or not is_damaged(exc):
            return None
        with self.tables.lock, self.tables.read_lock:
            if opened:
                self.tables.close()
            try:
                aside = set_aside(self.path)
            except OSError as problem:
                log.error("the vote index %s is damaged (%s) and cannot be set aside: %s", self.path, exc, problem)
                if opened:  # as it was: each use fails, and says why, as before
                    with contextlib.suppress(sqlite3.Error):
                        self.tables.open()
                return None
            self.writer.forget()
            self.tables.open()
        self.set_aside_as = aside
        log.warning(
            "the vote index %s was damaged (%s): set aside as %s; the index is built again from the logs",
            self.path,
            exc,
            aside,
        )
        return aside

    def close(self) -> None:
        with self.tables.lock, self.tables.read_lock:
            self.tables.close()

    # --- writing ---------------------------------------------------------------------------

    def catch_up(
        self,
        model_names: Sequence[str] = (),
        extra_words: str = "",
        *,
        wait_s: float | None = None,
        progress: Progress | None = None,
    ) -> CatchUpReport:
        """Index what the logs hold beyond what was read, then bring every identity check to the
        word list of the registry's `model_names`, every name seen, and `extra_words` (CatchUp.run)."""
        return self.writer.run(model_names, extra_words, wait_s=wait_s, progress=progress)

    def reindex(
        self, model_names: Sequence[str] = (), extra_words: str = "", *, progress: Progress | None = None
    ) -> CatchUpReport:
        """Forget everything and index the logs from the start."""
        with self.tables.lock, self.tables.db.transaction():
            generation = self.tables.generation()
            drop_all(self.tables.db)
            self.tables.migrate()
            self.tables.db.execute(SET_META, ("generation", str(generation + 1)))
        return self.catch_up(model_names, extra_words, progress=progress)

    # --- reading (IndexReader) ---------------------------------------------------------------

    def state(self) -> tuple[int, int]:
        """(generation, last row id): the generation changes whenever indexed rows change or go
        (a recheck, a file read again, a rebuild); between two equal generations rows only grow."""
        return self.reader.state()

    def rows(self, after_id: int = 0) -> pd.DataFrame:
        """The indexed battle votes (those added after row `after_id`) in time order, as the logs
        are read (ties by file and line): `reading.LOADED_COLUMNS`."""
        return self.reader.rows(after_id)

    def session_rows(self, session: str) -> pd.DataFrame:
        """The rows of one session's votes (`reading.LOADED_COLUMNS`), in time order."""
        return self.reader.session_rows(session)

    def skipped_lines(self) -> int:
        """Lines left out: not JSON objects with a type, or a torn last line."""
        return self.reader.skipped_lines()

    def count(self) -> int:
        return self.reader.count()

    def details(self, rows: pd.DataFrame) -> pd.DataFrame:
        """What `rows` does not load, for exports (IndexReader.details)."""
        return self.reader.details(rows)

    def records(self, rows: pd.DataFrame) -> Iterator[tuple[int, dict[str, Any] | None]]:
        """(position in `rows`, the vote record its log line holds) for each of `rows` whose line
        this log folder has (IndexReader.records)."""
        return self.reader.records(rows)

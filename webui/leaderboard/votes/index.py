"""The vote index: one compact row per battle vote, kept in SQLite beside the logs.

The JSON Lines logs stay the source of truth (webui.records.storage); this index is a cache
derived from them, so that the board never re-reads transcripts. Guarantees:

- **It says how far it has read.** Each log file's row in `files` holds the byte offset up to
  which its whole lines are indexed, and a hash of its first bytes (a file rewritten under the
  same name is indexed again from the start). The rows of a chunk and the new offset commit in
  one transaction, so a crash anywhere leaves either both or neither: `catch_up` re-reads from
  the last committed offset and nothing is counted twice or lost.
- **Only whole lines.** A last line without its newline (still being written, or torn) is left
  for the next catch-up and reported; a line that is not JSON is counted as bad and skipped.
- **Rebuildable.** `reindex` drops everything and reads the logs again; so does a schema change,
  and so does a damaged SQLite file, which is first renamed aside (`set_aside`).
- **Identity checks follow the word list.** Whether a reply names a model depends on the words
  (every model name seen, the registry's, extras), which grow as models are added. Each row
  records which word list checked it; when the list changes, the rows checked with another one
  are checked again by re-reading only their own lines (by offset), and only for the added words
  where the list just grew. Redacted votes keep the check made when they were written.
- **No conversation text.** Rows hold what the board needs (`webui.db.columns.ROW_COLUMNS`).

- **Several servers, one store.** On PostgreSQL (`database=`) the index of each server's own log
  folder goes into one shared set of tables: file names carry the server's name, each file row
  says which server reads it (only that one may, and only it re-checks the file's rows), and the
  board is built from every server's rows.

The store (webui.db.store) is an SQLite file in WAL mode by default, where readers never
block the writer and the app, the command line and a catch-up in another process may share one
file; or a PostgreSQL database. Writers take turns in either. docs/leaderboard.md says why SQLite
and not DuckDB; webui.db.schema holds the tables, as numbered migrations.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import hashlib
import json
import logging
import multiprocessing
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from webui.db.columns import (
    BOOL_COLUMNS,
    FINGERPRINT_COLUMNS,
    INTEGER_COLUMNS,
    REAL_COLUMNS,
    ROW_COLUMNS,
    SPEED_COLUMNS,
    TEXT_COLUMNS,
)
from webui.db.schema import DEFERRED_INDEX_NAMES, DEFERRED_INDEXES, drop_all, migrate, quoted
from webui.db.store import Store, StoreError, is_damaged, open_store, set_aside
from webui.leaderboard.votes import row_cache
from webui.leaderboard.votes.ingest import CHUNK_BYTES, Chunk, derive, logged_names, parse, read_chunk, recheck
from webui.leaderboard.votes.rows import CONVERSATION_COLUMNS, conversation_columns
from webui.leaderboard.votes.workers import Task, Workers
from webui.progress import Progress
from webui.records.identity import identity_words
from webui.records.storage import log_files

log = logging.getLogger(__name__)

INDEX_NAME = "votes-index.sqlite3"
SHARED_SNAPSHOT_NAME = "votes-index.postgresql.rows.npz"  # this server's columnar copy of a shared store
HEAD_BYTES = 4096  # how much of a file's start identifies it
PARALLEL_MIN_BYTES = 64 << 20  # less to read: not worth starting worker processes
MAX_WORKERS = 4
PIPELINE_DEPTH = 4  # chunks read ahead of the one being committed
RECHECK_BATCH = 20_000  # rows a worker checks again at a time
FORESEE_BYTES = 64 << 20  # log bytes a worker scans for names at a time
SNAPSHOT_MIN_ROWS = 20_000  # fewer rows since the columnar copy: not worth writing it again
# Loaded with every row (what the board needs); the rest only for exports (`details`) and, for a
# session's own rows, "my votes" (`session_rows`): near-unique text costs memory per row.
DETAIL_COLUMNS = ("battle_id", "question_id", "judge", "mode", "session")
LOADED_COLUMNS = ("id", "file", "offset", "length", *(c for c in ROW_COLUMNS if c not in DETAIL_COLUMNS))
# Each loaded column's kind (row_cache.Builder), as the schema stores it.
_LOADED_KINDS = {
    c: "bool" if c in BOOL_COLUMNS else "real" if c in REAL_COLUMNS else "int" if c in INTEGER_COLUMNS else "text"
    for c in LOADED_COLUMNS
} | {"id": "int", "offset": "int", "length": "int"}
_TEXT = pd.StringDtype(na_value=float("nan"))  # what pandas makes of a column of text and NULLs
_ORDER = 'ORDER BY tstamp, file, "offset"'  # time, then as the logs are read
_INSERT_VOTE = (
    f'INSERT INTO votes (file, "offset", length, word_set, {quoted(ROW_COLUMNS)}) '
    f"VALUES ({', '.join('?' * (4 + len(ROW_COLUMNS)))})"
)
_SET_META = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
# The meta key (one per server) of the word lists this server's rows may carry, so that a catch-up
# learns whether any row needs checking again without reading every row. Absent: not known (an
# index written before it was kept), and found once by reading them.
_IN_USE = "word_sets_in_use:"


@dataclass
class _ColdCopy:
    """The columnar copy a catch-up into an empty index builds (`VoteIndex._start_copy`)."""

    builder: row_cache.Builder
    identity: str  # the index's, and its generation, when the catch-up began
    generation: int
    bumps: int = 0  # generations this catch-up added
    leaks: list[tuple[int, int]] = field(default_factory=list)  # (leak, row id) a recheck changed


@dataclass
class CatchUpReport:
    """What one catch-up did."""

    files: int = 0  # log files looked at
    votes: int = 0  # battle votes added
    reread_files: int = 0  # files indexed again from the start (rewritten under the same name)
    rechecked: int = 0  # rows whose identity check was redone for a new word list


class VoteIndex:
    """The index of one log folder, in the SQLite file `path` (default LOG_DIR/votes-index.sqlite3)
    or, with `database` (a postgresql:// URL), in a store several servers share, each naming
    itself `server`. Thread-safe: writing (catching up, rebuilding) holds one connection and its
    lock; reading has a connection of its own, so that a reader never waits for a long catch-up
    (it sees what was committed). Several processes may open one store."""

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
        self._lock = threading.Lock()
        # Files this object has read to the end, by (size, mtime, inode) then: looked at again
        # only once that changes, so a catch-up with nothing new costs a stat per file.
        self._unchanged: dict[str, tuple[int, int, int] | None] = {}
        self._identity: str | None = None
        self._copy: _ColdCopy | None = None  # during a catch-up into an empty index
        self._progress: Progress | None = None  # during a catch-up that reports its bytes
        self._read_lock = threading.Lock()
        self.set_aside_as: Path | None = None  # where a damaged index file went (`set_aside`)
        self._target = target
        try:
            self._open()
        except sqlite3.DatabaseError as exc:  # a damaged file (--reindex, a start): set aside, begin anew
            if self.set_aside(exc, opened=False) is None:
                raise
        self.location = self._db.location

    def _open(self) -> None:
        """Both connections, the tables brought up to date (by the constructor, or under both locks)."""
        self._db: Store = open_store(self._target)
        try:
            with self._db.transaction():
                self._migrate()
            self._reader: Store = open_store(self._target)
        except BaseException:
            self._db.close()
            raise

    def set_aside(self, exc: BaseException, *, opened: bool = True) -> Path | None:
        """Where `exc` says the SQLite index file is damaged (store.is_damaged: overwritten,
        truncated): rename it aside (never deleted), open a new empty one in its place, which the
        next catch-up fills from the logs, and say so once in the log. What it was renamed to;
        None, doing nothing, for any other error, on PostgreSQL (not ours to rename) or where the
        folder cannot be written."""
        if self.path is None or not is_damaged(exc):
            return None
        with self._lock, self._read_lock:
            if opened:
                self._db.close()
                self._reader.close()
            try:
                aside = set_aside(self.path)
            except OSError as problem:
                log.error("the vote index %s is damaged (%s) and cannot be set aside: %s", self.path, exc, problem)
                if opened:  # as it was: each use fails, and says why, as before
                    with contextlib.suppress(sqlite3.Error):
                        self._open()
                return None
            self._unchanged, self._identity = {}, None
            self._open()
        self.set_aside_as = aside
        log.warning(
            "the vote index %s was damaged (%s): set aside as %s; the index is built again from the logs",
            self.path,
            exc,
            aside,
        )
        return aside

    def close(self) -> None:
        with self._lock, self._read_lock:
            self._db.close()
            self._reader.close()

    @contextlib.contextmanager
    def _read(self) -> Iterator[Store]:
        with self._read_lock:
            yield self._reader

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
        word list of the registry's `model_names`, every name seen, and `extra_words`. With
        `wait_s`, give up (doing nothing) if another catch-up holds the index longer than that.
        `progress` counts the bytes read of those unread (a command line's bar)."""
        report, unread = CatchUpReport(), 0
        if not self._lock.acquire(timeout=-1 if wait_s is None else wait_s):
            return report
        self._progress = progress
        try:
            paths = log_files(self.log_dir)
            report.files = len(paths)
            identity = self._meta("identity")
            if identity != self._identity:  # rebuilt (here or by another process): look at everything
                self._unchanged, self._identity = {}, identity
            paths = [p for p in paths if self._stat(p) != self._unchanged.get(p.name)]
            ranges = self._unread(paths)
            unread = sum(size - start for _, start, size in ranges)
            if progress is not None:
                progress.set_total(unread)
            self._copy = self._start_copy() if unread else None  # (a poll of an empty folder: nothing)
            with _pool_for(unread) as pool:  # (a worker that dies: workers.Workers reads its part here)
                foreseen = self._foresee(ranges, pool) if unread > CHUNK_BYTES else set()
                with self._deferring_indexes(self._copy is not None):
                    for path in paths:
                        before = self._stat(path)
                        self._catch_up_file(path, report, model_names, extra_words, pool, foreseen)
                        self._unchanged[path.name] = before  # read to its end as it stood then
                report.rechecked = self._recheck(self._words(model_names, extra_words), pool)
            if self._copy is not None and self._copy.builder.rows >= SNAPSHOT_MIN_ROWS:
                with contextlib.suppress(OSError):  # only slower: the first load makes the copy
                    self._save_copy(self._copy)
        finally:
            self._copy, self._progress = None, None
            self._lock.release()
        if unread >= PARALLEL_MIN_BYTES:
            give_back_freed_memory()
        return report

    @contextlib.contextmanager
    def _deferring_indexes(self, cold: bool) -> Iterator[None]:
        """Without schema.DEFERRED_INDEXES while a catch-up fills an empty index (`cold`)."""
        if not cold:
            yield
            return
        with self._transaction():
            for name in DEFERRED_INDEX_NAMES:
                self._db.execute(f"DROP INDEX IF EXISTS {name}")
        try:
            yield
        finally:
            with self._transaction():
                for statement in DEFERRED_INDEXES:
                    self._db.execute(statement)

    def _start_copy(self) -> _ColdCopy | None:
        """For a catch-up into an empty SQLite index: the columnar copy of the rows it adds, built
        as each chunk commits, so that the first load does not read them all back (`rows`). Only
        SQLite: there ids follow each other within a transaction, which is how a chunk's rows
        learn theirs."""
        if self.path is None or self._db.execute("SELECT 1 FROM votes LIMIT 1").fetchone() is not None:
            return None
        return _ColdCopy(row_cache.Builder(_LOADED_KINDS), self._meta("identity") or "", self._generation())

    def _save_copy(self, copy: _ColdCopy) -> None:
        """Write the copy's rows (rechecks applied, in the index's order) as `rows` would, unless
        the index holds other rows or changes than the copy saw (another writer came in)."""
        identity, generation = self._meta("identity") or "", self._generation()
        count, last = self._db.execute("SELECT count(*), coalesce(max(id), 0) FROM votes").fetchone()
        if (identity, generation, count) != (copy.identity, copy.generation + copy.bumps, copy.builder.rows):
            return
        values, codes = copy.builder.arrays()
        ids, tstamps = values["id"], values["tstamp"]
        if len(ids) and (ids[-1] != last or np.any(np.diff(ids) <= 0) or np.isnan(tstamps).any()):
            return  # (a NaN time is NULL in SQLite, which sorts it first)
        if copy.leaks:
            changed_ids = np.fromiter((row_id for _, row_id in copy.leaks), np.int64, len(copy.leaks))
            values["leak"][np.searchsorted(ids, changed_ids)] = [bool(leak) for leak, _ in copy.leaks]
        file_codes, file_names = codes["file"]
        rank = np.empty(len(file_names), np.int64)  # each file's place in name order, by code
        rank[sorted(range(len(file_names)), key=file_names.__getitem__)] = np.arange(len(file_names))
        order = np.lexsort((values["offset"], rank[file_codes], tstamps))  # _ORDER
        values = {name: array[order] for name, array in values.items()}
        codes = {name: (found[order], texts) for name, (found, texts) in codes.items()}
        meta = {"identity": identity, "generation": generation}
        row_cache.write(self.snapshot_path, list(LOADED_COLUMNS), values, codes, meta)

    @staticmethod
    def _stat(path: Path) -> tuple[int, int, int] | None:
        try:
            info = path.stat()
        except OSError:
            return None
        return info.st_size, info.st_mtime_ns, info.st_ino

    def _unread(self, paths: list[Path]) -> list[tuple[Path, int, int]]:
        """(path, offset indexed so far, size) of each of `paths` with bytes not read yet."""
        done = dict(self._db.execute('SELECT name, "offset" FROM files').fetchall())
        found = []
        for path in paths:
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size > done.get(path.name, 0):
                found.append((path, done.get(path.name, 0), size))
        return found

    def reindex(
        self, model_names: Sequence[str] = (), extra_words: str = "", *, progress: Progress | None = None
    ) -> CatchUpReport:
        """Forget everything and index the logs from the start."""
        with self._lock, self._db.transaction():
            generation = self._generation()
            drop_all(self._db)
            self._migrate()
            self._db.execute(_SET_META, ("generation", str(generation + 1)))
        return self.catch_up(model_names, extra_words, progress=progress)

    def state(self) -> tuple[int, int]:
        """(generation, last row id): the generation changes whenever indexed rows change or go
        (a recheck, a file read again, a rebuild); between two equal generations rows only grow."""
        with self._read() as db:
            return self._generation(db), int(db.execute("SELECT coalesce(max(id), 0) FROM votes").fetchone()[0])

    def _generation(self, db: Store | None = None) -> int:
        return int(self._meta("generation", db) or 0)

    def _meta(self, key: str, db: Store | None = None) -> str | None:
        row = (db or self._db).execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _bump_generation(self) -> None:
        self._db.execute(_SET_META, ("generation", str(self._generation() + 1)))
        if self._copy is not None:
            self._copy.bumps += 1

    def _migrate(self) -> None:
        """Inside a write transaction: the newest tables, and this store's identity."""
        migrate(self._db)
        for statement in DEFERRED_INDEXES:
            self._db.execute(statement)
        # Names this index among others at the same place (a rebuild, a deleted file): the columnar
        # copy of its rows is only valid for the index that wrote it.
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES ('identity', ?) ON CONFLICT (key) DO NOTHING", (uuid.uuid4().hex,)
        )
        # No file of this server yet: none of its rows carries a word list.
        self._db.execute(
            "INSERT INTO meta (key, value) SELECT ?, '[]' WHERE NOT EXISTS (SELECT 1 FROM files WHERE server = ?) "
            "ON CONFLICT (key) DO NOTHING",
            (_IN_USE + self.server, self.server),
        )

    def _foresee(self, ranges: list[tuple[Path, int, int]], pool: Workers) -> set[str]:
        """The names that the unread `ranges` (`_unread`) hold (ingest.logged_names), in `pool`:
        each chunk is then checked against the names that later chunks bring, and the rows need
        no second check once they are all read."""
        pieces = [
            (path, start, start + FORESEE_BYTES)
            for path, offset, size in ranges
            for start in range(offset, size, FORESEE_BYTES)
        ]
        return set().union(*(task.result() for task in [pool.submit(logged_names, *piece) for piece in pieces]))

    def _catch_up_file(
        self,
        path: Path,
        report: CatchUpReport,
        model_names: Sequence[str],
        extra: str,
        pool: Workers,
        foreseen: AbstractSet[str],
    ) -> None:
        """Read ahead (in `pool`) and commit each chunk in order with the file's new
        offset, provided nobody else moved that offset meanwhile (then start again from theirs).
        The chunks are checked against the names known, seen so far and `foreseen`."""
        with path.open("rb") as handle:
            while True:
                with self._transaction():
                    offset, _ = self._file_position(path.name, handle, report)
                    known = sorted({n for (n,) in self._db.execute("SELECT name FROM names")} | foreseen)
                if self._pipeline(path.name, handle, offset, known, model_names, extra, pool, report):
                    return

    def _pipeline(
        self,
        name: str,
        handle: BinaryIO,
        offset: int,
        known: list[str],
        model_names: Sequence[str],
        extra: str,
        pool: Workers,
        report: CatchUpReport,
    ) -> bool:
        """True when the file's end was reached, False when another writer got in the way."""
        pending: collections.deque[Task[Chunk]] = collections.deque()
        at_end = False
        while pending or not at_end:
            while not at_end and len(pending) < PIPELINE_DEPTH:
                data, at_end = read_chunk(handle, offset)
                pending.append(pool.submit(derive, data, offset, at_end, known, tuple(model_names), extra))
                offset += data.rfind(b"\n") + 1
                at_end = at_end or b"\n" not in data
            chunk = pending.popleft().result()
            known = sorted(set(known) | chunk.names)
            with self._transaction():
                if not self._commit(name, chunk, report):
                    for task in pending:
                        task.cancel()
                    return False
        return True

    def _transaction(self) -> contextlib.AbstractContextManager[None]:
        return self._db.transaction()  # one writer at a time, across processes and servers too

    def _commit(self, name: str, chunk: Chunk, report: CatchUpReport) -> bool:
        """Add one chunk's rows and move the file's offset past it, if it still starts there."""
        stored = self._db.execute('SELECT "offset", bad FROM files WHERE name = ?', (name,)).fetchone()
        if stored is None or stored[0] != chunk.start:
            return False
        self._db.executemany(
            "INSERT INTO names (name) VALUES (?) ON CONFLICT (name) DO NOTHING", [(n,) for n in sorted(chunk.names)]
        )
        word_set = self._word_set_id(chunk.words)
        rows = [
            (name, offset, length, word_set if checked else None, *values)
            for offset, length, checked, *values in chunk.rows
        ]
        self._db.executemany(_INSERT_VOTE, _typed(rows) if self._db.strict_types else rows)
        if self._copy is not None and rows:
            self._add_to_copy(self._copy, name, chunk.rows)
        if any(row[3] is not None for row in rows):
            self._note_in_use(add={word_set})
        self._db.execute(
            'UPDATE files SET "offset" = ?, bad = ?, torn = ? WHERE name = ?',
            (chunk.end, stored[1] + chunk.bad, int(chunk.torn), name),
        )
        report.votes += len(chunk.rows)
        if self._progress is not None and chunk.end > chunk.start:  # once per chunk (megabytes), never per line
            self._progress.add(chunk.end - chunk.start)
        return True

    def _add_to_copy(self, copy: _ColdCopy, name: str, rows: list[tuple]) -> None:
        """Inside the chunk's transaction: its rows were the last inserted, so their ids are the
        newest ones, in order."""
        last = int(self._db.execute("SELECT max(id) FROM votes").fetchone()[0])
        by_position = list(zip(*rows, strict=True))  # offset, length, checked?, *ROW_COLUMNS
        found: dict[str, Sequence[Any]] = {"id": range(last - len(rows) + 1, last + 1), "file": (name,) * len(rows)}
        found.update(offset=by_position[0], length=by_position[1])
        found.update((c, by_position[3 + ROW_COLUMNS.index(c)]) for c in LOADED_COLUMNS[4:])
        try:
            copy.builder.add(found)
        except row_cache.Unsupported:
            self._copy = None  # an odd value: the first load reads the rows back instead

    def _file_position(self, name: str, handle: Any, report: CatchUpReport) -> tuple[int, int]:
        """(offset, bad lines so far) of a file, starting it again if it is not the file indexed."""
        known = self._db.execute('SELECT server, head, "offset", bad FROM files WHERE name = ?', (name,)).fetchone()
        size = os.fstat(handle.fileno()).st_size
        if known is not None:
            server, head, offset, bad = known
            if server != self.server:  # two servers' files under one name: neither may undo the other's rows
                raise StoreError(
                    f"the log file {name} is indexed for the server {server!r}, not {self.server!r}: "
                    "each server that shares a database needs its own --server-name"
                )
            covered = _head_length(head)
            if offset <= size and covered <= size and _head(handle, covered) == head:
                if covered < min(size, HEAD_BYTES):  # a file that was short: know more of it from now on
                    self._db.execute("UPDATE files SET head = ? WHERE name = ?", (_head(handle, HEAD_BYTES), name))
                return offset, bad
            self._db.execute("DELETE FROM votes WHERE file = ?", (name,))
            self._bump_generation()
            report.reread_files += 1
        head = _head(handle, HEAD_BYTES)
        self._db.execute(
            'INSERT INTO files (name, server, head, "offset", bad, torn) VALUES (?, ?, ?, 0, 0, 0) '
            'ON CONFLICT (name) DO UPDATE SET head = excluded.head, "offset" = 0, bad = 0, torn = 0',
            (name, self.server, head),
        )
        return 0, 0

    def _words(self, model_names: Sequence[str], extra: str) -> tuple[str, ...]:
        seen = sorted(n for (n,) in self._db.execute("SELECT name FROM names"))
        return identity_words([*model_names, *seen], extra)

    def _word_set_id(self, words: Sequence[str]) -> int:
        text = json.dumps(sorted(set(words)))
        key = hashlib.sha256(text.encode()).hexdigest()
        self._db.execute("INSERT INTO word_sets (key, words) VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (key, text))
        return int(self._db.execute("SELECT id FROM word_sets WHERE key = ?", (key,)).fetchone()[0])

    def _recheck(self, words: Sequence[str], pool: Workers | None = None) -> int:
        """Check again, against `words`, every row of this server's files checked with another word
        list (another server's rows are its own to check: only it has their lines). Which lists
        are in use comes from meta, so that with nothing to check no row is read."""
        current = self._word_set_id(words)
        mine = "file IN (SELECT name FROM files WHERE server = ?)"
        stale = sorted(self._in_use() - {current})
        found = [self._db.execute("SELECT id, words FROM word_sets WHERE id = ?", (i,)).fetchone() for i in stale]
        others = [row for row in found if row is not None]  # None: rebuilt by another process meanwhile
        rechecked = 0
        for old_id, old_words in others:
            old, new = set(json.loads(old_words)), set(words)
            if old <= new:  # only added words: a row that leaked still leaks; the rest, for those
                check, where = sorted(new - old), "word_set = ? AND leak = 0"
            elif old >= new:  # only words taken away: a row that did not leak still does not
                check, where = list(words), "word_set = ? AND leak = 1"
            else:
                check, where = list(words), "word_set = ?"
            newest = int(self._db.execute("SELECT coalesce(max(id), 0) FROM votes").fetchone()[0])
            targets = self._db.execute(
                f'SELECT id, file, "offset", length, leak FROM votes WHERE {where} AND {mine} '
                'AND id <= ? ORDER BY file, "offset"',
                (old_id, self.server, newest),
            ).fetchall()
            before = {row_id: bool(leak) for row_id, _, _, _, leak in targets}
            found = self._leaks(targets, check, pool)
            changed = [(int(leak), row_id) for row_id, leak in found if leak != before[row_id]]
            if self._copy is not None:
                self._copy.leaks.extend(changed)
            with self._transaction():
                self._db.executemany("UPDATE votes SET leak = ? WHERE id = ?", changed)
                self._db.execute(
                    f"UPDATE votes SET word_set = ? WHERE word_set = ? AND {mine} AND id <= ?",
                    (current, old_id, self.server, newest),
                )
                # Rows another process added meanwhile with the old list keep it in use.
                later = self._db.execute(
                    "SELECT DISTINCT file FROM votes WHERE id > ? AND word_set = ?", (newest, old_id)
                ).fetchall()
                self._note_in_use(add={current}, remove=set() if {f for (f,) in later} & self._my_files() else {old_id})
                if changed:
                    self._bump_generation()
            rechecked += len(targets)
        return rechecked

    def _my_files(self) -> set[str]:
        return {n for (n,) in self._db.execute("SELECT name FROM files WHERE server = ?", (self.server,))}

    def _in_use(self) -> set[int]:
        """The word lists this server's rows may carry (a few more after rows went: never fewer)."""
        stored = self._meta(_IN_USE + self.server)
        if stored is not None:
            return set(json.loads(stored))
        with self._transaction():  # once for an index from before the list was kept: read every row
            found = {
                int(w)
                for (w,) in self._db.execute(
                    "SELECT DISTINCT word_set FROM votes WHERE word_set IS NOT NULL "
                    "AND file IN (SELECT name FROM files WHERE server = ?)",
                    (self.server,),
                )
            }
            self._db.execute(_SET_META, (_IN_USE + self.server, json.dumps(sorted(found))))
        return found

    def _note_in_use(self, add: AbstractSet[int], remove: AbstractSet[int] = frozenset()) -> None:
        """Inside a write transaction: keep meta's word lists in use up to date (if it is kept)."""
        stored = self._meta(_IN_USE + self.server)
        if stored is None:
            return  # not known yet: the next recheck reads every row
        before = set(json.loads(stored))
        after = (before | add) - remove
        if after != before:
            self._db.execute(_SET_META, (_IN_USE + self.server, json.dumps(sorted(after))))

    def _leaks(
        self, targets: list[tuple[int, str, int, int, int]], words: Sequence[str], pool: Workers | None
    ) -> list[tuple[int, bool]]:
        """(row id, leaks?) for rows re-read from their lines (`ingest.recheck`), in the processes
        of `pool`, or in a pool of their own when they are many, else here."""
        batches = [
            (self.log_dir / name, rows[start : start + RECHECK_BATCH])
            for name, rows in _by_file(targets)
            for start in range(0, len(rows), RECHECK_BATCH)
        ]
        size = sum(length for _, _, _, length, _ in targets)
        with contextlib.nullcontext(pool) if pool is not None and pool.parallel else _pool_for(size) as workers:
            tasks = [workers.submit(recheck, path, rows, tuple(words)) for path, rows in batches]
            return [found for task in tasks for found in task.result()]

    # --- reading ---------------------------------------------------------------------------

    def rows(self, after_id: int = 0) -> pd.DataFrame:
        """The indexed battle votes (those added after row `after_id`) in time order, as the logs
        are read (ties by file and line): `LOADED_COLUMNS`. All rows come from the columnar copy
        of the last load where it is still valid (same index, same generation) plus the rows
        added since, and the copy is renewed once the rows added since are many."""
        if after_id:
            return self._fetch(after_id)
        with self._read() as db:
            identity, generation = self._meta("identity", db) or "", self._generation(db)
        base = self._snapshot(identity, generation)
        frame = (
            append_rows(base, self._fetch(int(base["id"].max()))) if base is not None and len(base) else self._fetch(0)
        )
        fresh = len(frame) - (len(base) if base is not None else 0)
        if fresh >= max(SNAPSHOT_MIN_ROWS, len(frame) // 10):
            with contextlib.suppress(OSError):  # only slower next time
                row_cache.save(frame, self.snapshot_path, {"identity": identity, "generation": generation})
        return frame

    def _fetch(self, after_id: int) -> pd.DataFrame:
        with self._read() as db:
            data = db.execute(
                f"SELECT {quoted(LOADED_COLUMNS)} FROM votes WHERE id > ? {_ORDER}", (after_id,)
            ).fetchall()
        return _frame(data)

    def _snapshot(self, identity: str, generation: int) -> pd.DataFrame | None:
        try:
            frame, meta = row_cache.load(self.snapshot_path)
        except (OSError, ValueError, KeyError):
            return None
        valid = meta.get("identity") == identity and meta.get("generation") == generation
        return frame if valid and list(frame.columns) == list(LOADED_COLUMNS) else None

    def session_rows(self, session: str) -> pd.DataFrame:
        """The rows of one session's votes (`LOADED_COLUMNS`), in time order."""
        with self._read() as db:
            data = db.execute(
                f"SELECT {quoted(LOADED_COLUMNS)}, session FROM votes WHERE session = ? {_ORDER}", (session,)
            ).fetchall()
        return _frame(data, session=True)

    def skipped_lines(self) -> int:
        """Lines left out: not JSON objects with a type, or a torn last line."""
        with self._read() as db:
            bad, torn = db.execute("SELECT coalesce(sum(bad), 0), coalesce(sum(torn), 0) FROM files").fetchone()
        return int(bad) + int(torn)

    def count(self) -> int:
        with self._read() as db:
            return int(db.execute("SELECT count(*) FROM votes").fetchone()[0])

    def details(self, rows: pd.DataFrame) -> pd.DataFrame:
        """What `rows` does not load, for exports: `DETAIL_COLUMNS` from the index and the
        conversation columns (`rows.CONVERSATION_COLUMNS`) read from each vote's own line
        (empty where that line is not in this log folder)."""
        ids = [int(i) for i in rows["id"]]
        found: dict[int, tuple] = {}
        with self._read() as db:
            for start in range(0, len(ids), 500):  # databases cap the parameters of one statement
                batch = ids[start : start + 500]
                query = f"SELECT id, {', '.join(DETAIL_COLUMNS)} FROM votes WHERE id IN ({', '.join('?' * len(batch))})"
                found.update((row[0], row[1:]) for row in db.execute(query, batch))
        missing = (None,) * len(DETAIL_COLUMNS)
        stored = pd.DataFrame([found.get(i, missing) for i in ids], columns=list(DETAIL_COLUMNS), index=rows.index)
        return pd.concat([stored, self._conversations(rows)], axis=1)

    def records(self, rows: pd.DataFrame) -> Iterator[tuple[int, dict[str, Any] | None]]:
        """(position in `rows`, the vote record its log line holds) for each of `rows` whose line
        this log folder has (another server's file in a shared store, or one deleted since: left
        out; a line that no longer parses: None)."""
        places = pd.DataFrame({"file": rows["file"].to_numpy(), "offset": rows["offset"].to_numpy()})
        places["length"] = rows["length"].to_numpy()
        for name, group in places.groupby("file", sort=False):
            try:
                handle = (self.log_dir / str(name)).open("rb")
            except FileNotFoundError:
                continue
            with handle:
                for position, offset, length in zip(group.index, group["offset"], group["length"], strict=True):
                    yield int(position), parse(os.pread(handle.fileno(), int(length), int(offset)))

    def _conversations(self, rows: pd.DataFrame) -> pd.DataFrame:
        found: dict[tuple[str, int], dict[str, Any]] = {}
        files, offsets = rows["file"].to_numpy(), rows["offset"].to_numpy()
        for position, record in self.records(rows):  # rows without a line here go without text
            if record is not None:
                found[(str(files[position]), int(offsets[position]))] = conversation_columns(record)
        keys = zip(rows["file"], rows["offset"], strict=True)
        return pd.DataFrame(
            [found.get((str(f), int(o)), {}) for f, o in keys], index=rows.index, columns=list(CONVERSATION_COLUMNS)
        )


def _frame(data: list[tuple], session: bool = False) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(data, columns=[*LOADED_COLUMNS, *(("session",) if session else ())])
    for column in BOOL_COLUMNS:
        frame[column] = frame[column].astype(bool)
    for column in SPEED_COLUMNS:  # NULL where not logged: NaN, also when a whole load has none
        frame[column] = frame[column].astype(float)
    for column in FINGERPRINT_COLUMNS:  # text, also when a whole load has none (older logs)
        frame[column] = frame[column].astype(_TEXT)
    return frame


_TEXT_AT = [4 + ROW_COLUMNS.index(c) for c in TEXT_COLUMNS]


def _typed(rows: list[tuple]) -> list[list]:
    """Rows as a store that checks types wants them: text for text columns even where a malformed
    record put a number (SQLite keeps what it is given; the board reads it alike). Flags come as
    0/1 already (ingest.sql_values)."""
    out = []
    for row in rows:
        values = list(row)
        for at in _TEXT_AT:
            if values[at] is not None and not isinstance(values[at], str):
                values[at] = str(values[at])
        out.append(values)
    return out


def append_rows(rows: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """`rows` and `new` in the index's order (time, then file and line)."""
    if new.empty:
        return rows
    if rows.empty:
        return new
    joined = pd.concat([rows, new], ignore_index=True)
    if new["tstamp"].min() > rows["tstamp"].max():  # the usual case: new votes are the newest
        return joined
    return joined.sort_values(["tstamp", "file", "offset"], kind="stable").reset_index(drop=True)


@contextlib.contextmanager
def _pool_for(unread: int) -> Iterator[Workers]:
    """Worker processes for a long catch-up on a machine with cores to spare, else this one."""
    workers = min(os.cpu_count() or 1, MAX_WORKERS)
    if unread < PARALLEL_MIN_BYTES or workers < 2:
        yield Workers()
        return
    with ProcessPoolExecutor(workers, mp_context=_worker_context()) as pool:
        yield Workers(pool)


def _worker_context() -> multiprocessing.context.BaseContext:
    """Not a plain fork: the caller may be a thread of a server (a fork would copy its locks
    mid-use). A fork server is a fresh single-threaded process that imports the workers' modules
    once (pandas among them, most of a spawned worker's start-up) and forks every worker of this
    and later catch-ups from itself; spawn where there is none."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([derive.__module__])  # read when the server starts (once)
    return context


def give_back_freed_memory() -> None:
    """Return to the system the heap that a long catch-up used and freed: glibc's malloc keeps
    it for later otherwise (about 190 MB after a cold index of a million votes), and a board built
    next in the same process (`python -m webui.leaderboard` on new logs) would add its own peak on
    top. Nothing where the C library has no malloc_trim (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


def _head(handle: Any, size: int) -> str:
    """What identifies a log file: the hash of its first `size` bytes (fewer in a shorter file),
    and how many bytes that was. A file first indexed while shorter than HEAD_BYTES (a day's first
    vote) is compared on those bytes, and its head grows once the file does."""
    start = os.pread(handle.fileno(), size, 0)
    return hashlib.sha256(start).hexdigest() + f":{len(start)}"


def _head_length(head: str) -> int:
    """How many bytes a stored head covers (HEAD_BYTES where it cannot say: compared, and found
    to differ, the file is read again, as it would be)."""
    _, _, length = head.rpartition(":")
    return int(length) if length.isdigit() else HEAD_BYTES


def _by_file(targets: list[tuple[int, str, int, int, int]]) -> Iterator[tuple[str, list[tuple[int, int, int]]]]:
    groups: dict[str, list[tuple[int, int, int]]] = {}
    for row_id, name, offset, length, _ in targets:
        groups.setdefault(name, []).append((row_id, offset, length))
    yield from groups.items()

"""The vote index's catch-up: index what the logs hold beyond what was read. Guarantees:

- **It says how far it has read.** Each log file's row in `files` holds the byte offset up to
  which its whole lines are indexed, and a hash of its first bytes (a file rewritten under the
  same name is indexed again from the start). The rows of a chunk and the new offset commit in
  one transaction, so a crash anywhere leaves either both or neither: a catch-up re-reads from
  the last committed offset and nothing is counted twice or lost.
- **Only whole lines.** A last line without its newline (still being written, or torn) is left
  for the next catch-up and reported; a line that is not JSON is counted as bad and skipped.
- **One writer.** Writers take turns (the store's transactions), across processes and servers;
  a chunk commits only where the file's offset is still the one it was read from.

Chunks are read ahead and turned into rows (`ingest.derive`) in worker processes on a long
catch-up (`workers.pool_for`); they commit here, in order. Then every identity check is brought to
the current word list (identity_checks).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import hashlib
import os
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from webui.db.columns import ROW_COLUMNS, TEXT_COLUMNS
from webui.db.schema import DEFERRED_INDEX_NAMES, DEFERRED_INDEXES, quoted
from webui.db.store import StoreError
from webui.leaderboard.votes import cold_copy, reading, row_cache, workers
from webui.leaderboard.votes.identity_checks import recheck_rows
from webui.leaderboard.votes.ingest import CHUNK_BYTES, Chunk, derive, logged_names, read_chunk
from webui.leaderboard.votes.tables import IndexTables
from webui.leaderboard.votes.workers import Task, Workers
from webui.progress import Progress
from webui.records.storage import log_files

HEAD_BYTES = 4096  # how much of a file's start identifies it
PIPELINE_DEPTH = 4  # chunks read ahead of the one being committed
FORESEE_BYTES = 64 << 20  # log bytes a worker scans for names at a time
_INSERT_VOTE = (
    f'INSERT INTO votes (file, "offset", length, word_set, {quoted(ROW_COLUMNS)}) '
    f"VALUES ({', '.join('?' * (4 + len(ROW_COLUMNS)))})"
)


@dataclass
class CatchUpReport:
    """What one catch-up did."""

    files: int = 0  # log files looked at
    votes: int = 0  # battle votes added
    reread_files: int = 0  # files indexed again from the start (rewritten under the same name)
    rechecked: int = 0  # rows whose identity check was redone for a new word list


class CatchUp:
    """The writing side of the index in `tables`, for the log folder `log_dir`. `snapshot_path`:
    where a catch-up into an empty SQLite index (`sqlite`) writes the columnar copy of its rows."""

    def __init__(self, tables: IndexTables, log_dir: Path, snapshot_path: Path, *, sqlite: bool) -> None:
        self.tables = tables
        self.log_dir = log_dir
        self.snapshot_path = snapshot_path
        self.sqlite = sqlite
        # Files this object has read to the end, by (size, mtime, inode) then: looked at again
        # only once that changes, so a catch-up with nothing new costs a stat per file.
        self._unchanged: dict[str, tuple[int, int, int] | None] = {}
        self._identity: str | None = None
        self._copy: cold_copy.ColdCopy | None = None  # during a catch-up into an empty index
        self._progress: Progress | None = None  # during a catch-up that reports its bytes

    def forget(self) -> None:
        """Look at every file again at the next catch-up (the index was set aside)."""
        self._unchanged, self._identity = {}, None

    def run(
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
        if not self.tables.lock.acquire(timeout=-1 if wait_s is None else wait_s):
            return report
        self._progress = progress
        try:
            paths = log_files(self.log_dir)
            report.files = len(paths)
            identity = self.tables.meta("identity")
            if identity != self._identity:  # rebuilt (here or by another process): look at everything
                self._unchanged, self._identity = {}, identity
            paths = [p for p in paths if _stat(p) != self._unchanged.get(p.name)]
            ranges = self._unread(paths)
            unread = sum(size - start for _, start, size in ranges)
            if progress is not None:
                progress.set_total(unread)
            # (a poll of an empty folder: nothing)
            self._copy = cold_copy.start(self.tables) if unread and self.sqlite else None
            with workers.pool_for(unread) as pool:  # (a worker that dies: workers.Workers reads its part here)
                foreseen = self._foresee(ranges, pool) if unread > CHUNK_BYTES else set()
                with self._deferring_indexes(self._copy is not None):
                    for path in paths:
                        before = _stat(path)
                        self._catch_up_file(path, report, model_names, extra_words, pool, foreseen)
                        self._unchanged[path.name] = before  # read to its end as it stood then
                words = self.tables.words(model_names, extra_words)
                report.rechecked = recheck_rows(self.tables, self.log_dir, words, pool, self._copy)
            if self._copy is not None and self._copy.builder.rows >= reading.SNAPSHOT_MIN_ROWS:
                with contextlib.suppress(OSError):  # only slower: the first load makes the copy
                    cold_copy.save(self._copy, self.tables, self.snapshot_path)
        finally:
            self._copy, self._progress = None, None
            self.tables.lock.release()
        if unread >= workers.PARALLEL_MIN_BYTES:
            give_back_freed_memory()
        return report

    @contextlib.contextmanager
    def _deferring_indexes(self, cold: bool) -> Iterator[None]:
        """Without schema.DEFERRED_INDEXES while a catch-up fills an empty index (`cold`)."""
        if not cold:
            yield
            return
        with self.tables.transaction():
            for name in DEFERRED_INDEX_NAMES:
                self.tables.db.execute(f"DROP INDEX IF EXISTS {name}")
        try:
            yield
        finally:
            with self.tables.transaction():
                for statement in DEFERRED_INDEXES:
                    self.tables.db.execute(statement)

    def _unread(self, paths: list[Path]) -> list[tuple[Path, int, int]]:
        """(path, offset indexed so far, size) of each of `paths` with bytes not read yet."""
        done = dict(self.tables.db.execute('SELECT name, "offset" FROM files').fetchall())
        found = []
        for path in paths:
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size > done.get(path.name, 0):
                found.append((path, done.get(path.name, 0), size))
        return found

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
                with self.tables.transaction():
                    offset, _ = self._file_position(path.name, handle, report)
                    known = sorted({n for (n,) in self.tables.db.execute("SELECT name FROM names")} | foreseen)
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
            with self.tables.transaction():
                if not self._commit(name, chunk, report):
                    for task in pending:
                        task.cancel()
                    return False
        return True

    def _commit(self, name: str, chunk: Chunk, report: CatchUpReport) -> bool:
        """Add one chunk's rows and move the file's offset past it, if it still starts there."""
        db = self.tables.db
        stored = db.execute('SELECT "offset", bad FROM files WHERE name = ?', (name,)).fetchone()
        if stored is None or stored[0] != chunk.start:
            return False
        db.executemany(
            "INSERT INTO names (name) VALUES (?) ON CONFLICT (name) DO NOTHING", [(n,) for n in sorted(chunk.names)]
        )
        word_set = self.tables.word_set_id(chunk.words)
        rows = [
            (name, offset, length, word_set if checked else None, *values)
            for offset, length, checked, *values in chunk.rows
        ]
        db.executemany(_INSERT_VOTE, _typed(rows) if db.strict_types else rows)
        if self._copy is not None and rows:
            try:
                cold_copy.add(self._copy, self.tables, name, chunk.rows)
            except row_cache.Unsupported:
                self._copy = None  # an odd value: the first load reads the rows back instead
        if any(row[3] is not None for row in rows):
            self.tables.note_in_use(add={word_set})
        db.execute(
            'UPDATE files SET "offset" = ?, bad = ?, torn = ? WHERE name = ?',
            (chunk.end, stored[1] + chunk.bad, int(chunk.torn), name),
        )
        report.votes += len(chunk.rows)
        if self._progress is not None and chunk.end > chunk.start:  # once per chunk (megabytes), never per line
            self._progress.add(chunk.end - chunk.start)
        return True

    def _file_position(self, name: str, handle: Any, report: CatchUpReport) -> tuple[int, int]:
        """(offset, bad lines so far) of a file, starting it again if it is not the file indexed."""
        db = self.tables.db
        known = db.execute('SELECT server, head, "offset", bad FROM files WHERE name = ?', (name,)).fetchone()
        size = os.fstat(handle.fileno()).st_size
        if known is not None:
            server, head, offset, bad = known
            if server != self.tables.server:  # two servers' files under one name: neither may undo the other's rows
                raise StoreError(
                    f"the log file {name} is indexed for the server {server!r}, not {self.tables.server!r}: "
                    "each server that shares a database needs its own --server-name"
                )
            covered = _head_length(head)
            if offset <= size and covered <= size and _head(handle, covered) == head:
                if covered < min(size, HEAD_BYTES):  # a file that was short: know more of it from now on
                    db.execute("UPDATE files SET head = ? WHERE name = ?", (_head(handle, HEAD_BYTES), name))
                return offset, bad
            db.execute("DELETE FROM votes WHERE file = ?", (name,))
            cold_copy.bump_generation(self.tables, self._copy)
            report.reread_files += 1
        head = _head(handle, HEAD_BYTES)
        db.execute(
            'INSERT INTO files (name, server, head, "offset", bad, torn) VALUES (?, ?, ?, 0, 0, 0) '
            'ON CONFLICT (name) DO UPDATE SET head = excluded.head, "offset" = 0, bad = 0, torn = 0',
            (name, self.tables.server, head),
        )
        return 0, 0


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns, info.st_ino


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

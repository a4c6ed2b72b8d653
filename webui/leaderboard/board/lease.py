"""The board of several servers sharing one PostgreSQL store: one builds it, every server reads it.

Building the board costs up to a core; with several servers, building it once is enough. The
servers elect a builder with a lease, one row of `board_lease`: a holder and the time it expires.
Guarantees:

- **One builder at a time.** A server takes the lease when there is none, when it has expired or
  when it already holds it (renewing it); the check and the write are one transaction under the
  store's writer lock, so two servers asking at once never both win (`next_lease` is the rule).
- **A dead builder is replaced in bounded time.** A builder renews at every turn of its live board
  (every few seconds); one that dies (SIGKILL, a lost machine) stops renewing, and another server
  takes over within `lease_s` and a poll. A server that closes hands the lease over at once.
- **A stale builder writes nothing.** A board is written only while its builder still holds the
  lease (checked in the writing transaction): one whose lease passed on during a long build
  learns it then (`LeaseLost`) and becomes a reader.
- **A long build keeps its lease.** While `renewing()` is open (the live board wraps its full
  builds in it) a thread renews the lease every third of it, so a build longer than the lease does
  not hand the board to another server halfway.
- **Readers load a board once, and its rows once per full build.** A reader looks at the stored
  board's version every poll and loads the board only when it changed. The board is stored in two
  parts (webui.leaderboard.board.codec): the battle rows, written when a full build made new ones,
  and the tables, written with every version; a reader loads the rows only when they changed.

The same table holds one-off claims (`claim_once`): a row per snapshot period, which the first
server to ask gets and keeps (webui/server/schedule.py), so that servers sharing the store take
each scheduled snapshot once.

The lease is timed by the database's clock (one clock for every server, as the shared rate limits
are; tests inject `clock`). The board is stored as data, not pickle, so a reader decodes tables
and runs nothing it reads; a board built by another arena version is refused (its columns may
differ).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import webui
from webui.db.store import Store, StoreError
from webui.leaderboard.board import codec

if TYPE_CHECKING:
    import pandas as pd

    from webui.leaderboard.board.build import Board

log = logging.getLogger(__name__)

LEASE_S = 30.0  # a builder silent this long is taken over; above the longest build, or builders alternate
NAME = "board"  # the row of the (one) shared board and of its lease


@dataclass(frozen=True)
class Published:
    """One finished board and when it was made."""

    board: Board
    version: int  # 1 for the first board, one more per rebuild
    built_at: float  # wall clock (time.time) when the build finished
    build_s: float  # how long catching up and building took
    votes: int  # battle votes in the index when it was built
    built_by: str = ""  # the server that built it, when several share the board


class LeaseLost(Exception):
    """The builder's lease passed to another server before its board was written."""


@dataclass(frozen=True)
class StoredRows:
    """The battle rows of the stored board, as this server last wrote or read them."""

    rows_id: int  # numbered by the store: one more per full build stored
    battles: pd.DataFrame
    counted: pd.DataFrame

    def are_of(self, board: Board) -> bool:
        """Whether `board` carries these very rows (the live board's tally keeps a full build's)."""
        return board.battles is self.battles and board.counted is self.counted


@dataclass(frozen=True)
class Lease:
    holder: str
    expires: float  # seconds since the epoch, on the lease's clock


def next_lease(current: Lease | None, me: str, now: float, lease_s: float) -> Lease | None:
    """The lease after `me` asks for it at `now`: its own, until `now + lease_s`, when there is
    none, it has expired or `me` holds it already; None when another server holds it."""
    if current is None or current.holder == me or current.expires <= now:
        return Lease(me, now + lease_s)
    return None


class SharedBoard:
    """The lease and the stored board, for one server, on a connection of its own."""

    def __init__(
        self,
        store: Store,
        server: str,
        *,
        lease_s: float = LEASE_S,
        clock: Callable[[], float] | None = None,
        code: str = webui.__version__,
    ) -> None:
        """`clock`: seconds since the epoch; None: the database's clock (SQLite's: this process's)."""
        self.store = store
        self.server = server
        # One holder per process: a server restarted under the same name waits for (or takes over)
        # its old lease like any other server, rather than mistaking it for its own.
        self.holder = f"{server}/{os.getpid()}/{secrets.token_hex(4)}"
        self.lease_s = lease_s
        self.clock = clock or self._database_clock
        self.code = code
        self._rows: StoredRows | None = None
        self._using_store = threading.Lock()  # the renewing thread and the owner share one connection

    def hold(self) -> bool:
        """Take or renew the lease; whether this server is now the builder."""
        with self._using_store:
            return self._hold()

    def _hold(self) -> bool:
        now = self.clock()
        with self.store.transaction():
            current = self._lease()
            lease = next_lease(current, self.holder, now, self.lease_s)
            if lease is None:
                return False
            self.store.execute(
                "INSERT INTO board_lease (name, holder, expires) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires = excluded.expires",
                (NAME, lease.holder, lease.expires),
            )
        return True

    def holds(self) -> bool:
        """Whether this server holds an unexpired lease (reads only)."""
        current = self._lease()
        return current is not None and current.holder == self.holder and current.expires > self.clock()

    def release(self) -> None:
        """Give the lease up (a server closing), so that another takes over at its next poll."""
        with self._using_store, self.store.transaction():
            self.store.execute("DELETE FROM board_lease WHERE name = ? AND holder = ?", (NAME, self.holder))

    @contextlib.contextmanager
    def renewing(self, every_s: float | None = None) -> Iterator[None]:
        """Renew the lease every `every_s` (a third of the lease) while the block runs (a long
        build), from a thread; a renewal that fails is logged, and the next publish says whether
        the lease was kept."""
        stop = threading.Event()
        period = every_s if every_s is not None else self.lease_s / 3

        def renew() -> None:
            while not stop.wait(period):
                try:
                    if not self.hold():
                        log.info("%s: the board's lease passed to another server during a build", self.server)
                        return
                except StoreError as exc:
                    log.warning("%s: the board's lease was not renewed: %s", self.server, exc)

        thread = threading.Thread(target=renew, name="board-lease", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def publish(self, published: Published) -> Published:
        """Store `published` as the shared board, numbered after the one stored; as stored. Its
        battle rows are written only when they are not those stored already. Raises LeaseLost (and
        writes nothing) if this server no longer holds the lease."""
        board = published.board
        known = self._rows if self._rows is not None and self._rows.are_of(board) else None
        rows_data = None if known is not None else codec.encode_rows(board)
        tables = codec.encode_rest(board)
        with self._using_store, self.store.transaction():
            if not self.holds():
                raise LeaseLost(f"{self.server} no longer holds the board's lease")
            row = self.store.execute("SELECT version FROM boards WHERE name = ?", (NAME,)).fetchone()
            stored = replace(published, version=(int(row[0]) if row else 0) + 1, built_by=self.server)
            rows_row = self.store.execute("SELECT rows_id FROM board_rows WHERE name = ?", (NAME,)).fetchone()
            rows_id = int(rows_row[0]) if rows_row else 0
            if known is None or known.rows_id != rows_id:  # new rows, or another builder's since ours
                rows_id += 1
                self.store.execute(
                    "INSERT INTO board_rows (name, rows_id, rows) VALUES (?, ?, ?) ON CONFLICT (name) "
                    "DO UPDATE SET rows_id = excluded.rows_id, rows = excluded.rows",
                    (NAME, rows_id, rows_data if rows_data is not None else codec.encode_rows(board)),
                )
            self.store.execute(
                "INSERT INTO boards (name, version, built_at, build_s, votes, built_by, code, rows_id, tables) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET version = excluded.version, "
                "built_at = excluded.built_at, build_s = excluded.build_s, votes = excluded.votes, "
                "built_by = excluded.built_by, code = excluded.code, rows_id = excluded.rows_id, tables = excluded.tables",
                (
                    NAME,
                    stored.version,
                    stored.built_at,
                    stored.build_s,
                    stored.votes,
                    self.server,
                    self.code,
                    rows_id,
                    tables,
                ),
            )
        self._rows = StoredRows(rows_id, board.battles, board.counted)
        return stored

    def read(self, known: int | None) -> Published | None:
        """The stored board if its version is not `known` (None: no board stored, or the same).
        Raises StoreError for a board of another arena version, BoardDataError for damaged bytes."""
        with self._using_store:
            row = self.store.execute("SELECT version, code FROM boards WHERE name = ?", (NAME,)).fetchone()
            if row is None or int(row[0]) == known:
                return None
            if row[1] != self.code:
                raise StoreError(
                    f"the shared board in {self.store.location} was built by arena {row[1]}, this server runs "
                    f"{self.code}: run one version on every server"
                )
            cached = self._rows.rows_id if self._rows is not None else -1
            # One statement, so the tables and the rows are of one commit; the rows only if new here.
            row = self.store.execute(
                "SELECT b.version, b.built_at, b.build_s, b.votes, b.built_by, b.tables, r.rows_id, "
                "CASE WHEN r.rows_id = ? THEN NULL ELSE r.rows END "
                "FROM boards b JOIN board_rows r ON r.name = b.name WHERE b.name = ?",
                (cached, NAME),
            ).fetchone()
        if row is None:  # dropped by a rebuild meanwhile
            return None
        version, built_at, build_s, votes, built_by, tables, rows_id, rows_data = row
        if rows_data is not None:
            battles, counted = codec.decode_rows(bytes(rows_data))
            self._rows = StoredRows(int(rows_id), battles, counted)
        assert self._rows is not None and self._rows.rows_id == int(rows_id)
        board = codec.decode(bytes(tables), (self._rows.battles, self._rows.counted))
        return Published(board, int(version), float(built_at), float(build_s), int(votes), str(built_by))

    def close(self) -> None:
        self.store.close()

    def _database_clock(self) -> float:
        if self.store.dialect.name == "sqlite":  # one machine: one clock
            return time.time()
        return float(self.store.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0])

    def _lease(self) -> Lease | None:
        row = self.store.execute("SELECT holder, expires FROM board_lease WHERE name = ?", (NAME,)).fetchone()
        return Lease(str(row[0]), float(row[1])) if row else None


def claim_once(store: Store, name: str, holder: str, expires: float, *, forget_before: float | None = None) -> bool:
    """Claim `name` (another row than the board's: a snapshot's period) for `holder` for good:
    the first server to ask wins, in one transaction under the store's writer lock, and every later
    ask, by any server, loses. Claims that `expires` before `forget_before` are deleted: they are
    of periods long past. Whether `holder` has the claim."""
    with store.transaction():
        if forget_before is not None:
            store.execute(
                "DELETE FROM board_lease WHERE name LIKE ? AND name <> ? AND expires < ?",
                (name.split(":", 1)[0] + ":%", name, forget_before),
            )
        store.execute(
            "INSERT INTO board_lease (name, holder, expires) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
            (name, holder, expires),
        )
        row = store.execute("SELECT holder FROM board_lease WHERE name = ?", (name,)).fetchone()
    return row is not None and str(row[0]) == holder

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
- **Readers load a board once.** A reader looks at the stored board's version every poll and
  loads the board itself only when it changed.

The lease is timed by the database's clock (one clock for every server, as the shared rate limits
are; tests inject `clock`). The board travels pickled: the database is trusted as the
servers themselves are (whoever can write to it can already forge votes), and a board built by
another arena version is refused rather than unpickled.
"""

from __future__ import annotations

import os
import pickle
import secrets
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import webui
from webui.leaderboard.store import Store, StoreError

if TYPE_CHECKING:
    from webui.leaderboard.board import Board

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

    def hold(self) -> bool:
        """Take or renew the lease; whether this server is now the builder."""
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
        with self.store.transaction():
            self.store.execute("DELETE FROM board_lease WHERE name = ? AND holder = ?", (NAME, self.holder))

    def publish(self, published: Published) -> Published:
        """Store `published` as the shared board, numbered after the one stored; as stored. Raises
        LeaseLost (and writes nothing) if this server no longer holds the lease."""
        data = zlib.compress(pickle.dumps(published.board, protocol=pickle.HIGHEST_PROTOCOL), 1)
        with self.store.transaction():
            if not self.holds():
                raise LeaseLost(f"{self.server} no longer holds the board's lease")
            row = self.store.execute("SELECT version FROM boards WHERE name = ?", (NAME,)).fetchone()
            stored = replace(published, version=(int(row[0]) if row else 0) + 1, built_by=self.server)
            self.store.execute(
                "INSERT INTO boards (name, version, built_at, build_s, votes, built_by, code, board) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET version = excluded.version, "
                "built_at = excluded.built_at, build_s = excluded.build_s, votes = excluded.votes, "
                "built_by = excluded.built_by, code = excluded.code, board = excluded.board",
                (NAME, stored.version, stored.built_at, stored.build_s, stored.votes, self.server, self.code, data),
            )
        return stored

    def read(self, known: int | None) -> Published | None:
        """The stored board if its version is not `known` (None: no board stored, or the same)."""
        row = self.store.execute("SELECT version, code FROM boards WHERE name = ?", (NAME,)).fetchone()
        if row is None or int(row[0]) == known:
            return None
        if row[1] != self.code:
            raise StoreError(
                f"the shared board in {self.store.location} was built by arena {row[1]}, this server runs "
                f"{self.code}: run one version on every server"
            )
        row = self.store.execute(
            "SELECT version, built_at, build_s, votes, built_by, board FROM boards WHERE name = ?", (NAME,)
        ).fetchone()
        if row is None:  # dropped by a rebuild meanwhile
            return None
        version, built_at, build_s, votes, built_by, data = row
        board = pickle.loads(zlib.decompress(bytes(data)))
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

"""Rate limits counted in the shared PostgreSQL database (`--database`), so that a client over its
limit on one server is refused by every other (docs/deploy.md, "Several servers").

It decides as webui.access.ratelimit.RateLimiter does (sliding windows; a refused attempt is not
counted; an action counted only when all of its limits admit it), and keeps one row per counted
action in `rate_hits` (webui/db/schema.py, migration 2). Guarantees:

- one client's checks are serialised across servers by a transaction-scoped advisory lock on its
  name, so two servers never both admit the last allowed action;
- times are the database's clock, so servers whose clocks disagree still share one window;
- a client is named by a keyed hash of its user or address (the key derives from the shared
  secret): the table never holds an address;
- a database outage never blocks chatting: a check that cannot reach the database is counted by
  the in-process `fallback` instead, the log says so once per outage, and the database is tried
  again after `retry_s`. Counts made meanwhile stay per process.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from webui.access.ratelimit import Limit, RateLimited, RateLimiter, client_key, enabled_limits
from webui.db.schema import migrate
from webui.db.store import StoreError, open_store, redact
from webui.records.events import ClientInfo

log = logging.getLogger(__name__)

TIMEOUT_S = 2  # connecting, and each statement: a check waits no longer before counting in-process
RETRY_S = 30.0  # after a failure, checks count in-process this long before the database is tried again
NOW = "SELECT extract(epoch FROM clock_timestamp())::float8"
# The newest hit that must leave the window before one more fits (None: there is room).
LIMITING_HIT = "SELECT at FROM rate_hits WHERE name = %s AND client = %s AND at > %s ORDER BY at DESC OFFSET %s LIMIT 1"
COUNT = "SELECT count(*) FROM rate_hits WHERE name = %s AND client = %s AND at > %s"
INSERT = "INSERT INTO rate_hits (name, client, at) VALUES (%s, %s, %s)"
SWEEP = "DELETE FROM rate_hits WHERE name = %s AND at <= %s"


class SharedRateLimiter:
    """The Limiter of several servers sharing `url`; thread-safe (one connection, one check at a time)."""

    def __init__(
        self,
        limits: Mapping[str, Limit],
        url: str,
        key: bytes,
        fallback: RateLimiter | None = None,
        clock: Callable[[], float] = time.monotonic,
        retry_s: float = RETRY_S,
        sweep_every: int = 1024,
    ) -> None:
        self.limits = dict(limits)
        self.fallback = fallback or RateLimiter(self.limits)
        self.location = redact(url)
        self._url = url
        self._key = key
        self._clock = clock
        self._retry_s = retry_s
        self._sweep_every = sweep_every
        self._calls = 0
        self._conn: Any = None
        self._migrated = False
        self._retry_at: float | None = None  # set while the database is out
        self._lock = threading.Lock()

    @property
    def shared(self) -> bool:
        """False while checks are counted in-process (the database is out)."""
        return self._retry_at is None

    def check(self, action: str, client: ClientInfo) -> None:
        """Count one `action` for `client`, or raise RateLimited without counting it."""
        limits = enabled_limits(self.limits, action)
        key = client_key(client)
        if key is None or not limits:
            return
        if self._shared(lambda conn: self._count(conn, action, self._name(key), limits)):
            return
        self.fallback.check(action, client)

    def remaining(self, action: str, client: ClientInfo) -> int | None:
        limits = enabled_limits(self.limits, action)
        key = client_key(client)
        if key is None or not limits:
            return None
        left: list[int] = []
        if self._shared(lambda conn: left.extend(self._left(conn, self._name(key), limits))):
            return min(left)
        return self.fallback.remaining(action, client)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()

    def _name(self, key: str) -> str:
        return hmac.new(self._key, key.encode("utf-8"), hashlib.sha256).hexdigest()[:32]

    def _shared(self, call: Callable[[Any], None]) -> bool:
        """Run `call(connection)`; False (after logging the outage) if the database failed it.
        RateLimited passes through: that is the shared count's answer."""
        import psycopg

        with self._lock:
            conn = self._connection()
            if conn is None:
                return False
            try:
                call(conn)
            except psycopg.Error as exc:
                self._went_down(exc)
                return False
            return True

    def _connection(self) -> Any:
        import psycopg

        if self._conn is not None and not self._conn.closed:
            return self._conn
        if self._retry_at is not None and self._clock() < self._retry_at:
            return None
        try:
            if not self._migrated:
                self._migrate()
            ms = int(TIMEOUT_S * 1000)
            self._conn = psycopg.connect(
                self._url,
                autocommit=True,
                connect_timeout=TIMEOUT_S,
                options=f"-c statement_timeout={ms} -c lock_timeout={ms}",
            )
        except (psycopg.Error, StoreError) as exc:
            self._went_down(exc)
            return None
        if self._retry_at is not None:
            log.warning("rate limits: %s is back; counting there again", self.location)
            self._retry_at = None
        return self._conn

    def _migrate(self) -> None:
        store = open_store(self._url)
        try:
            with store.transaction():
                migrate(store)
        finally:
            store.close()
        self._migrated = True

    def _went_down(self, exc: BaseException) -> None:
        if self._retry_at is None:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            log.error(
                "rate limits: %s failed (%s); counting in this process only until it is back "
                "(a client may get up to its limit once more on each server meanwhile)",
                self.location,
                first,
            )
        self._retry_at = self._clock() + self._retry_s
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _count(self, conn: Any, action: str, name: str, limits: list[tuple[str, Limit]]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))
            now = float(conn.execute(NOW).fetchone()[0])
            refusals = []
            for limit_name, limit in limits:
                row = conn.execute(LIMITING_HIT, (limit_name, name, now - limit.window_s, limit.count - 1)).fetchone()
                if row is not None:
                    refusals.append((float(row[0]) + limit.window_s - now, limit))
            if refusals:
                wait, limit = max(refusals, key=lambda r: r[0])
                raise RateLimited(action, limit, wait)  # leaves the transaction: nothing counted
            with conn.cursor() as cursor:
                cursor.executemany(INSERT, [(limit_name, name, now) for limit_name, _ in limits])
            self._calls += 1
            if self._calls % self._sweep_every == 0:
                for limit_name, limit in self.limits.items():  # hits that no window holds any more
                    conn.execute(SWEEP, (limit_name, now - limit.window_s))

    def _left(self, conn: Any, name: str, limits: list[tuple[str, Limit]]) -> list[int]:
        now = float(conn.execute(NOW).fetchone()[0])
        counts = [
            int(conn.execute(COUNT, (limit_name, name, now - limit.window_s)).fetchone()[0])
            for limit_name, limit in limits
        ]
        return [max(0, limit.count - n) for (_, limit), n in zip(limits, counts, strict=True)]

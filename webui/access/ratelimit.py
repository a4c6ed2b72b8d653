"""Per-client rate limits: at most N actions of a kind per sliding window, keyed on who is asking.

A public arena attracts scripts that send hundreds of messages or votes a minute; the first wastes
every other visitor's generation slots, the second skews the leaderboard. This module only counts
and decides. It holds no Gradio or HTTP types, so the UI handlers and the HTTP API call it the
same way:

    services.rate_limiter.check("message", client_info(request, settings))

which raises `RateLimited` (an `ArenaError` whose message is safe to show) when the client is over
its limit. The key is the logged-in user when there is one, else the real client address as
`webui.access.clients.client_info` resolved it behind the trusted proxies. A client with neither (a
handler called directly in a test) is not limited: there is nothing to tell it apart by.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from webui.errors import ArenaError, ConfigError
from webui.records.events import ClientInfo

MESSAGE = "message"
VOTE = "vote"


@dataclass(frozen=True)
class Limit:
    """At most `count` actions per `window_s` seconds; a count of 0 turns the limit off."""

    count: int
    window_s: float = 60.0
    noun: str = "requests"  # for the message: "at most 20 messages per minute"

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ConfigError(f"rate limit for {self.noun}: must be 0 (off) or more, got {self.count}")
        if self.window_s <= 0:
            raise ConfigError(f"rate limit window for {self.noun}: must be > 0 seconds, got {self.window_s}")

    @property
    def enabled(self) -> bool:
        return self.count > 0

    def describe(self) -> str:
        per = "minute" if self.window_s == 60 else f"{self.window_s:g} seconds"
        noun = self.noun.removesuffix("s") if self.count == 1 else self.noun
        return f"at most {self.count} {noun} per {per}"


class RateLimited(ArenaError):
    """The client sent too many actions of one kind; `retry_after_s` says when the next one fits."""

    def __init__(self, action: str, limit: Limit, retry_after_s: float) -> None:
        self.action = action
        self.limit = limit
        self.retry_after_s = max(1, math.ceil(retry_after_s))
        super().__init__(
            f"Too many {limit.noun}: {limit.describe()}. Please wait {self.retry_after_s} s and try again."
        )


def client_key(client: ClientInfo) -> str | None:
    """The identity a limit counts against: the user if logged in (one person on many addresses),
    else the address (many anonymous people behind one address share it, which is the price of
    not trusting anything the client says about itself)."""
    if client.user:
        return f"user:{client.user}"
    if client.address:
        return f"addr:{client.address}"
    return None


class RateLimiter:
    """Sliding-window counters, one deque of timestamps per (action, client). Thread-safe: Gradio
    runs handlers on a thread pool and the HTTP API on the event loop, both call `check`."""

    def __init__(self, limits: Mapping[str, Limit], clock: Callable[[], float] = time.monotonic,
                 sweep_every: int = 1024) -> None:
        self.limits = dict(limits)
        self._clock = clock
        self._hits: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()
        self._calls = 0
        self._sweep_every = sweep_every

    def check(self, action: str, client: ClientInfo) -> None:
        """Count one `action` for `client`, or raise RateLimited without counting it (a refused
        attempt does not push the client's window further out)."""
        limit = self._limit(action)
        key = client_key(client)
        if not limit.enabled or key is None:
            return
        now = self._clock()
        with self._lock:
            self._maybe_sweep(now)
            hits = self._hits.setdefault((action, key), deque())
            _forget_before(hits, now - limit.window_s)
            if len(hits) >= limit.count:
                raise RateLimited(action, limit, hits[0] + limit.window_s - now)
            hits.append(now)

    def remaining(self, action: str, client: ClientInfo) -> int | None:
        """How many more `action`s the client may do now (None: unlimited). For tests and headers."""
        limit = self._limit(action)
        key = client_key(client)
        if not limit.enabled or key is None:
            return None
        now = self._clock()
        with self._lock:
            hits = self._hits.get((action, key), deque())
            _forget_before(hits, now - limit.window_s)
            return max(0, limit.count - len(hits))

    def tracked_clients(self) -> int:
        with self._lock:
            return len(self._hits)

    def _limit(self, action: str) -> Limit:
        try:
            return self.limits[action]
        except KeyError:
            raise ConfigError(f"no rate limit configured for {action!r}; known: {', '.join(self.limits)}") from None

    def _maybe_sweep(self, now: float) -> None:
        """Drop clients idle for longer than their window, so that memory stays bounded by the
        clients active in the last window rather than every address ever seen."""
        self._calls += 1
        if self._calls % self._sweep_every:
            return
        for (action, key), hits in list(self._hits.items()):
            _forget_before(hits, now - self.limits[action].window_s)
            if not hits:
                del self._hits[(action, key)]


def _forget_before(hits: deque[float], cutoff: float) -> None:
    while hits and hits[0] <= cutoff:
        hits.popleft()


def build_rate_limiter(messages_per_minute: int, votes_per_minute: int,
                       clock: Callable[[], float] = time.monotonic) -> RateLimiter:
    """The limiter the server uses: chat messages (each send, in any mode) and votes."""
    return RateLimiter({
        MESSAGE: Limit(messages_per_minute, 60.0, "messages"),
        VOTE: Limit(votes_per_minute, 60.0, "votes"),
    }, clock=clock)

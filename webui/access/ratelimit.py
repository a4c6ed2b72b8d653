"""Per-client rate limits: at most N actions of a kind per sliding window, keyed on who is asking.

A public arena attracts scripts that send hundreds of messages or votes a minute; the first wastes
every other visitor's generation slots, the second skews the leaderboard. This module only counts
and decides. It holds no Gradio or HTTP types, so the UI handlers and the HTTP API call it the
same way:

    services.rate_limiter.check("message", client_info(request, settings))

which raises `RateLimited` (an `ArenaError` whose message is safe to show) when the client is over
its limit. An action may have several limits: a key "vote/day" is checked with "vote" (30 votes
a minute and 200 a day), and an action is counted only when every one of its limits admits it. The key is the logged-in user when there is one, else the real client address as
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
from typing import Protocol

from webui.errors import ArenaError, ConfigError
from webui.records.events import ClientInfo

MESSAGE = "message"
VOTE = "vote"
VOTE_DAY = "vote/day"  # checked with VOTE
DAY_S = 86_400.0


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
        per = {60.0: "minute", 3600.0: "hour", DAY_S: "day"}.get(self.window_s, f"{self.window_s:g} seconds")
        noun = self.noun.removesuffix("s") if self.count == 1 else self.noun
        return f"at most {self.count} {noun} per {per}"


class RateLimited(ArenaError):
    """The client sent too many actions of one kind; `retry_after_s` says when the next one fits."""

    def __init__(self, action: str, limit: Limit, retry_after_s: float) -> None:
        self.action = action
        self.limit = limit
        self.retry_after_s = max(1, math.ceil(retry_after_s))
        super().__init__(
            f"Too many {limit.noun}: {limit.describe()}. Please wait {_duration(self.retry_after_s)} and try again."
        )


def _duration(seconds: int) -> str:
    """ "42 s", "17 min", "3 h 5 min": a daily limit's wait in seconds would mean nothing to anyone."""
    if seconds < 120:
        return f"{seconds} s"
    minutes = math.ceil(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def client_key(client: ClientInfo) -> str | None:
    """The identity a limit counts against: the user if logged in (one person on many addresses),
    else the address (many anonymous people behind one address share it, which is the price of
    not trusting anything the client says about itself)."""
    if client.user:
        return f"user:{client.user}"
    if client.address:
        return f"addr:{client.address}"
    return None


class Limiter(Protocol):
    """What handlers call: this module's RateLimiter (one process), or the one counted in the shared
    database (webui/access/shared_ratelimit.py) when several servers serve one arena."""

    limits: dict[str, Limit]

    def check(self, action: str, client: ClientInfo) -> None: ...

    def remaining(self, action: str, client: ClientInfo) -> int | None: ...


def enabled_limits(limits: Mapping[str, Limit], action: str) -> list[tuple[str, Limit]]:
    """The enabled limits of `action`: its own and any "action/..." ones."""
    if action not in limits:
        raise ConfigError(f"no rate limit configured for {action!r}; known: {', '.join(limits)}")
    return [
        (name, limit)
        for name, limit in limits.items()
        if (name == action or name.startswith(action + "/")) and limit.enabled
    ]


class RateLimiter:
    """Sliding-window counters, one deque of timestamps per (action, client). Thread-safe: Gradio
    runs handlers on a thread pool and the HTTP API on the event loop, both call `check`."""

    def __init__(
        self, limits: Mapping[str, Limit], clock: Callable[[], float] = time.monotonic, sweep_every: int = 1024
    ) -> None:
        self.limits = dict(limits)
        self._clock = clock
        self._hits: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()
        self._calls = 0
        self._sweep_every = sweep_every

    def check(self, action: str, client: ClientInfo) -> None:
        """Count one `action` for `client`, or raise RateLimited without counting it (a refused
        attempt does not push the client's windows further out). With several limits, the one
        that makes the client wait longest is named."""
        limits = self._limits_of(action)
        key = client_key(client)
        if key is None or not limits:
            return
        now = self._clock()
        with self._lock:
            self._maybe_sweep(now)
            queues = []
            refusals = []
            for name, limit in limits:
                hits = self._hits.setdefault((name, key), deque())
                _forget_before(hits, now - limit.window_s)
                if len(hits) >= limit.count:
                    refusals.append((hits[0] + limit.window_s - now, limit))
                queues.append(hits)
            if refusals:
                wait, limit = max(refusals, key=lambda r: r[0])
                raise RateLimited(action, limit, wait)
            for hits in queues:
                hits.append(now)

    def remaining(self, action: str, client: ClientInfo) -> int | None:
        """How many more `action`s the client may do now (None: unlimited). For tests and headers."""
        limits = self._limits_of(action)
        key = client_key(client)
        if key is None or not limits:
            return None
        now = self._clock()
        left = []
        with self._lock:
            for name, limit in limits:
                hits = self._hits.get((name, key), deque())
                _forget_before(hits, now - limit.window_s)
                left.append(max(0, limit.count - len(hits)))
        return min(left)

    def tracked_clients(self) -> int:
        with self._lock:
            return len(self._hits)

    def _limits_of(self, action: str) -> list[tuple[str, Limit]]:
        return enabled_limits(self.limits, action)

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


def build_rate_limiter(
    messages_per_minute: int, votes_per_minute: int, clock: Callable[[], float] = time.monotonic, votes_per_day: int = 0
) -> RateLimiter:
    """The limiter the server uses: chat messages (each send, in any mode) and votes, per minute
    and per day (a script at 30 a minute would otherwise cast 43,200 votes a day)."""
    return RateLimiter(
        {
            MESSAGE: Limit(messages_per_minute, 60.0, "messages"),
            VOTE: Limit(votes_per_minute, 60.0, "votes"),
            VOTE_DAY: Limit(votes_per_day, DAY_S, "votes"),
        },
        clock=clock,
    )

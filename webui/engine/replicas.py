"""Which replica of a remote model takes the next request: a pure chooser, no I/O.

Guarantees:
- A healthy replica with the fewest requests in flight is chosen; ties go to the one chosen least
  recently (a fresh chooser takes them in the order the models file lists them).
- A conversation's later turns go back to the replica that served its first turn while that replica
  is healthy, so that the engine's prefix cache is reused; the key is the conversation's opening
  (system prompt and first user message), which every later turn repeats.
- A replica that failed is skipped for a backoff that doubles on each further failure; after it, a
  real request tries it again (the caller retries elsewhere when the connection fails), and one
  success makes it healthy.
- Every replica is down: the one whose backoff ends first is still tried rather than refusing
  outright, so a lone server that comes back is used at once.
"""

from __future__ import annotations

import collections
import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from webui.types import Message

BACKOFF_FIRST_S = 2.0  # a failed replica is skipped this long, doubling on each further failure
BACKOFF_MAX_S = 60.0
AFFINITY_SIZE = 10_000  # conversations remembered (the oldest are forgotten first)


def conversation_key(messages: Sequence[Message], system_prompt: str | None = None) -> str | None:
    """The opening of a conversation, hashed: the system prompt and the first user message."""
    system = next((m.content for m in messages if m.role == "system"), system_prompt or "")
    first = next((m.content for m in messages if m.role == "user"), None)
    if first is None:
        return None
    return hashlib.blake2b(f"{system}\0{first}".encode(), digest_size=16).hexdigest()


def later_turn(messages: Sequence[Message]) -> bool:
    return sum(m.role == "user" for m in messages) > 1


@dataclass
class _Replica:
    url: str
    outstanding: int = 0
    last_chosen: int = -1
    failures: int = 0
    down_until: float = 0.0


class Replicas:
    """The replicas of one remote model and what we know of each (thread-safe)."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        clock: Callable[[], float] = time.monotonic,
        backoff_s: float = BACKOFF_FIRST_S,
        max_backoff_s: float = BACKOFF_MAX_S,
    ) -> None:
        if not urls or len(set(urls)) != len(urls):
            raise ValueError(f"replicas must be one or more distinct URLs, got {list(urls)}")
        self._replicas = {url: _Replica(url) for url in urls}
        self._clock, self._backoff_s, self._max_backoff_s = clock, backoff_s, max_backoff_s
        self._lock = threading.Lock()
        self._chosen = 0
        self._affinity: collections.OrderedDict[str, str] = collections.OrderedDict()

    @property
    def urls(self) -> list[str]:
        return list(self._replicas)

    def choose(self, key: str | None = None, *, follow: bool = False, tried: Iterable[str] = ()) -> str | None:
        """Take a replica for one request (give it back with `done`): the conversation's own when
        `follow` (a later turn) and it is healthy, else the least busy healthy one, else the down
        one that comes back first. None when every replica has been `tried` already."""
        with self._lock:
            now = self._clock()
            left = [r for url, r in self._replicas.items() if url not in set(tried)]
            if not left:
                return None
            healthy = [r for r in left if r.down_until <= now]
            own = self._replicas.get(self._affinity.get(key, "")) if key is not None and follow else None
            if own is not None and own in healthy:
                replica = own
            elif healthy:
                replica = min(healthy, key=lambda r: (r.outstanding, r.last_chosen))
            else:
                replica = min(left, key=lambda r: r.down_until)
            replica.outstanding += 1
            replica.last_chosen = self._chosen = self._chosen + 1
            if key is not None:
                self._affinity[key] = replica.url
                self._affinity.move_to_end(key)
                if len(self._affinity) > AFFINITY_SIZE:
                    self._affinity.popitem(last=False)
            return replica.url

    def done(self, url: str) -> None:
        with self._lock:
            self._replicas[url].outstanding -= 1

    def succeeded(self, url: str) -> None:
        with self._lock:
            replica = self._replicas[url]
            replica.failures, replica.down_until = 0, 0.0

    def failed(self, url: str) -> None:
        """Skip `url` for a while; the pause doubles with each failure in a row."""
        with self._lock:
            replica = self._replicas[url]
            pause = min(self._backoff_s * 2**replica.failures, self._max_backoff_s)
            replica.failures += 1
            replica.down_until = self._clock() + pause

    def down(self) -> list[str]:
        """The replicas being skipped now."""
        with self._lock:
            now = self._clock()
            return [url for url, r in self._replicas.items() if r.down_until > now]

    def in_flight(self, url: str) -> int:
        with self._lock:
            return self._replicas[url].outstanding

"""Posting messages to a webhook (`--notify-url`: a Slack incoming webhook or any that takes JSON).

Guarantees:

- **Never in the way.** `send` puts the message on a bounded queue and returns at once; one
  background thread posts. A webhook that fails, refuses or hangs (each request is cut off after
  `timeout_s`) delays only the messages behind it, never a vote, a page or the server's stop.
- **Retried, within bounds.** A failed post (no connection, a timeout, an answer other than 2xx)
  is tried again after `first_delay_s`, then twice as long each time up to `max_delay_s`, at most
  `attempts` times in all; then it is dropped with one error in the log. A full queue (a webhook
  down for long) drops the new message, with a warning: the snapshots on disk keep everything.
- **The URL's secret stays out of the log.** A webhook URL is its credential (Slack's
  https://hooks.slack.com/services/T…/B…/XXXX): logs name only its scheme, host and first path
  segment (`redacted`), and any text logged from a failure is scrubbed of the rest.
- **Stops on time.** `close(wait_s)` wakes the thread from a retry's wait, waits at most `wait_s`
  (default: one post's `timeout_s`) for a post in flight, which a daemon thread may then finish or
  abandon, and drops what is still queued (with a count in the log).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

ATTEMPTS = 5
FIRST_DELAY_S = 2.0
MAX_DELAY_S = 60.0
TIMEOUT_S = 10.0
CAPACITY = 100


def redacted(url: str) -> str:
    """What a log may say of a webhook URL: scheme, host (and port), first path segment."""
    parts = urlsplit(url)
    first = parts.path.lstrip("/").split("/", 1)[0]
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}/{first}" + (
        "/…" if parts.path.strip("/") != first or parts.query else ""
    )


def post_json(url: str, body: dict[str, Any], timeout_s: float) -> None:
    """POST `body` as JSON; raises unless the answer is 2xx."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body, ensure_ascii=False).encode("utf-8"),
        headers={"Content-Type": "application/json", "User-Agent": "pairwise-arena"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # http(s) only: Settings checks
        if not 200 <= answer.status < 300:
            raise urllib.error.HTTPError(url, answer.status, answer.reason, answer.headers, None)


class Notifier:
    """One webhook, its queue and the thread that posts to it."""

    def __init__(
        self,
        url: str,
        *,
        attempts: int = ATTEMPTS,
        first_delay_s: float = FIRST_DELAY_S,
        max_delay_s: float = MAX_DELAY_S,
        timeout_s: float = TIMEOUT_S,
        capacity: int = CAPACITY,
        post: Callable[[str, dict[str, Any], float], None] = post_json,
    ) -> None:
        self.url = url
        self.shown = redacted(url)
        self.attempts, self.first_delay_s, self.max_delay_s = attempts, first_delay_s, max_delay_s
        self.timeout_s = timeout_s
        self._post = post
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=capacity)
        self._stop = threading.Event()
        self.delivered = 0  # for tests and the log
        self._thread = threading.Thread(target=self._run, name="notify", daemon=True)
        self._thread.start()

    def send(self, message: dict[str, Any]) -> bool:
        """Queue `message` for posting; False (and a warning) when the queue is full or closed."""
        if self._stop.is_set():
            return False
        try:
            self._queue.put_nowait(message)
        except queue.Full:
            log.warning("notify: %d messages wait for %s already; this one is dropped", self._queue.maxsize, self.shown)
            return False
        return True

    def close(self, wait_s: float | None = None) -> None:
        """Stop the thread (a post in flight ends within `timeout_s`); queued messages are dropped."""
        self._stop.set()
        with contextlib.suppress(queue.Full):  # a full queue wakes the thread anyway
            self._queue.put_nowait(None)  # wakes a thread waiting for work
        self._thread.join(self.timeout_s + 1 if wait_s is None else wait_s)
        left = sum(1 for m in list(self._queue.queue) if m is not None)
        if left:
            log.warning("notify: stopping with %d message(s) for %s not sent", left, self.shown)

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._queue.get()
            if message is None or self._stop.is_set():
                return
            self._deliver(message)

    def _deliver(self, message: dict[str, Any]) -> None:
        delay = self.first_delay_s
        for attempt in range(1, self.attempts + 1):
            try:
                self._post(self.url, message, self.timeout_s)
            except Exception as exc:  # any failure of one post: retried, then dropped; the thread lives on
                reason = self._scrub(exc)
                if attempt == self.attempts:
                    log.error("notify: %s failed %d times (%s); the message is dropped", self.shown, attempt, reason)
                    return
                log.warning("notify: %s failed (%s); retrying in %.0f s", self.shown, reason, delay)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, self.max_delay_s)
            else:
                self.delivered += 1
                log.info("notify: posted to %s", self.shown)
                return

    def _scrub(self, exc: BaseException) -> str:
        """The failure in one line, without the URL's secret part (some errors quote the URL)."""
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0] or type(exc).__name__
        secret = urlsplit(self.url)
        hidden = secret.path.strip("/").split("/")[1:]  # every segment after the first, longest first
        for part in (self.url, secret.path, secret.query, *sorted(hidden, key=len, reverse=True)):
            if part and part != "/":
                text = text.replace(part, "…")
        return text

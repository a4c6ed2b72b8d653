"""Several model streams at once, merged into one sequence of events for one UI handler.

Each pane's stream runs in its own thread and feeds one queue, so a fast model is never held back
by a slow one: the consumer sees every event as soon as it exists. One cancel event, shared by the
panes, is handed to the backends; setting it (Stop) stops the models at their next decoding step.
`close()` sets it, waits for the threads and returns whatever arrived meanwhile (usually the
`Finished` events with the statistics of the stopped replies).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from webui.types import StreamEvent

log = logging.getLogger(__name__)

Opener = Callable[[threading.Event], Iterator[StreamEvent]]


@dataclass(frozen=True)
class Job:
    pane: int
    open: Opener  # starts the stream (may raise eagerly: not ready, too long, busy)


@dataclass(frozen=True)
class PaneEvent:
    pane: int
    event: StreamEvent | None = None
    error: BaseException | None = None  # the stream could not start, or broke off


class _Done:
    def __init__(self, pane: int) -> None:
        self.pane = pane


class PaneStreams:
    def __init__(self, jobs: Sequence[Job], cancel: threading.Event, *, join_timeout_s: float = 30.0) -> None:
        self.cancel = cancel
        self.join_timeout_s = join_timeout_s
        self._queue: queue.Queue[PaneEvent | _Done] = queue.Queue()
        self._pending = len(jobs)
        self._threads = [
            threading.Thread(target=self._pump, args=(job,), name=f"pane-stream:{job.pane}", daemon=True) for job in jobs
        ]
        for thread in self._threads:
            thread.start()

    def _pump(self, job: Job) -> None:
        """Runs one pane's stream to its end. It keeps reading after a cancel on purpose: the
        backend then ends with Finished(cancelled), whose statistics the pane still shows."""
        stream: Iterator[StreamEvent] | None = None
        try:
            stream = job.open(self.cancel)
            for event in stream:
                self._queue.put(PaneEvent(job.pane, event=event))
        except Exception as exc:  # noqa: BLE001 - reported to the consumer, which shows a generic message
            self._queue.put(PaneEvent(job.pane, error=exc))
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
            self._queue.put(_Done(job.pane))

    def batches(self, *, idle_s: float = 0.5, min_interval_s: float = 0.12) -> Iterator[list[PaneEvent]]:
        """Lists of events as they arrive, until every stream has ended. An empty list comes after
        `idle_s` of silence: the consumer gets a chance to yield, and so to be closed by a closed
        tab even while a model is still queueing or reading a long prompt. Events arriving within
        `min_interval_s` of each other are grouped: re-rendering two long Markdown replies on every
        token would keep the browser too busy to react to a click on Stop."""
        last = 0.0
        while self._pending:
            try:
                first = self._queue.get(timeout=idle_s)
            except queue.Empty:
                yield []
                continue
            items = [first]
            deadline = max(last + min_interval_s, time.monotonic())
            while self._pending - sum(isinstance(i, _Done) for i in items) > 0:
                remaining = deadline - time.monotonic()
                try:
                    items.append(self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait())
                except queue.Empty:
                    break
            self._pending -= sum(isinstance(i, _Done) for i in items)
            last = time.monotonic()
            yield [i for i in items if isinstance(i, PaneEvent)]

    def close(self) -> list[PaneEvent]:
        """Stop every stream (idempotent), wait for the threads, and return the events that arrived
        since the last batch."""
        self.cancel.set()
        deadline = time.monotonic() + self.join_timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.error("%s did not end within %.0f s of a stop", thread.name, self.join_timeout_s)
        leftover: list[PaneEvent] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return leftover
            if isinstance(item, PaneEvent):
                leftover.append(item)

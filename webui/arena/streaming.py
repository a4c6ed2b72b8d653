"""Several model streams at once, merged into one sequence of events for one UI handler.

Each pane's stream runs in its own thread and feeds one hand-off (`webui.handoff`), so a fast model
is never held back by a slow one: the consumer sees every event as soon as it exists. One cancel
event, shared by the panes, is handed to the backends; setting it (Stop) stops the models at their
next decoding step. `close()` sets it, waits for the threads and returns whatever arrived meanwhile
(usually the `Finished` events with the statistics of the stopped replies).
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from webui.handoff import Ended, Handoff, run_in_thread
from webui.types import Finished, FinishReason, StreamEvent, TextDelta

log = logging.getLogger(__name__)

Opener = Callable[[threading.Event], Iterator[StreamEvent]]


def stored_reply(text: str, chars_per_s: float, tick_s: float = 0.05) -> Opener:
    """A reply that exists already (a prepared battle), streamed as a live one is, in pieces at
    `chars_per_s`: both panes of a prepared battle get the same pace, so that neither the pace nor
    its end tells which model is which. Stop ends it as it ends a live one. It reports no speed
    (it was not generated here), as a reply whose engine measured none."""

    def open_stream(cancel: threading.Event) -> Iterator[StreamEvent]:
        step = max(1, round(chars_per_s * tick_s))
        for start in range(0, len(text), step):
            if cancel.wait(tick_s):
                yield Finished(FinishReason.CANCELLED)
                return
            yield TextDelta(text[start : start + step])
        yield Finished(FinishReason.STOP)

    return open_stream


@dataclass(frozen=True)
class Job:
    pane: int
    open: Opener  # starts the stream (may raise eagerly: not ready, too long, busy)


@dataclass(frozen=True)
class PaneEvent:
    pane: int
    event: StreamEvent | None = None
    error: BaseException | None = None  # the stream could not start, or broke off


class PaneStreams:
    def __init__(self, jobs: Sequence[Job], cancel: threading.Event, *, join_timeout_s: float = 30.0) -> None:
        self.cancel = cancel
        self.join_timeout_s = join_timeout_s
        self._handoff: Handoff[PaneEvent] = Handoff(producers=len(jobs))
        self._threads = [
            run_in_thread(functools.partial(self._pump, job), self._handoff, f"pane-stream:{job.pane}") for job in jobs
        ]

    def _pump(self, job: Job) -> None:
        """Runs one pane's stream to its end. It keeps reading after a cancel on purpose: the
        backend then ends with Finished(cancelled), whose statistics the pane still shows. A failure
        is an event of its pane (the other panes go on); `run_in_thread` closes the hand-off."""
        stream: Iterator[StreamEvent] | None = None
        try:
            stream = job.open(self.cancel)
            for event in stream:
                self._handoff.put(PaneEvent(job.pane, event=event))
        except Exception as exc:  # reported to the consumer, which shows a generic message
            self._handoff.put(PaneEvent(job.pane, error=exc))
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def batches(self, *, idle_s: float = 0.5, min_interval_s: float = 0.12) -> Iterator[list[PaneEvent]]:
        """Lists of events as they arrive, until every stream has ended. An empty list comes after
        `idle_s` of silence: the consumer gets a chance to yield, and so to be closed by a closed
        tab even while a model is still queueing or reading a long prompt. The first events come at
        once; later ones arriving within `min_interval_s` of the previous batch are grouped:
        re-rendering long Markdown replies on every token would keep the browser too busy to react
        to a click on Stop, and every update costs the server the same whatever it carries."""
        last = 0.0
        while not self._handoff.ended:
            try:
                items = [self._handoff.get(timeout=idle_s)]
            except queue.Empty:
                yield []
                continue
            except Ended:
                return
            deadline = max(last + min_interval_s, time.monotonic())
            items += self._until(deadline)
            last = time.monotonic()
            yield items

    def _until(self, deadline: float) -> list[PaneEvent]:
        """The events that arrive until `deadline` (at least those already there)."""
        items: list[PaneEvent] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return items + self._handoff.ready()
            try:
                items.append(self._handoff.get(timeout=remaining))
            except (queue.Empty, Ended):
                return items

    def close(self) -> list[PaneEvent]:
        """Stop every stream (idempotent), wait for the threads, and return the events that arrived
        since the last batch."""
        self.cancel.set()
        deadline = time.monotonic() + self.join_timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.error("%s did not end within %.0f s of a stop", thread.name, self.join_timeout_s)
        try:
            return self._handoff.ready()
        except BaseException:  # only a thread killed by BaseException gets here
            log.exception("a pane stream ended abnormally")
            return []

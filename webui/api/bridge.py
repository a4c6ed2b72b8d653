"""From the blocking engine iterator to the async HTTP handler.

The engine is synchronous: `backend.stream` may wait for a free slot, and its iterator blocks between
tokens. Each request gets one dedicated thread that starts the stream, iterates it and closes it, so
the event loop never blocks and a generator is never closed from a thread other than the one
running it. The thread hands "started", then the events, over through an `AsyncHandoff`
(webui.handoff): anything the start or the iterator raises arrives the same way, and the end always
does. `stop()` (a dropped client) sets the cancel event that the engine watches and makes the
thread close the iterator at the next event, which stops the model.

We use our own thread rather than anyio's worker pool: a request can hold it for minutes, and the
pool is shared with Gradio's handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from webui.handoff import AsyncHandoff, Ended, run_in_thread
from webui.types import Finished, FinishReason, StreamEvent

log = logging.getLogger(__name__)
Starter = Callable[[threading.Event], Iterator[StreamEvent]]


class _Started:
    """The first item: the stream has started (what it raised instead arrives as a failure)."""


class EventPump:
    def __init__(self, start: Starter, name: str = "api-stream") -> None:
        self.cancel = threading.Event()
        self._start = start
        self._name = name
        # Made on the handler's loop; once that loop is gone nobody will read: stop the model.
        self._handoff: AsyncHandoff[StreamEvent | _Started] = AsyncHandoff(on_lost=self.stop)

    async def start(self) -> None:
        """Start the stream in the worker thread; raise here what the start raised (a bad
        parameter, a full queue), before any response is sent."""
        run_in_thread(self._run, self._handoff, self._name)
        try:
            await self._handoff.get()  # _Started, or the start's exception
        except BaseException:  # a failed start, or the handler cancelled: nobody will read the stream
            self.stop()
            raise

    async def events(self) -> AsyncIterator[StreamEvent]:
        """The events, ending after Finished. Leaving early (or being cancelled) stops the model."""
        try:
            while True:
                try:
                    item = await self._handoff.get()
                except Ended:
                    return
                except Exception as exc:  # the iterator itself raised: report, not crash
                    log.error("stream failed", exc_info=exc)
                    yield Finished(FinishReason.ERROR, error=f"{type(exc).__name__}: {exc}")
                    return
                if isinstance(item, _Started):
                    continue
                yield item
                if isinstance(item, Finished):
                    return
        finally:
            self.stop()

    def stop(self) -> None:
        self.cancel.set()

    def _run(self) -> None:
        events = self._start(self.cancel)
        self._handoff.put(_Started())
        with contextlib.closing(events):  # type: ignore[type-var]  # a generator: closing stops the model
            for event in events:
                self._handoff.put(event)
                if self.cancel.is_set() or isinstance(event, Finished):
                    break


async def stop_on_disconnect(
    is_disconnected: Callable[[], Awaitable[bool]], pump: EventPump, every_s: float = 0.25
) -> None:
    """For answers that are not streamed: nothing is sent until the end, so the server would not
    notice a client that left. Poll, and stop the model when it has."""
    while not pump.cancel.is_set():
        if await is_disconnected():
            pump.stop()
            return
        await asyncio.sleep(every_s)

"""From the blocking engine iterator to the async HTTP handler.

The engine is synchronous: `backend.stream` may wait for a free slot, and its iterator blocks between
tokens. Each request gets one dedicated thread that starts the stream, iterates it and closes it, so
the event loop never blocks and a generator is never closed from a thread other than the one
running it. The thread hands events over through an asyncio queue; anything the start raises is
handed over the same way. `stop()` (a dropped client) sets the cancel event that the engine watches
and makes the thread close the iterator at the next event, which stops the model.

We use our own thread rather than anyio's worker pool: a request can hold it for minutes, and the
pool is shared with Gradio's handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from webui.types import Finished, FinishReason, StreamEvent

log = logging.getLogger(__name__)
Starter = Callable[[threading.Event], Iterator[StreamEvent]]


class _Raised:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_STARTED = object()
_END = object()


class EventPump:
    def __init__(self, start: Starter, name: str = "api-stream") -> None:
        self.cancel = threading.Event()
        self._start = start
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    async def start(self) -> None:
        """Start the stream in the worker thread; raise here what the start raised (a bad
        parameter, a full queue), before any response is sent."""
        self.thread.start()
        try:
            first = await self._queue.get()
        except BaseException:  # the handler was cancelled while waiting: nobody will read the stream
            self.stop()
            raise
        if isinstance(first, _Raised):
            raise first.exc

    async def events(self) -> AsyncIterator[StreamEvent]:
        """The events, ending after Finished. Leaving early (or being cancelled) stops the model."""
        try:
            while True:
                item = await self._queue.get()
                if item is _END:
                    return
                if isinstance(item, _Raised):  # the iterator itself raised: report, not crash
                    yield Finished(FinishReason.ERROR, error=f"{type(item.exc).__name__}: {item.exc}")
                    return
                event: StreamEvent = item  # type: ignore[assignment]
                yield event
                if isinstance(event, Finished):
                    return
        finally:
            self.stop()

    def stop(self) -> None:
        self.cancel.set()

    def _run(self) -> None:
        try:
            events = self._start(self.cancel)
        except BaseException as exc:  # every failure goes to the handler
            self._put(_Raised(exc))
            return
        self._put(_STARTED)
        try:
            with contextlib.closing(events):  # type: ignore[type-var]  # a generator: closing stops the model
                for event in events:
                    self._put(event)
                    if self.cancel.is_set() or isinstance(event, Finished):
                        break
        except Exception as exc:  # a backend bug must not hang the client
            log.exception("stream failed")
            self._put(_Raised(exc))
        finally:
            self._put(_END)

    def _put(self, item: object) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the event loop is gone (server shutting down); nobody is listening
            self.cancel.set()


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

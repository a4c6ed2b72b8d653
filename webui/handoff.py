"""Hand-off from worker threads to one consumer: items in order, then the end, or an error.

Wherever a thread does blocking work (`model.generate`, an upstream HTTP stream, one pane's stream)
and another thread reads what it produces, the two meet here, so that three rules hold in one
place instead of in a hand-made queue per module:

* the worker reports an exception through the same channel as its items, so the consumer never
  waits for items that will not come;
* the worker always says that it is done, even when it crashes (`run_in_thread` does it in a
  `finally`), so the consumer needs no liveness polling;
* the consumer may wait in slices (`get(timeout=...)`) to look at a Stop button or a cancel event
  between items.

One consumer per hand-off; any number of producers, each of which calls `close()` once. The
consumer is a thread (`Handoff`) or a coroutine on an event loop (`AsyncHandoff`: an HTTP handler
reading a model's stream); producers use both the same way, and `run_in_thread` serves both.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class Ended(Exception):
    """Every producer has closed and every item has been taken."""


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_CLOSED = object()


class Producers(Protocol):
    """What a producer may do with either hand-off (all that `run_in_thread` needs)."""

    def fail(self, exc: BaseException) -> None: ...

    def close(self) -> None: ...


class _Channel(Generic[T]):
    """The producer side, the same for both consumers: items, a failure, the end."""

    def __init__(self, producers: int) -> None:
        self._open = producers  # read and written by the consumer only

    def _send(self, message: object) -> None:
        raise NotImplementedError

    # ---- producer side (any thread) -----------------------------------------------------------
    def put(self, item: T) -> None:
        self._send(item)

    def fail(self, exc: BaseException) -> None:
        """The consumer's next `get` (after the items put before) raises `exc`."""
        self._send(_Failure(exc))

    def close(self) -> None:
        """One producer is done."""
        self._send(_CLOSED)

    # ---- consumer side ------------------------------------------------------------------------
    @property
    def ended(self) -> bool:
        return self._open <= 0

    def _opened(self, message: object) -> bool:
        """Whether `message` is an item: a close is counted, a failure raised."""
        if message is _CLOSED:
            self._open -= 1
            return False
        if isinstance(message, _Failure):
            raise message.exc
        return True


class Handoff(_Channel[T]):
    """A consumer thread."""

    def __init__(self, producers: int = 1) -> None:
        super().__init__(producers)
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._held: BaseException | None = None  # a failure met by `ready` after some items

    def _send(self, message: object) -> None:
        self._queue.put(message)

    def get(self, timeout: float | None = None) -> T:
        """The next item. Raises `queue.Empty` when `timeout` seconds pass without one, `Ended`
        once every producer has closed, or the exception a producer failed with."""
        if self._held is not None:
            exc, self._held = self._held, None
            raise exc
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._open <= 0:
                raise Ended
            if deadline is None:
                item = self._queue.get()
            else:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            if self._opened(item):
                return item  # type: ignore[return-value]

    def __iter__(self) -> Iterator[T]:
        """Every item until the end (blocking); a producer's failure is raised."""
        while True:
            try:
                yield self.get()
            except Ended:
                return

    def until(self, stop: Callable[[], bool], every_s: float = 0.1) -> Iterator[T]:
        """Items until the end or until `stop()` is true (checked every `every_s` while waiting);
        the caller tells the two apart with `ended`."""
        while not stop():
            try:
                yield self.get(timeout=every_s)
            except queue.Empty:
                continue
            except Ended:
                return

    def ready(self) -> list[T]:
        """The items that have arrived, without waiting. A failure among them is raised by the
        next call (or now, when it comes first)."""
        items: list[T] = []
        while True:
            try:
                items.append(self.get(timeout=0))
            except (queue.Empty, Ended):
                return items
            except BaseException as exc:
                if not items:
                    raise
                self._held = exc
                return items


class AsyncHandoff(_Channel[T]):
    """A consumer coroutine: made on its event loop's thread, read there with `await get()`.
    Once the loop has closed (a server shutting down), whatever producers send is dropped and
    `on_lost` is called, so that the producer can stop work nobody will read."""

    def __init__(self, producers: int = 1, on_lost: Callable[[], None] = lambda: None) -> None:
        super().__init__(producers)
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._on_lost = on_lost

    def _send(self, message: object) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, message)
        except RuntimeError:  # the loop is closed
            self._on_lost()

    async def get(self) -> T:
        """The next item; raises `Ended` once every producer has closed, or the exception a
        producer failed with."""
        while True:
            if self._open <= 0:
                raise Ended
            item = await self._queue.get()
            if self._opened(item):
                return item  # type: ignore[return-value]


def run_in_thread(work: Callable[[], None], handoff: Producers, name: str) -> threading.Thread:
    """Start `work` in a daemon thread that reports any exception to `handoff` and always closes it."""

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # every failure must reach the consumer
            handoff.fail(exc)
        finally:
            handoff.close()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread

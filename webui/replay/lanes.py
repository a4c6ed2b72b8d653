"""One lane of work per engine: its requests run as many at once as its slots, most urgent first.

A replay sends three streams of requests (the new model's replies, the baseline's, the judge's
answers) to one, two or three engines: a judge that is also one of the two models shares that
model's slots. Each engine gets one lane: a queue served by as many threads as the engine has
slots, so that it is never sent more requests than it runs at once (its line of waiting requests
would refuse the rest, webui.engine.base.Slots) and never fewer while work waits. Within a lane a
lower priority goes first (then the order of submission): a replay puts the judge's questions
ahead of replies, so that a prompt is judged as soon as both its replies are in, while other
replies generate, instead of all the judging at the end.

Guarantees: `submit` returns a Future that holds the work's result or its exception (a lane's
thread never dies of one); `close` runs what is queued, then ends every thread.
"""

from __future__ import annotations

import itertools
import math
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from webui.engine.base import Backend
from webui.judge.run import slots_of


class Lanes:
    def __init__(self, name: str = "lane") -> None:
        self._name = name
        self._lanes: dict[int, tuple[queue.PriorityQueue[tuple[Any, ...]], list[threading.Thread]]] = {}
        self._order = itertools.count()  # ties of priority go in the order submitted
        self._lock = threading.Lock()

    def submit(self, backend: Backend, priority: tuple[int, ...], work: Callable[[], Any]) -> Future[Any]:
        """Run `work()` on `backend`'s lane (lower `priority` first)."""
        future: Future[Any] = Future()
        self._lane(backend).put((priority, next(self._order), future, work))
        return future

    def widths(self) -> list[int]:
        """The threads of each lane: the slots of each engine used so far."""
        with self._lock:
            return [len(threads) for _, threads in self._lanes.values()]

    def close(self) -> None:
        with self._lock:
            lanes, self._lanes = list(self._lanes.values()), {}
        for line, threads in lanes:
            for _ in threads:  # after everything queued: the highest priority there is
                line.put(((math.inf,), next(self._order), None, None))
        for _, threads in lanes:
            for thread in threads:
                thread.join()

    def _lane(self, backend: Backend) -> queue.PriorityQueue[tuple[Any, ...]]:
        # Two entries on the same weights share their slots object: one lane for both.
        key = id(getattr(backend, "slots", None) or backend)
        with self._lock:
            if key not in self._lanes:
                line: queue.PriorityQueue[tuple[Any, ...]] = queue.PriorityQueue()
                threads = [
                    threading.Thread(target=_serve, args=(line,), name=f"{self._name}:{backend.name}:{i}", daemon=True)
                    for i in range(slots_of(backend))
                ]
                for thread in threads:
                    thread.start()
                self._lanes[key] = (line, threads)
            return self._lanes[key][0]


def _serve(line: queue.PriorityQueue[tuple[Any, ...]]) -> None:
    while True:
        _, _, future, work = line.get()
        if future is None:
            return
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(work())
        except BaseException as exc:  # the caller reads it from the future; the lane goes on
            future.set_exception(exc)

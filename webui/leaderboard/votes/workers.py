"""The worker processes of a long catch-up, which a dying worker does not stop.

A process pool breaks as a whole when one of its processes dies (killed for memory by the
system, a crash in compiled code): every task still in it then fails with BrokenProcessPool, and
so would the catch-up. Each task given to `Workers` keeps its call, so that one whose worker died
is done again in this process, as is every task after it: that catch-up is slower, never
different, and the log says so once. Without a pool (a short catch-up) each task is done here at
once, as it is given. `pool_for` says when a catch-up is long enough for worker processes.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar

from webui.leaderboard.votes import ingest

log = logging.getLogger(__name__)

PARALLEL_MIN_BYTES = 64 << 20  # less to read: not worth starting worker processes
MAX_WORKERS = 4

T = TypeVar("T")


class Workers:
    """Tasks for `pool`'s processes, or for this process (no pool, or it broke)."""

    def __init__(self, pool: Executor | None = None) -> None:
        self._pool = pool
        self.parallel = pool is not None
        self.lost: BaseException | None = None  # why the pool broke, once it did

    def submit(self, call: Callable[..., T], *args: Any) -> Task[T]:
        future = None
        if self._pool is not None and self.lost is None:
            try:
                future = self._pool.submit(call, *args)
            except BrokenProcessPool as exc:  # it broke between two tasks
                self._lose(exc)
        return Task(self, call, args, future)

    def _lose(self, exc: BaseException) -> None:
        if self.lost is None:
            self.lost = exc
            log.warning(
                "a worker process of the vote index died (%s); its work and the rest of this "
                "catch-up are done in this process",
                self._how_it_ended(exc),
            )

    def _how_it_ended(self, exc: BaseException) -> str:
        """What is known of a death, for whoever looks into it: how the pool's processes ended (a
        signal: SIGKILL from the system short of memory, SIGSEGV from a crash), or what failed in
        reading a result here (the pool calls that broken too)."""
        ended = []
        processes = getattr(self._pool, "_processes", None) or {}  # (private, read for the log only)
        for process in list(processes.values()):
            code = process.exitcode
            if code is None or code == -signal.SIGTERM:  # running, or ended by the pool as it broke
                continue
            try:
                ended.append(f"ended by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}")
            except ValueError:
                ended.append(f"exit code {code}")
        if exc.__cause__ is not None:
            ended.append(str(exc.__cause__).strip().splitlines()[-1])
        return ", ".join(ended) or str(exc)


class Task(Generic[T]):
    """One call given to `Workers`: its result from a worker, or from this process."""

    def __init__(self, workers: Workers, call: Callable[..., T], args: tuple[Any, ...], future: Future[T] | None):
        self._workers, self._future = workers, future
        if future is None:  # here and now, as a short catch-up always did
            self._value, self._call, self._args = call(*args), None, ()
        else:
            self._call, self._args = call, args

    def result(self) -> T:
        if self._future is None:
            return self._value
        try:
            return self._future.result()
        except BrokenProcessPool as exc:
            self._workers._lose(exc)
        assert self._call is not None
        value = self._call(*self._args)
        self._future, self._value, self._call, self._args = None, value, None, ()  # (its data freed)
        return value

    def cancel(self) -> None:
        if self._future is not None:
            self._future.cancel()


@contextlib.contextmanager
def pool_for(unread: int) -> Iterator[Workers]:
    """Worker processes for a long catch-up on a machine with cores to spare, else this one."""
    workers = min(os.cpu_count() or 1, MAX_WORKERS)
    if unread < PARALLEL_MIN_BYTES or workers < 2:
        yield Workers()
        return
    with ProcessPoolExecutor(workers, mp_context=_worker_context()) as pool:
        yield Workers(pool)


def _worker_context() -> multiprocessing.context.BaseContext:
    """Not a plain fork: the caller may be a thread of a server (a fork would copy its locks
    mid-use). A fork server is a fresh single-threaded process that imports the workers' modules
    once (pandas among them, most of a spawned worker's start-up) and forks every worker of this
    and later catch-ups from itself; spawn where there is none."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([ingest.derive.__module__])  # read when the server starts (once)
    return context

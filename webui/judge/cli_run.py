"""What a judging run and a labelling run share on the command line: the votes picked from the
vote index behind a progress bar, and the run itself, Ctrl-C safe.

Guarantees: the index is closed once the votes are picked; during the run, Ctrl-C sets the run's
cancel event (what is written stays written, the next run goes on from there), and the previous
SIGINT handler, the run's log and its progress bar are restored or closed however it ends.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

from webui.judge.run import RunReport
from webui.leaderboard.votes.index import VoteIndex
from webui.progress import Progress, size

Picked = TypeVar("Picked")


class Closable(Protocol):
    def close(self) -> None: ...


def picked(args: argparse.Namespace, select: Callable[[VoteIndex, Progress], list[Picked]]) -> list[Picked]:
    """`select(index, progress)` on the vote index of `args.log_dir`, behind an indexing bar."""
    index = VoteIndex(args.log_dir, args.index)
    try:
        with Progress("indexing votes", fmt=size) as indexing:
            return select(index, indexing)
    finally:
        index.close()


def run_safely(
    what: str, total: int, log: Closable, work: Callable[[threading.Event, Progress], RunReport]
) -> RunReport:
    """`work(cancel, progress)` over `total` battles, `what` naming the bar (a bar on a terminal;
    nothing in a pipe); then `log` closed."""
    cancel = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())
    progress = Progress(what, total, unit="battles")
    try:
        return work(cancel, progress)
    finally:
        signal.signal(signal.SIGINT, previous)
        log.close()
        progress.close()

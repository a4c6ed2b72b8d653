"""The arena's own board snapshots (`--snapshot-every 24h`), taken by one server among several.

Time is cut into periods of `every_s` from the epoch (with 24h, UTC days; with 6h, 00:00, 06:00,
...). In each period the first server to see the board ready claims the period and writes a
snapshot into LOG_DIR/snapshots, named as `python -m webui.leaderboard LOG_DIR --snapshot` names
it (board-<UTC time>.json, which the tab's "changes since the last snapshot" and `--diff
LOG_DIR/snapshots` read as the newest). A server started mid-period whose period has no snapshot
yet takes one at once, so the first start gives a baseline. Then each hook in `after` gets what
was taken: the changes against the snapshot before it go to the webhook (webui.server.notify),
the snapshots and exports to the Hub (webui.server.hub_results). Guarantees:

- **One writer per period.** The claim is atomic, and it is the only way to a snapshot:
  - servers with a shared PostgreSQL store (`--database`) claim the period in the store's lease
    table (`claim_once` in webui.leaderboard.board.lease: insert-if-absent in one transaction),
    whatever their log folders: the store is the one thing they all share, and it already decides
    who builds the board. A claim is kept for good, so a restart in the period takes none again;
  - otherwise the claim is a file created with O_CREAT | O_EXCL beside the snapshots
    (`.period-<start>.claim`), which the operating system grants to one process on one folder,
    however many servers share it. A lease would not do here: it can pass between two servers
    within a period, and each would then take one.
  A server that claims a period and dies before writing leaves that period without a snapshot
  (the next period has one): a missed snapshot, never two.
- **Off the request path.** The schedule runs in its own thread, reads the last board built (never
  builds one) and writes one small file; the hooks' slow work (a webhook, the Hub) happens on
  their own threads or this one, never on a vote's.
- **Stops cleanly.** `close` ends the thread at its next wait (a snapshot being written is
  finished first, a Hub push in flight is waited for at most `wait_s`); the server's stop calls
  it (webui.server.app.serve, through webui.server.deploy.after_serving).
- **Testable without waiting.** The clock and the poll are injected; a test moves the clock.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from webui.db.store import StoreError
from webui.leaderboard.board.build import Board
from webui.leaderboard.board.lease import claim_once
from webui.leaderboard.snapshots.changes import Changes, changes
from webui.leaderboard.snapshots.snapshot import (
    STAMP,
    Snapshot,
    SnapshotError,
    build_snapshot,
    code_version,
    latest_snapshot,
    load_snapshot,
    write_snapshot,
)
from webui.leaderboard.stats.confidence import next_comparison

log = logging.getLogger(__name__)

POLL_S = 15.0  # how often the schedule looks at the clock: a snapshot comes within this of its period's start
CLAIM_PREFIX = "snapshot:"  # the rows of the store's lease table that are snapshot periods
KEEP_CLAIMS = 8  # periods whose claim files stay (older ones are removed)


@dataclass(frozen=True)
class Taken:
    """A snapshot the schedule wrote, with what came before it and the board it was taken of."""

    path: Path
    snapshot: Snapshot
    changes: Changes | None  # against the newest snapshot before it; None: the first one
    board: Board
    next_comparison: str  # the board's "most useful next comparison" sentence ("" where none)


class Claim(Protocol):
    def __call__(self, period: str, start: float, every_s: float) -> bool:
        """Whether this server takes the period starting at `start` (seconds since the epoch)."""
        ...


class FileClaim:
    """A period is this process's if it created `.period-<start>.claim` in the folder first."""

    def __init__(self, folder: Path, holder: str) -> None:
        self.folder, self.holder = Path(folder), holder

    def __call__(self, period: str, start: float, every_s: float) -> bool:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.folder / f".period-{period}.claim", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, f"{self.holder}\n".encode())
        finally:
            os.close(fd)
        for old in sorted(self.folder.glob(".period-*.claim"))[:-KEEP_CLAIMS]:  # names sort by time
            old.unlink(missing_ok=True)
        return True


class StoreClaim:
    """A period is this server's if its row in the shared store's lease table is (claim_once)."""

    def __init__(self, store: object, holder: str) -> None:
        self.store, self.holder = store, holder

    def __call__(self, period: str, start: float, every_s: float) -> bool:
        return claim_once(
            self.store,  # type: ignore[arg-type]  # a webui.db.store.Store
            CLAIM_PREFIX + period,
            self.holder,
            start + every_s,
            forget_before=start - KEEP_CLAIMS * every_s,
        )


def period_of(now: float, every_s: float) -> tuple[str, float]:
    """The period `now` falls in: its name (its start as a UTC stamp) and its start."""
    start = math.floor(now / every_s) * every_s
    return dt.datetime.fromtimestamp(start, dt.timezone.utc).strftime(STAMP), start


class SnapshotSchedule:
    """Takes a snapshot of `board()` into `folder` once per period, when `claim` grants it."""

    def __init__(
        self,
        folder: Path,
        every_s: float,
        board: Callable[[], Board | None],
        claim: Claim,
        *,
        after: Sequence[Callable[[Taken], None]] = (),
        clock: Callable[[], float] = time.time,
        poll_s: float = POLL_S,
    ) -> None:
        if every_s <= 0:
            raise ValueError(f"every_s: must be > 0, got {every_s}")
        self.folder, self.every_s, self.board, self.claim = Path(folder), every_s, board, claim
        self.after, self.clock, self.poll_s = list(after), clock, poll_s
        self.done: str | None = None  # the period settled here (taken, or another server's)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="snapshot-schedule", daemon=True)

    def start(self) -> SnapshotSchedule:
        self._thread.start()
        return self

    def close(self, wait_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(wait_s)

    def _run(self) -> None:
        while True:
            try:
                self.turn()
            except (
                OSError,
                StoreError,
            ) as exc:  # the store away before a claim: tried again at the next poll; a full disk after one: that period is missed
                log.warning("the scheduled snapshot failed: %s", exc)
            except Exception:  # a bug: its trace, and the next poll tries again
                log.exception("the scheduled snapshot failed")
            if self._stop.wait(self.poll_s):
                return

    def turn(self) -> Taken | None:
        """One look at the clock: the snapshot taken now, if this server took one."""
        period, start = period_of(self.clock(), self.every_s)
        if period == self.done:
            return None
        board = self.board()
        if board is None:  # the first board is still being built: claim nothing yet
            return None
        if not self.claim(period, start, self.every_s):
            self.done = period
            log.debug("the snapshot of period %s is another server's", period)
            return None
        self.done = period
        taken = self._take(board)
        for hook in self.after:
            try:
                hook(taken)
            except Exception:  # one hook's failure (a webhook, the Hub) leaves the snapshot and the others
                log.exception("after the snapshot %s", taken.path.name)
        return taken

    def _take(self, board: Board) -> Taken:
        before_path = latest_snapshot(self.folder)
        before = None
        if before_path is not None:
            try:
                before = load_snapshot(before_path)
            except SnapshotError as exc:  # a bad file is no reason to stop taking snapshots
                log.warning("the previous snapshot is not compared: %s", exc)
        now = dt.datetime.fromtimestamp(self.clock(), dt.timezone.utc)
        snapshot = build_snapshot(board, created=now, code_version=code_version(), index_state=board.index_state)
        path = write_snapshot(snapshot, self.folder)
        log.info("took the scheduled snapshot %s (%d battles counted)", path, snapshot.battles)
        found = changes(before, snapshot) if before is not None else None
        return Taken(path, snapshot, found, board, next_comparison(board.rated.table))

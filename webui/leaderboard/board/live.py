"""The live board: the board of one log folder, rebuilt off the request path as votes arrive.

A background thread owns the work: it brings the vote index up to date with the logs (after a
`nudge` from the recorder, or every `poll_s` for logs copied in or written by another server),
loads only the rows added since its last build (all of them only when indexed rows changed: a
recheck of the identity words, a file rewritten, a rebuild), and builds the board. Readers
(`latest`) get the last finished board at once, never waiting for a build; while the first one is
being built they get None. A failed build is logged and kept as `error`; the previous board stays.
A damaged SQLite index (overwritten, truncated) is set aside and built again from the logs
(`rebuilding`), the previous board shown meanwhile. A shared database that cannot be reached
(`away`) is logged once when it goes and once when it is back, not at every poll; the previous
board stays on show, the votes keep going to the logs, and the first turn after it returns catches
the index up with them.
After a rebuild the thread rests as long as the build took (up to MAX_REST_S), so a stream of
votes costs the server at most about half a core however large the board.

When the rows only grew, the new votes are added to the running aggregates of the last full build
(webui.leaderboard.board.tally: raw ratings, intervals, Elo, counts and drops exact, style control
within a small, tested tolerance, at a cost that does not grow with the log) and that board is
published at once. A full build follows, after that publication, once `full_every_votes` votes or
`full_every_s` seconds have been added that way, and whenever the tally cannot add a vote (an older
vote, a new model, a style fit moved too far) or indexed rows changed: it brings the parts a tally
keeps from the last full build (the voter check, history, categories, speeds) up to date.

With a `shared` board (servers sharing a PostgreSQL store: webui.leaderboard.board.lease), each turn
first asks for the builder's lease. The builder works as above (renewing the lease during a full
build) and writes each board it publishes into the store; the others only catch the index up with
their own logs and publish the stored board when a newer one is there. A server that loses the lease forgets its own builds, so that it
starts from a full build if it is elected again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

import pandas as pd

from webui.db.store import StoreError
from webui.leaderboard.board.build import Board, BoardOptions, board_from_rows
from webui.leaderboard.board.lease import LeaseLost, Published, SharedBoard
from webui.leaderboard.board.tally import Tally
from webui.leaderboard.votes.index import VoteIndex
from webui.leaderboard.votes.reading import append_rows

log = logging.getLogger(__name__)

POLL_S = 2.0  # how often logs are looked at without a nudge (copied-in files, other writers)
REST_PER_BUILD = 1.0  # seconds of rest after a rebuild, per second it took
MAX_REST_S = 3.0
FULL_EVERY_VOTES = 2000  # votes added to the tally before a full build brings everything up to date
FULL_EVERY_S = 120.0  # or seconds since the last full build, whichever comes first


class LiveBoard:
    """Keeps `latest()` current for one vote index and one set of board options."""

    def __init__(
        self,
        index: VoteIndex,
        options: BoardOptions,
        *,
        poll_s: float = POLL_S,
        build: Callable[[pd.DataFrame, BoardOptions, int], Board] = board_from_rows,
        full_every_votes: int = FULL_EVERY_VOTES,
        full_every_s: float = FULL_EVERY_S,
        shared: SharedBoard | None = None,
    ) -> None:
        """`full_every_votes` 0: every change is a full build (no tally). `shared`: build only
        while holding its lease, else show the board stored there (several servers)."""
        self.shared = shared
        self.index = index
        self.options = options
        self.poll_s = poll_s
        self.full_every_votes, self.full_every_s = full_every_votes, full_every_s
        self._tally: Tally | None = None
        self._full_at = 0.0  # time.monotonic() of the last full build
        self.error: str | None = None
        self.rebuilding = False  # the index was damaged, set aside, and is being built again from the logs
        self.away: str | None = None  # why the shared database cannot be reached, while it cannot
        self._build = build
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._done = threading.Condition()
        self._requested = self._completed = 0
        self._published: Published | None = None
        self._rows: pd.DataFrame | None = None
        self._state = (-1, 0)  # (index generation, last row id) of `_rows`
        self._built: tuple[int, int, int] | None = None  # and the skipped lines, of the published board
        self._building = False
        self._thread = threading.Thread(target=self._run, name="live-board", daemon=True)

    def start(self) -> LiveBoard:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(30)
        if self.shared is not None:
            try:
                self.shared.release()  # the next server takes over at its next poll, not after the lease
            except StoreError as exc:
                log.warning("the board's lease was not released: %s", exc)
            self.shared.close()
        self.index.close()

    def nudge(self) -> None:
        """Something was written to the logs: look now rather than at the next poll."""
        with self._done:
            self._requested += 1
        self._wake.set()

    def latest(self) -> Published | None:
        return self._published

    def sync(self, timeout: float = 60.0) -> Published | None:
        """Nudge and wait until the logs as they are now are in `latest()` (tests, the CLI)."""
        self.nudge()
        with self._done:
            wanted = self._requested
            self._done.wait_for(lambda: self._completed >= wanted or not self._thread.is_alive(), timeout)
        return self._published

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll_s)
            self._wake.clear()
            with self._done:
                wanted = self._requested
            built_s = 0.0
            try:
                built_s = self._turn()
                self._back()
                self.error, self.rebuilding = None, False
            except StoreError as exc:  # the database is away: every poll fails alike until it returns
                self._gone(exc)
            except Exception as exc:  # keep serving the last board; say why
                if self._set_aside(exc):
                    self._wake.set()  # the new index is filled from the logs at once, not at the next poll
                    continue
                log.exception("the leaderboard could not be rebuilt")
                self.error = f"{type(exc).__name__}: {exc}"
            with self._done:
                self._completed = max(self._completed, wanted)
                self._done.notify_all()
            # Rest as long as the build took (at most MAX_REST_S): under a stream of votes the board
            # takes at most half a core, and a vote still shows within two builds and a rest.
            self._stop.wait(min(built_s * REST_PER_BUILD, MAX_REST_S))

    def _gone(self, exc: StoreError) -> None:
        if self.away is None:
            log.warning(
                "the leaderboard's database cannot be reached (%s): the last board stays on show, votes "
                "are still written to the logs and reach the board once it is back (tried every %g s)",
                exc,
                self.poll_s,
            )
        self.away = str(exc)

    def _back(self) -> None:
        if self.away is not None:
            log.warning("the leaderboard's database is back: the board catches up with the logs")
            self.away = None

    def _set_aside(self, exc: Exception) -> bool:
        """A damaged index file (VoteIndex.set_aside, which logs it): a new index in its place,
        built from the logs from the next turn on, the last board shown meanwhile. Not again before
        a turn went through: a new file damaged at once is no stale file (a failing disk)."""
        try:
            if self.rebuilding or self.index.set_aside(exc) is None:
                return False
        except Exception:  # (the new file cannot be made either): the caller logs `exc` as a failed build
            log.exception("the damaged vote index could not be replaced")
            return False
        self.rebuilding = True
        self._forget()
        return True

    def is_builder(self) -> bool:
        """Whether this server builds the board (always, without a shared board)."""
        return self.shared is None or self._building

    def _turn(self) -> float:
        """One turn of the thread: build (`_step`), or, when another server builds, catch the
        index up with this server's logs and take the stored board if it is newer."""
        if self.shared is None:
            return self._step()
        self._building = self.shared.hold()
        if self._building:
            try:
                return self._step()
            except LeaseLost as exc:
                log.info("%s; reading the board from the store", exc)
                self._building = False
        self._forget()
        self.index.catch_up(self.options.model_names, self.options.extra_identity_words)
        newer = self.shared.read(self._published.version if self._published else None)
        if newer is not None:
            self._published = newer
        return 0.0

    def _forget(self) -> None:
        """Drop what only a builder keeps, so that a server elected again starts from a full build."""
        self._tally, self._built, self._rows, self._state = None, None, None, (-1, 0)

    def _step(self) -> float:
        """Catch up; add the new votes to the tally or rebuild, if anything changed; how long that
        took (0: nothing to do)."""
        started = time.perf_counter()
        self.index.catch_up(self.options.model_names, self.options.extra_identity_words)
        state, skipped = self.index.state(), self.index.skipped_lines()
        if self._published is not None and (*state, skipped) == self._built:
            if not (self._tally is not None and self._tally.added and self._due()):
                return 0.0
        elif self._tally is not None and self._built is not None and state[0] == self._built[0]:
            board = self._tally.add(self.index.rows(after_id=self._built[1]))
            if board is not None:
                board.skipped_lines = skipped
                took = self._publish(board, state, skipped, started, self._tally.votes_read)
                if not self._due():
                    return took
                started = time.perf_counter()
        with self.shared.renewing() if self.shared is not None else contextlib.nullcontext():
            rows = self._load(state)
            board = self._build(rows, self.options, skipped)
        self._tally = Tally.of(board) if self.full_every_votes > 0 else None
        self._full_at = time.monotonic()
        return self._publish(board, state, skipped, started, len(rows))

    def _due(self) -> bool:
        """Whether the tally has carried the last full build far enough to build in full again."""
        assert self._tally is not None
        return self._tally.added >= self.full_every_votes or time.monotonic() - self._full_at >= self.full_every_s

    def _publish(self, board: Board, state: tuple[int, int], skipped: int, started: float, votes: int) -> float:
        self._built = (*state, skipped)
        version = self._published.version + 1 if self._published else 1
        published = Published(board, version, time.time(), time.perf_counter() - started, votes)
        if self.shared is not None:
            published = self.shared.publish(published)  # LeaseLost: another server builds now
        self._published = published
        return published.build_s

    def _load(self, state: tuple[int, int]) -> pd.DataFrame:
        """All rows when indexed rows changed since the last load, else the last rows and the new."""
        generation, _ = state
        if self._rows is None or generation != self._state[0]:
            rows = self.index.rows()
        else:
            new = self.index.rows(after_id=self._state[1])
            rows = append_rows(self._rows, new)
        self._rows, self._state = rows, (generation, int(rows["id"].max()) if len(rows) else 0)
        return rows

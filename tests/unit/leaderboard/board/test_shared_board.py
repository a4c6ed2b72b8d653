"""The builder's lease and the stored board (webui.leaderboard.board.lease), on an SQLite store and an
injected clock: one builder at a time, a silent builder taken over after the lease, a closing one
at once, a stale builder writes nothing, a long build keeps its lease, readers load each board
once and its battle rows once per full build."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from tests.records import simulated_rows
from webui.db.schema import migrate
from webui.db.store import StoreError, open_store
from webui.leaderboard.board.build import Board, BoardOptions, board_from_rows
from webui.leaderboard.board.lease import Lease, LeaseLost, Published, SharedBoard, next_lease
from webui.leaderboard.board.live import LiveBoard
from webui.leaderboard.board.tally import Tally
from webui.leaderboard.simulate import simulate
from webui.leaderboard.votes.index import VoteIndex
from webui.leaderboard.votes.reading import LOADED_COLUMNS

LEASE_S = 30.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def servers(tmp_path: Path, clock: Clock):
    path = tmp_path / "shared.sqlite3"
    setup = open_store(path)
    with setup.transaction():
        migrate(setup)
    setup.close()
    made = [SharedBoard(open_store(path), name, lease_s=LEASE_S, clock=clock) for name in ("web1", "web2")]
    yield made
    for server in made:
        server.close()


def published(version: int = 1) -> Published:
    board = board_from_rows(pd.DataFrame(columns=list(LOADED_COLUMNS)), BoardOptions(rounds=0))
    return Published(board, version, built_at=123.0, build_s=0.5, votes=7)


def test_the_rule():
    assert next_lease(None, "me", 10.0, 5.0) == Lease("me", 15.0)
    assert next_lease(Lease("other", 10.5), "me", 10.0, 5.0) is None
    assert next_lease(Lease("other", 10.0), "me", 10.0, 5.0) == Lease("me", 15.0)  # expired at that instant
    assert next_lease(Lease("me", 11.0), "me", 10.0, 5.0) == Lease("me", 15.0)  # renewed


def test_one_builder_until_it_falls_silent(servers: list[SharedBoard], clock: Clock):
    web1, web2 = servers
    assert web1.hold() and not web2.hold()
    clock.now += LEASE_S - 1
    assert not web2.hold()
    assert web1.hold()  # renewed: another lease from now
    clock.now += LEASE_S - 1
    assert not web2.hold() and web1.holds()
    clock.now += 1  # web1 said nothing for a whole lease
    assert web2.hold() and not web1.hold() and not web1.holds()


def test_a_closing_builder_hands_over_at_once(servers: list[SharedBoard]):
    web1, web2 = servers
    assert web1.hold() and not web2.hold()
    web1.release()
    assert web2.hold()
    web1.release()  # not its lease any more: nothing happens
    assert web2.holds()


def test_readers_get_the_builders_board_once(servers: list[SharedBoard]):
    web1, web2 = servers
    assert web2.read(None) is None  # nothing stored yet
    web1.hold()
    stored = web1.publish(published(version=41))
    assert stored.version == 1 and stored.built_by == "web1"  # numbered by the store, not the builder
    seen = web2.read(None)
    assert seen is not None
    assert (seen.version, seen.built_at, seen.build_s, seen.votes, seen.built_by) == (1, 123.0, 0.5, 7, "web1")
    pd.testing.assert_frame_equal(seen.board.table, stored.board.table)
    assert web2.read(seen.version) is None  # the same board is not loaded again
    assert web1.publish(published()).version == 2
    newer = web2.read(seen.version)
    assert newer is not None and newer.version == 2


def test_a_builder_whose_lease_passed_on_writes_nothing(servers: list[SharedBoard], clock: Clock):
    web1, web2 = servers
    web1.hold()
    web1.publish(published())
    clock.now += LEASE_S  # a long build: web2 takes over meanwhile
    assert web2.hold()
    with pytest.raises(LeaseLost):
        web1.publish(published())
    stored = web2.read(None)
    assert stored is not None and stored.version == 1


def test_a_board_of_another_version_is_refused(servers: list[SharedBoard]):
    web1, web2 = servers
    web1.hold()
    web1.code = "0.0.1-older"
    web1.publish(published())
    with pytest.raises(StoreError, match=r"built by arena 0\.0\.1-older"):
        web2.read(None)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return simulated_rows(tmp_path_factory.mktemp("simulated"), 400, days=1)


def writes_to(server: SharedBoard, table: str) -> list[int]:
    """The ids of `table`'s rows as stored (the rows' id grows by one per write of the rows)."""
    column = "rows_id" if table == "board_rows" else "version"
    return [int(v) for (v,) in server.store.execute(f"SELECT {column} FROM {table}").fetchall()]


def test_the_rows_are_written_and_read_once_per_full_build(servers: list[SharedBoard], simulated: pd.DataFrame):
    web1, web2 = servers
    web1.hold()
    options = BoardOptions(rounds=5, history_points=0, style=False)  # a small board: a tally with style may decline
    full = board_from_rows(simulated.iloc[:300], options)
    tally = Tally.of(full)
    web1.publish(Published(full, 1, 1.0, 0.1, 300))
    first = web2.read(None)
    assert first is not None and len(first.board.battles) == 300
    for end in (320, 340):  # the tally's boards: new tables, the full build's rows
        added = tally.add(simulated.iloc[end - 20 : end])
        assert added is not None
        web1.publish(Published(added, 1, 2.0, 0.1, end))
        seen = web2.read(first.version)
        assert seen is not None and len(seen.board.recent) == end - 300
        assert seen.board.battles is first.board.battles  # not loaded again
        pd.testing.assert_frame_equal(seen.board.table, added.table)
    assert writes_to(web1, "board_rows") == [1] and writes_to(web1, "boards") == [3]
    rebuilt = board_from_rows(simulated.iloc[:340], options)
    web1.publish(Published(rebuilt, 1, 3.0, 0.2, 340))
    newest = web2.read(3)
    assert writes_to(web1, "board_rows") == [2] and newest is not None and len(newest.board.battles) == 340


def test_a_builder_back_after_another_writes_its_rows_again(
    servers: list[SharedBoard], simulated: pd.DataFrame, clock: Clock
):
    web1, web2 = servers
    options = BoardOptions(rounds=5, history_points=0, style=False)  # a small board: a tally with style may decline
    ours = board_from_rows(simulated.iloc[:300], options)
    web1.hold()
    web1.publish(Published(ours, 1, 1.0, 0.1, 300))
    clock.now += LEASE_S
    web2.hold()
    web2.publish(Published(board_from_rows(simulated.iloc[:100], options), 1, 2.0, 0.1, 100))
    clock.now += LEASE_S
    web1.hold()
    added = Tally.of(ours).add(simulated.iloc[300:310])
    assert added is not None
    web1.publish(Published(added, 1, 3.0, 0.1, 310))  # its rows are no longer the stored ones
    stored = web2.read(None)
    assert stored is not None and len(stored.board.battles) == 300 and len(stored.board.recent) == 10
    assert writes_to(web1, "board_rows") == [3]


def test_a_long_build_keeps_the_lease(servers: list[SharedBoard], clock: Clock):
    web1, web2 = servers
    assert web1.hold()

    def renewed_after(now: float) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            lease = web2._lease()
            if lease is not None and lease.expires > now + LEASE_S - 1:
                return True
            time.sleep(0.01)
        return False

    with web1.renewing(every_s=0.02):
        for _ in range(3):  # three times most of a lease: without renewals web2 would take it
            clock.now += LEASE_S - 1
            assert renewed_after(clock.now), "the lease was not renewed during the build"
            assert not web2.hold()
    clock.now += LEASE_S  # the build is over: no more renewals
    assert web2.hold()


def test_a_live_board_whose_build_outlasts_the_lease_still_publishes(tmp_path: Path):
    """The live board renews the lease during a full build: a build three leases long still
    publishes (without the renewal the lease expires mid-build and the board is refused)."""
    logs = tmp_path / "logs"
    simulate(logs, 60, days=1)
    path = tmp_path / "index.sqlite3"
    index = VoteIndex(logs, path)
    shared = SharedBoard(open_store(path), "web1", lease_s=1.5)

    def slow_build(rows: pd.DataFrame, options: BoardOptions, skipped: int) -> Board:
        time.sleep(4.5)  # a build of a very large board
        return board_from_rows(rows, options, skipped)

    live = LiveBoard(index, BoardOptions(rounds=5, style=False, history_points=0), build=slow_build, shared=shared)
    live.start()
    try:
        published = live.sync(timeout=60)
        assert published is not None and published.built_by == "web1", live.error
    finally:
        live.close()

"""The builder's lease and the stored board (webui.leaderboard.shared), on an SQLite store and an
injected clock: one builder at a time, a silent builder taken over after the lease, a closing one
at once, a stale builder writes nothing, readers load each board once."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from webui.leaderboard.board import BoardOptions, board_from_rows
from webui.leaderboard.index import LOADED_COLUMNS
from webui.leaderboard.schema import migrate
from webui.leaderboard.shared import Lease, LeaseLost, Published, SharedBoard, next_lease
from webui.leaderboard.store import StoreError, open_store

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

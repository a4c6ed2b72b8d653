"""Scheduled snapshots with servers sharing a real PostgreSQL store (tests/postgres.py), each with
its own log folder: the store's lease table gives each period to one server, so every period
has one snapshot across all the folders, and a restart within the period takes none again."""

from __future__ import annotations

from pathlib import Path

from tests.postgres import PostgresServer, postgres_server  # noqa: F401  (the fixture)
from tests.unit.test_snapshot_schedule import DAY, Clock, _race, arena, snapshots_in  # noqa: F401  (a fixture)
from webui.db.schema import migrate
from webui.db.store import open_store
from webui.server.schedule import SnapshotSchedule, StoreClaim


def test_servers_on_one_postgres_store_take_each_period_once(
    tmp_path: Path,
    arena,  # noqa: F811
    postgres_server: PostgresServer,  # noqa: F811
):
    _, view = arena
    board = view.board()[0]
    database = postgres_server.new_database()
    stores = [open_store(database) for _ in range(3)]
    with stores[0].transaction():
        migrate(stores[0])
    clock = Clock()
    folders = [tmp_path / f"web{n}" / "snapshots" for n in range(3)]
    schedules = [
        SnapshotSchedule(folder, DAY, lambda: board, StoreClaim(store, f"web{n}"), clock=clock)
        for n, (folder, store) in enumerate(zip(folders, stores, strict=True))
    ]
    try:
        taken = _race(schedules, clock, periods=3)
        assert len(taken) == 3 and sum(len(snapshots_in(f)) for f in folders) == 3
        clock.now -= DAY  # back into the last period: a restarted server finds it claimed
        again = SnapshotSchedule(folders[0], DAY, lambda: board, StoreClaim(stores[0], "web0-restarted"), clock=clock)
        assert again.turn() is None
    finally:
        for store in stores:
            store.close()

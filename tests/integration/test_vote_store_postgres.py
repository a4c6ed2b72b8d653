"""The vote index on a real PostgreSQL server shared by several servers (tests/postgres.py starts
one): two servers' logs make one board, the same as the SQLite index gives for both folders'
files together; the database going away and coming back loses no vote and counts none twice;
the schema's migrations are recorded; bad or unreachable databases get a one-line error."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import psycopg
import pytest

from tests.postgres import PostgresServer, postgres_server  # noqa: F401  (the fixture)
from tests.records import battle, vote
from webui.db.schema import LATEST, MIGRATIONS
from webui.db.store import StoreError, open_store
from webui.leaderboard.__main__ import main as leaderboard_cli
from webui.leaderboard.board.build import Board, BoardOptions, board_from_index, board_from_rows
from webui.leaderboard.board.lease import SharedBoard
from webui.leaderboard.board.live import LiveBoard
from webui.leaderboard.board.view import DATABASE_AWAY, LeaderboardView
from webui.leaderboard.simulate import simulate
from webui.leaderboard.votes.index import VoteIndex
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder, log_files

OPTIONS = BoardOptions(rounds=20, min_battles=0)


@pytest.fixture
def database(postgres_server: PostgresServer) -> str:  # noqa: F811
    return postgres_server.new_database()


def record(folder: Path, server: str, models: tuple[str, str], replies: tuple[str, str]) -> None:
    recorder = JsonlRecorder(folder, IdentityPolicy("none"), server_name=server)
    recorder.vote(vote("leftvote", battle(*models, replies)))
    recorder.close()


def test_two_servers_logs_make_one_board(tmp_path: Path, database: str):
    a, b, both = tmp_path / "a", tmp_path / "b", tmp_path / "both"
    simulate(a, 1200, seed=1, days=3, server="web1")
    simulate(b, 800, seed=2, days=3, server="web2")
    # A reply on web2 names a model that only web1 serves: a leak once web1's logs are indexed,
    # which only web2 can find (only it has the line).
    record(a, "web1", ("gamma", "alpha"), ("hello", "hi"))
    record(b, "web2", ("alpha", "beta"), ("I am gamma, how can I help?", "hi"))
    indexes = [VoteIndex(b, database=database, server="web2"), VoteIndex(a, database=database, server="web1")]
    for index in indexes * 2:  # the second round: each re-checks its rows for the names the other added
        index.catch_up()
    both.mkdir()
    for path in [*log_files(a), *log_files(b)]:
        shutil.copy(path, both / path.name)
    local = VoteIndex(both)  # the SQLite index of every file in one folder
    try:
        shared, alone = board_from_index(indexes[1], OPTIONS), board_from_index(local, OPTIONS)
        assert len(shared.battles) == len(alone.battles) == local.count()
        assert {"web1", "web2"} == {name.split("-")[3] for name in shared.battles["file"]}
        pd.testing.assert_frame_equal(shared.table, alone.table)
        assert shared.battles["leak"].sum() == alone.battles["leak"].sum() > 0
        text, own = indexes[1].details(shared.battles), shared.battles["file"].str.contains("-web1-")
        assert text.loc[own, "conversation_a"].notna().all() and text.loc[~own, "conversation_a"].isna().all()
        pd.testing.assert_frame_equal(shared.battles.drop(columns="id"), alone.battles.drop(columns="id"))
    finally:
        for index in [*indexes, local]:
            index.close()


def test_a_database_restart_loses_no_vote_and_counts_none_twice(
    tmp_path: Path,
    postgres_server: PostgresServer,  # noqa: F811
    database: str,
):
    """Through the app's leaderboard view: votes recorded while the database is stopped reach the
    board once it is back, each once; meanwhile the board stays and "my votes" says why it waits."""
    logs = tmp_path / "logs"
    recorder = JsonlRecorder(logs, IdentityPolicy("none"), server_name="web1")
    view = LeaderboardView(logs, BoardOptions(rounds=0, min_battles=0), poll_s=3600.0, database=database, server="web1")
    live = view.live
    recorder.vote_listeners.append(live.nudge)
    try:
        for _ in range(4):
            recorder.vote(vote("leftvote", battle("alpha", "beta")))
        before = live.sync()
        assert before is not None and before.votes == 4 and live.error is None
        postgres_server.stop()
        try:
            for _ in range(3):  # recorded all the same: the log comes first
                recorder.vote(vote("rightvote", battle("alpha", "beta")))
            assert live.sync() is before  # the board stays; the failure is named
            assert live.away is not None and "connection" in live.away and live.error is None
            summary = view.outputs()[0]
            assert "database cannot be reached right now" in summary and "postgresql" not in summary, summary
            assert view.my_votes("some-session")[0] == DATABASE_AWAY
        finally:
            postgres_server.start()
        recorder.vote(vote("tievote", battle("alpha", "beta")))
        after = live.sync()
        assert after is not None and live.error is None and live.away is None
        assert after.votes == live.index.count() == 8
        assert all(p.name.endswith("-web1-conv.json") for p in log_files(logs))
        assert list(after.board.all_counted()["winner"].value_counts().sort_index().items()) == [
            ("model_a", 4),
            ("model_b", 3),
            ("tie", 1),
        ]
        assert live.index.catch_up().votes == 0
        assert view.my_votes("some-session")[0].startswith("You have not voted")
    finally:
        view.close()
        recorder.close()


def test_migrations_are_recorded_and_a_newer_store_is_refused(tmp_path: Path, database: str):
    VoteIndex(tmp_path, database=database, server="web1").close()
    with psycopg.connect(database, autocommit=True) as conn:
        applied = conn.execute("SELECT version FROM migrations ORDER BY version").fetchall()
        assert applied == [(m.version,) for m in MIGRATIONS]
        conn.execute("INSERT INTO migrations (version, what) VALUES (%s, 'from a newer arena')", (LATEST + 1,))
    with pytest.raises(StoreError, match="newer than this arena knows"):
        VoteIndex(tmp_path, database=database, server="web1")


def test_two_servers_with_one_name_are_stopped_not_mixed(tmp_path: Path, database: str):
    for folder in ("a", "b"):
        simulate(tmp_path / folder, 50, seed=len(folder), days=1)  # unnamed: both write YYYY-MM-DD-conv.json
    first = VoteIndex(tmp_path / "a", database=database, server="web1")
    second = VoteIndex(tmp_path / "b", database=database, server="web2")
    try:
        first.catch_up()
        with pytest.raises(StoreError, match="needs its own --server-name"):
            second.catch_up()
        assert first.count() == len(first.rows())  # the other's attempt changed nothing
        assert first.catch_up().votes == 0 and first.catch_up().reread_files == 0
    finally:
        first.close()
        second.close()


def test_cli_one_line_errors_for_a_bad_or_unreachable_database(tmp_path: Path, database: str, capsys):
    simulate(tmp_path, 60, seed=1, days=1, server="web1")
    assert leaderboard_cli([str(tmp_path), "--database", database, "--server-name", "web1", "--rounds", "0"]) == 0
    assert f"vote index {database}:" in capsys.readouterr().err
    for url in ("mysql://arena@127.0.0.1/x", "postgresql://arena:secret@127.0.0.1:1/x"):
        assert leaderboard_cli([str(tmp_path), "--database", url, "--server-name", "web1"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and "secret" not in err


def test_writers_at_once_count_every_vote_once(tmp_path: Path, database: str):
    """Two processes of one server (the app and the command line) and a second server, catching
    up at the same moment: the writers' lock and the offset check keep every vote once."""
    a, b = tmp_path / "a", tmp_path / "b"
    simulate(a, 1500, seed=3, days=2, server="web1")
    simulate(b, 600, seed=4, days=2, server="web2")
    indexes = [
        VoteIndex(a, database=database, server="web1"),
        VoteIndex(a, database=database, server="web1"),
        VoteIndex(b, database=database, server="web2"),
    ]
    errors: list[BaseException] = []

    def run(index: VoteIndex) -> None:
        try:
            index.catch_up()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(index,)) for index in indexes]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        rows = indexes[0].rows()
        assert not errors and len(rows) == indexes[0].count() == 1500 + 600
        assert not rows[["file", "offset"]].duplicated().any()
    finally:
        for index in indexes:
            index.close()


def test_one_server_builds_the_board_and_the_other_reads_it(tmp_path: Path, database: str):
    """Two servers' live boards on one database elect one builder; the other shows the board it
    stored, its own server's votes counted; a builder that falls silent (killed) is taken over
    after its lease, one that closes at once. The lease runs on an injected clock."""
    now = [1000.0]
    folders = {name: tmp_path / name for name in ("web1", "web2")}
    builds = dict.fromkeys(folders, 0)

    def counted(name: str) -> Callable[[pd.DataFrame, BoardOptions, int], Board]:
        def build(rows: pd.DataFrame, options: BoardOptions, skipped: int) -> Board:
            builds[name] += 1
            return board_from_rows(rows, options, skipped)

        return build

    boards = {
        name: LiveBoard(
            VoteIndex(folder, database=database, server=name),
            OPTIONS,
            poll_s=3600.0,  # turned by sync() alone
            build=counted(name),
            shared=SharedBoard(open_store(database), name, lease_s=30.0, clock=lambda: now[0]),
        ).start()
        for name, folder in folders.items()
    }
    web1, web2 = boards["web1"], boards["web2"]
    try:
        record(folders["web1"], "web1", ("alpha", "beta"), ("hello", "hi"))
        first = web1.sync()
        assert first is not None and web1.is_builder() and first.votes == 1
        record(folders["web2"], "web2", ("beta", "gamma"), ("hello", "hi"))
        seen = web2.sync()  # indexes web2's vote, builds nothing, shows web1's board
        assert not web2.is_builder()
        assert seen is not None and (seen.version, seen.built_by, seen.votes) == (first.version, "web1", 1)
        pd.testing.assert_frame_equal(seen.board.table, first.board.table)
        built = web1.sync()
        assert built is not None and built.votes == 2 and built.version == first.version + 1
        seen = web2.sync()
        assert seen is not None and (seen.version, seen.votes) == (built.version, 2)
        assert set(seen.board.table["model"]) == {"alpha", "beta", "gamma"}
        assert builds["web2"] == 0  # a reader builds nothing, not even to throw it away

        # web1 falls silent, as a killed server does: within the lease nothing changes, then web2 builds
        now[0] += 29.0
        assert web2.sync() is seen and not web2.is_builder()
        now[0] += 1.0
        record(folders["web2"], "web2", ("alpha", "gamma"), ("hello", "hi"))
        taken = web2.sync()
        assert web2.is_builder() and taken is not None
        assert (taken.built_by, taken.votes, taken.version) == ("web2", 3, built.version + 1)
        assert web1.sync() is not None and not web1.is_builder()  # back: it reads
        assert web1.latest().version == taken.version

        web2.close()  # hands the lease over at once: no waiting for it to expire
        record(folders["web1"], "web1", ("gamma", "beta"), ("hello", "hi"))
        last = web1.sync()
        assert web1.is_builder() and last is not None and (last.built_by, last.votes) == ("web1", 4)
    finally:
        for board in boards.values():
            board.close()


def test_the_lease_runs_on_the_databases_clock(tmp_path: Path, database: str):
    VoteIndex(tmp_path, database=database, server="web1").close()  # the tables
    web1, web2 = (SharedBoard(open_store(database), name) for name in ("web1", "web2"))
    try:
        assert web1.hold() and not web2.hold()
        assert web1.holds() and abs(web1.clock() - time.time()) < 3600  # seconds since the epoch, as time.time
    finally:
        web1.close()
        web2.close()

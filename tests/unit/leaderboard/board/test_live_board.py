"""The live board (webui.leaderboard.board.live): readers never wait for a build, a vote reaches the
board through the recorder's nudge, a failed build keeps the last board, and loading only the new
rows gives the same board as loading them all."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.records import battle, vote
from webui.leaderboard.board.build import Board, BoardOptions, board_from_index, board_from_rows
from webui.leaderboard.board.live import LiveBoard
from webui.leaderboard.votes.index import VoteIndex
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder

OPTIONS = BoardOptions(rounds=0, min_battles=0)
NO_POLL = 3600.0  # only nudges wake the builder


@pytest.fixture
def recorder(tmp_path: Path) -> JsonlRecorder:
    rec = JsonlRecorder(tmp_path / "logs", IdentityPolicy("none"))
    for i in range(6):
        rec.vote(vote("leftvote" if i % 2 else "rightvote", battle("alpha", "beta")))
    return rec


def wait_for(check, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def test_readers_get_the_last_board_while_a_build_runs(recorder: JsonlRecorder):
    gate, building = threading.Event(), threading.Event()
    gate.set()

    def slow_build(rows: pd.DataFrame, options: BoardOptions, skipped: int) -> Board:
        building.set()
        assert gate.wait(60)
        return board_from_rows(rows, options, skipped)

    live = LiveBoard(VoteIndex(recorder.log_dir), OPTIONS, poll_s=NO_POLL, build=slow_build, full_every_votes=0).start()
    first = live.sync()
    assert first is not None and first.version == 1 and first.votes == 6
    gate.clear()
    building.clear()
    recorder.vote(vote("leftvote", battle("alpha", "beta")))
    live.nudge()
    assert building.wait(30)  # a build is under way, held at the gate
    assert live.latest() is first  # readers are answered at once, with the last board
    gate.set()
    assert wait_for(lambda: live.latest() is not first)
    assert live.latest().version == 2 and len(live.latest().board.battles) == 7
    live.close()


def test_a_recorded_vote_nudges_the_board(recorder: JsonlRecorder):
    live = LiveBoard(VoteIndex(recorder.log_dir), OPTIONS, poll_s=NO_POLL).start()
    assert live.sync().votes == 6
    recorder.vote_listeners.append(live.nudge)
    recorder.vote(vote("tievote", battle("alpha", "beta")))
    assert wait_for(lambda: live.latest().votes == 7)  # no poll: only the recorder's nudge woke it
    live.close()


def test_without_nudges_the_poll_finds_copied_in_logs(recorder: JsonlRecorder, tmp_path: Path):
    live = LiveBoard(VoteIndex(recorder.log_dir), OPTIONS, poll_s=0.2).start()
    assert wait_for(lambda: live.latest() is not None and live.latest().votes == 6)
    other = JsonlRecorder(tmp_path / "elsewhere", IdentityPolicy("none"), clock=lambda: 1_767_225_600.0)
    other.vote(vote("leftvote", battle("alpha", "beta")))
    for path in (tmp_path / "elsewhere").iterdir():
        (recorder.log_dir / path.name).write_bytes(path.read_bytes())
    assert wait_for(lambda: live.latest().votes == 7)
    live.close()


def test_a_failed_build_keeps_the_last_board_and_says_why(recorder: JsonlRecorder):
    fail = threading.Event()

    def flaky(rows: pd.DataFrame, options: BoardOptions, skipped: int) -> Board:
        if fail.is_set():
            raise MemoryError("out of memory")
        return board_from_rows(rows, options, skipped)

    live = LiveBoard(VoteIndex(recorder.log_dir), OPTIONS, poll_s=NO_POLL, build=flaky, full_every_votes=0).start()
    first = live.sync()
    fail.set()
    recorder.vote(vote("leftvote", battle("alpha", "beta")))
    assert live.sync() is first and "out of memory" in (live.error or "")
    fail.clear()
    live.sync()
    assert live.latest().votes == 7 and live.error is None
    live.close()


def test_loading_only_new_rows_builds_the_board_loading_all_would(recorder: JsonlRecorder):
    live = LiveBoard(VoteIndex(recorder.log_dir), OPTIONS, poll_s=NO_POLL).start()
    live.sync()
    late = JsonlRecorder(recorder.log_dir, IdentityPolicy("none"), clock=lambda: 1_000_000_000.0)
    for _ in range(3):  # older than everything so far: the new rows go before the old ones
        recorder.vote(vote("rightvote", battle("beta", "gamma")))
        late.vote(vote("leftvote", battle("gamma", "alpha")))
        live.sync()
    index = VoteIndex(recorder.log_dir)
    full = board_from_index(index, OPTIONS, catch_up=False)
    ours = live.latest().board
    pd.testing.assert_frame_equal(ours.battles.reset_index(drop=True), full.battles.reset_index(drop=True))
    pd.testing.assert_frame_equal(ours.table, full.table)
    live.close()


def test_an_index_that_cannot_be_kept_beside_the_logs_goes_elsewhere(recorder: JsonlRecorder, tmp_path: Path):
    from webui.leaderboard.board.view import open_index

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the index's folder would be")
    index = open_index(recorder.log_dir, blocked / "index.sqlite3")
    assert index.path.parent != blocked and index.catch_up().votes == 6

"""Faults the vote index must survive (issue 37): a log line nested too deep to read, a corrupt
index file under a running app, a worker process that dies. Each with the real index (SQLite
files in a temporary folder), the real command line and the live board."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.records import battle, vote
from webui.leaderboard.__main__ import main
from webui.leaderboard.board.build import BoardOptions
from webui.leaderboard.board.live import LiveBoard
from webui.leaderboard.votes import ingest
from webui.leaderboard.votes.index import VoteIndex
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder

OPTIONS = BoardOptions(rounds=0, min_battles=0)
NO_POLL = 3600.0  # only nudges wake the live board's builder
SKIPPED_ONE = "(1 log lines were torn or unreadable and were skipped)"


@pytest.fixture(params=["compiled", "python"])
def compiled(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The compiled vote row and name scan (webui/leaderboard/votes/_rows.c), then the Python path."""
    if request.param == "python":
        monkeypatch.setattr(ingest, "_compiled_vote_values", None)
        monkeypatch.setattr(ingest, "_compiled_model_names_in", None)
    elif ingest._compiled_vote_values is None:
        pytest.skip("the C modules are not built here (setup.py build_ext --inplace)")
    return request.param


@pytest.fixture
def recorder(tmp_path: Path) -> JsonlRecorder:
    rec = JsonlRecorder(tmp_path / "logs", IdentityPolicy("none"))
    for i in range(6):
        rec.vote(vote("leftvote" if i % 2 else "rightvote", battle("alpha", "beta")))
    return rec


def day_file(recorder: JsonlRecorder) -> Path:
    (path,) = recorder.log_dir.glob("*-conv.json")
    return path


# --- a line nested too deep (defect 2) ------------------------------------------------------


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth + b"\n"


@pytest.mark.parametrize("depth", [5_000, 200_000])
@pytest.mark.parametrize("index", ["index", "no-index"])
def test_a_deeply_nested_line_is_one_unreadable_line(
    recorder: JsonlRecorder, compiled: str, depth: int, index: str, capsys: pytest.CaptureFixture
):
    with day_file(recorder).open("ab") as out:
        out.write(nested(depth))
    recorder.vote(vote("tievote", battle("alpha", "beta")))  # a vote after it is still read
    code = main(
        [str(recorder.log_dir), "--rounds", "0", "--no-style", *(["--no-index"] if index == "no-index" else [])]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert SKIPPED_ONE in printed.out and "7 battle votes read" in printed.out


def test_a_line_just_shallow_enough_to_parse_is_read_or_unreadable_never_fatal(recorder: JsonlRecorder, compiled: str):
    """Nesting that json (or orjson, up to 1024 levels) can read, in a field the row writes back
    as text (json.dumps, which has the interpreter's depth): never an error out of catch_up."""
    line = json.loads(day_file(recorder).read_text().splitlines()[0])
    extra = []
    for depth in (900, 980, 990, 1000, 1020):
        for field in ("battle_id", "mode"):
            line[field] = "@@"
            extra.append(json.dumps(line).replace('"@@"', "[" * depth + "]" * depth))
    with day_file(recorder).open("a") as out:
        out.write("\n".join(extra) + "\n")
    index = VoteIndex(recorder.log_dir)
    report = index.catch_up()
    assert report.votes + index.skipped_lines() == 6 + len(extra)  # each line a vote or unreadable
    assert index.skipped_lines() > 0
    index.close()


def test_the_real_command_line_goes_on_past_a_deeply_nested_line(recorder: JsonlRecorder):
    with day_file(recorder).open("ab") as out:
        out.write(nested(200_000))
    done = subprocess.run(
        [sys.executable, "-m", "webui.leaderboard", str(recorder.log_dir), "--rounds", "0", "--no-style"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert SKIPPED_ONE in done.stdout and "RecursionError" not in done.stderr


def test_the_live_board_is_built_past_a_deeply_nested_line(recorder: JsonlRecorder):
    with day_file(recorder).open("ab") as out:
        out.write(nested(200_000))
    live = LiveBoard(VoteIndex(recorder.log_dir), OPTIONS, poll_s=NO_POLL).start()
    try:
        published = live.sync()
        assert published is not None and published.votes == 6 and live.error is None
        assert published.board.skipped_lines == 1
    finally:
        live.close()


@pytest.mark.parametrize("depth", [5_000, 200_000])
def test_a_deeply_nested_snapshot_is_refused_in_one_line(tmp_path: Path, depth: int, capsys: pytest.CaptureFixture):
    deep = tmp_path / "board-deep.json"
    deep.write_bytes(b'{"battles": ' + nested(depth).strip() + b"}")
    code = main(["--diff", str(deep), str(deep)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {deep}: not a board snapshot")

"""The vote index (webui.leaderboard.votes.index): the same board as the logs give, and nothing lost or
counted twice when a writer dies, a line is torn, logs are copied in or the identity words grow."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.records import battle, chat_event, vote
from webui.db.columns import SPEED_COLUMNS
from webui.db.schema import MIGRATIONS
from webui.leaderboard.board.build import BoardOptions, board_from_index, board_from_logs
from webui.leaderboard.simulate import simulate
from webui.leaderboard.votes import catch_up, identity_checks, reading
from webui.leaderboard.votes import workers as worker_processes
from webui.leaderboard.votes.catch_up import CatchUp
from webui.leaderboard.votes.index import INDEX_NAME, VoteIndex
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder, ReplyEnd, VoteContext, encode, log_files, vote_record
from webui.types import Finished, FinishReason


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sim")
    simulate(folder, 3000, seed=3)
    return folder


def record_votes(
    folder: Path,
    n: int,
    replies: tuple[str, str] = ("left", "right"),
    models=("alpha", "beta"),
    clock: float | None = None,
) -> None:
    kwargs = {"clock": lambda: clock} if clock is not None else {}
    rec = JsonlRecorder(folder, IdentityPolicy("none"), **kwargs)
    for i in range(n):
        rec.vote(vote("leftvote" if i % 3 else "rightvote", battle(*models, replies)))
    rec.close()


def same_board(index: VoteIndex, folder: Path, options: BoardOptions) -> None:
    ours, logs = board_from_index(index, options), board_from_logs(folder, options)
    pd.testing.assert_frame_equal(ours.table, logs.table)
    assert ours.dropped == logs.dropped and ours.skipped_lines == logs.skipped_lines
    assert ours.votes_read == logs.votes_read
    pd.testing.assert_frame_equal(ours.categories, logs.categories)
    pd.testing.assert_frame_equal(ours.voters, logs.voters)
    pd.testing.assert_frame_equal(ours.history, logs.history)


def test_the_board_from_the_index_is_the_board_from_the_logs(simulated: Path, tmp_path: Path):
    index = VoteIndex(simulated, tmp_path / "index.sqlite3")
    for options in (
        BoardOptions(rounds=20),
        BoardOptions(rounds=0, include_named=True, drop_stopped=False, votes_per_day=30, exclude_flagged=True),
    ):
        same_board(index, simulated, options)
    assert index.count() == 3000 and not index.catch_up().votes  # read once, not again


def test_an_index_without_the_speeds_is_rebuilt_with_them(tmp_path: Path):
    """An index written before the rows carried the replies' speeds (and before numbered
    migrations) is rebuilt when opened, and then gives the board the logs give, speeds included."""
    folder, path = tmp_path / "logs", tmp_path / "index.sqlite3"
    rec = JsonlRecorder(folder, IdentityPolicy("none"))
    for i in range(4):
        left, right = battle("alpha", "beta")
        for conv, ttft in ((left, 0.1 * (i + 1)), (right, 1.0)):
            rec.chat(
                dataclasses.replace(
                    chat_event(conv), finished=Finished(FinishReason.STOP, ttft_s=ttft, tokens_per_s=20.0)
                )
            )
        rec.vote(vote("leftvote", (left, right)))
    rec.close()
    VoteIndex(folder, path).catch_up()
    with contextlib.closing(sqlite3.connect(path)) as db, db:  # as the index before them left it
        for column in SPEED_COLUMNS:
            db.execute(f"ALTER TABLE votes DROP COLUMN {column}")
        db.execute("DROP TABLE migrations")
        db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    index = VoteIndex(folder, path)
    index.catch_up()
    assert index.count() == 4 and list(index.rows()["ttft_s_a"]) == pytest.approx([0.1, 0.2, 0.3, 0.4])
    same_board(index, folder, BoardOptions(rounds=0, min_battles=1))
    assert board_from_index(index, BoardOptions(rounds=0)).table.set_index("model").loc[
        "alpha", "ttft_s"
    ] == pytest.approx(0.25)
    index.close()


def test_a_crash_between_the_log_and_the_index_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    logs = tmp_path / "logs"
    record_votes(logs, 5)
    index = VoteIndex(logs)
    assert index.catch_up().votes == 5
    record_votes(logs, 4)  # written to the log; the process "dies" before the index hears of it
    index.close()

    def die(*args, **kwargs):
        raise KeyboardInterrupt("killed mid-write")

    reopened = VoteIndex(logs)
    original = CatchUp._commit
    monkeypatch.setattr(CatchUp, "_commit", lambda self, *a, **k: (original(self, *a, **k), die()))
    with pytest.raises(KeyboardInterrupt):
        reopened.catch_up()  # rows inserted, then killed before the commit
    assert reopened.count() == 5
    monkeypatch.undo()
    assert reopened.catch_up().votes == 4 and reopened.count() == 9  # each vote exactly once
    same_board(reopened, logs, BoardOptions(rounds=0, min_battles=0))


def test_a_torn_last_line_waits_and_is_reported(tmp_path: Path):
    logs = tmp_path / "logs"
    record_votes(logs, 3)
    day = log_files(logs)[0]
    whole = day.read_bytes()
    last = whole.rstrip(b"\n").rsplit(b"\n", 1)[1] + b"\n"
    with day.open("ab") as handle:
        handle.write(last[:40])  # a writer killed mid-record
    index = VoteIndex(logs)
    index.catch_up()
    assert index.count() == 3 and index.skipped_lines() == 1
    assert board_from_logs(logs, BoardOptions(rounds=0)).skipped_lines == 1  # as the logs path says
    with day.open("ab") as handle:
        handle.write(last[40:])  # the line completed (a writer that was only slow)
    index.catch_up()
    assert index.count() == 4 and index.skipped_lines() == 0
    with day.open("ab") as handle:
        handle.write(b"not json\n")
    index.catch_up()
    assert index.count() == 4 and index.skipped_lines() == 1


def test_a_vote_with_fields_of_the_wrong_type_is_invalid_and_stops_nothing(tmp_path: Path):
    """A time that is no number, an offset that is no index: the vote is left out as invalid, in
    the index as in the logs, and the votes after it still count."""
    logs = tmp_path / "logs"
    record_votes(logs, 2)
    day = log_files(logs)[0]
    good = json.loads(day.read_bytes().splitlines()[-1])
    odd = [{**good, "tstamp": "soon"}, {**good, "states": [{**good["states"][0], "offset": "x"}, good["states"][1]]}]
    with day.open("a") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in odd)
    record_votes(logs, 3)
    index = VoteIndex(logs)
    assert index.catch_up().votes == 7
    options = BoardOptions(rounds=0)
    same_board(index, logs, options)
    board = board_from_index(index, options)
    assert board.dropped.get("invalid") == 2 and board.table["battles"].sum() == 2 * 5, board.dropped


def test_a_model_name_that_is_no_text_stops_no_catch_up(tmp_path: Path):
    """Reading the names a vote mentions skips one that is no text (it once raised, unhashable)."""
    logs = tmp_path / "logs"
    record_votes(logs, 2)
    day = log_files(logs)[0]
    good = json.loads(day.read_bytes().splitlines()[-1])
    with day.open("a") as handle:
        handle.write(json.dumps({**good, "states": [{**good["states"][0], "model_name": ["x"]}, good["states"][1]]}))
        handle.write("\n")
        handle.write(json.dumps({**good, "models": [["x"], "beta"]}) + "\n")
    index = VoteIndex(logs)
    assert index.catch_up().votes == 4
    assert board_from_index(index, BoardOptions(rounds=0)).dropped.get("invalid") == 2
    same_board(index, logs, BoardOptions(rounds=0))  # the board from the logs reads them alike


def test_copied_in_logs_are_picked_up_and_a_rewritten_file_is_read_again(simulated: Path, tmp_path: Path):
    logs = tmp_path / "logs"
    record_votes(logs, 6)
    index = VoteIndex(logs, tmp_path / "index.sqlite3")
    index.catch_up()
    for path in log_files(simulated):
        shutil.copy(path, logs / path.name)  # another server's folder (other days)
    report = index.catch_up()
    assert report.votes == 3000 and index.count() == 3006
    own = next(p for p in log_files(logs) if not (simulated / p.name).exists())
    own.write_bytes(own.read_bytes().split(b"\n", 1)[1])  # rewritten under the same name, first vote gone
    report = index.catch_up()
    assert report.reread_files == 1 and index.count() == 3005
    same_board(index, logs, BoardOptions(rounds=0))


def test_identity_checks_follow_the_growing_word_list(tmp_path: Path):
    logs = tmp_path / "logs"
    record_votes(logs, 4, replies=("I am zeta-9, here to help", "hello"), clock=1_767_225_600.0)
    index = VoteIndex(logs)
    assert board_from_index(index, BoardOptions(rounds=0)).dropped.get("identity", 0) == 0
    record_votes(logs, 2, replies=("hello", "hi"), models=("zeta-9", "alpha"), clock=1_767_312_000.0)  # a day later
    board = board_from_index(index, BoardOptions(rounds=0))
    assert board.dropped["identity"] == 4  # the earlier replies named a model that now plays
    same_board(index, logs, BoardOptions(rounds=0))
    extra = board_from_index(index, BoardOptions(rounds=0, extra_identity_words="hello"))
    assert extra.dropped["identity"] == 4 + 2  # and the zeta-9 votes whose A side said hello
    assert board_from_index(index, BoardOptions(rounds=0)).dropped["identity"] == 4  # and back again


def test_a_recheck_finds_names_behind_escapes_and_in_any_script(tmp_path: Path):
    """A recheck parses only the lines that might name an added word; the names that only an
    escape (\\n, \\", \\t) or a non-ASCII neighbour separates from the text around them still count."""
    logs = tmp_path / "logs"
    replies = [
        "First line\nZeta-9 here",  # \n then the name: "nzeta" in the raw line
        'They call me "zeta 9"',
        "a\tZETA_9\\n",
        "caf\u00e9 zeta-9",  # written as \u00e9
        "\u212aelvin and zeta9",  # the Kelvin sign lowers to k
        "templates and zeta-90 and zetas",  # no whole-word match
        "nothing to see",
    ]
    for k, reply in enumerate(replies):
        record_votes(logs, 1, replies=(reply, "hello"), clock=1_767_225_600.0 + k)
    record_votes(logs, 1, models=("zeta-9", "alpha"), clock=1_767_312_000.0)  # zeta-9 joins: a recheck
    index = VoteIndex(logs)
    assert index.catch_up().rechecked == len(replies)  # the first day's file is read before zeta-9's
    assert board_from_index(index, BoardOptions(rounds=0)).dropped["identity"] == 5
    same_board(index, logs, BoardOptions(rounds=0))


def logged(*replies: str) -> dict:
    """The record a battle vote with these replies is logged as."""
    context = VoteContext(reply_ends=lambda conv: [ReplyEnd(FinishReason.STOP)])
    event = vote("leftvote", battle("alpha", "beta", replies))
    return vote_record(event, IdentityPolicy("none"), 1_767_225_600.0, context)


def test_a_line_that_cannot_name_a_word_is_told_apart_without_parsing_it():
    """Whenever a reply names a word the line passes the test (no leak is missed), and a line whose
    only match is inside another word ("late" in "template_name") does not."""
    from webui.leaderboard.votes.ingest import might_name
    from webui.leaderboard.votes.rows import identity_leak

    words = ("late-7b", "gpt-4", "command-r", "kimi")
    pieces = [
        "late",
        "Late-7b",
        "LATE 7B",
        "gpt-4",
        "gpt-40",
        "GPT4o",
        "command r",
        "commandR",
        "x",
        "7",
        "4o",
        "\n",
        "\t",
        "\r",
        '"',
        "\\",
        " ",
        "-",
        "_",
        "é",
        "\u212a",  # lowers to k
        "imi",
        "kim",
        "KIMI",
        "\u0130",  # lowers to i and a combining dot
        "\u017f",
        "\x07",
        "中",
        "template",
        ".",
        "\u00a0",
    ]
    rng = __import__("random").Random(5)
    passed = leaked = 0
    for _ in range(3000):
        reply = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        record = logged(reply, "hello")
        line = encode(record)
        might = might_name(line, words)
        if identity_leak(record, words):
            leaked += 1
            assert might, reply
        passed += might
    assert leaked > 300 and passed < 3000  # both kinds were tried
    plain = encode(logged("a template", "relate"))
    assert b"late" in plain.lower() and not might_name(plain, words)
    spelled = plain.replace(b"a template", b"\\u004cate-7B")  # JSON may escape any character
    assert json.loads(spelled)["states"][0]["messages"][-1][1] == "Late-7B" and might_name(spelled, words)


def vm_steps(index: VoteIndex) -> list[int]:
    """A counter of the SQLite virtual machine's steps on `index`'s writing connection: how many
    rows a catch-up reads, without timing it."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0  # go on

    index.tables.db._db.set_progress_handler(count, 1)  # type: ignore[attr-defined]
    return steps


def test_a_catch_up_with_nothing_new_reads_no_rows(tmp_path: Path):
    """Whether an older word list is still in use is kept, not found by reading every row: with
    nothing new, a catch-up at start and one later cost the same at 300 votes as at 1,200."""
    logs = tmp_path / "logs"
    record_votes(logs, 100, replies=("I am zeta-9", "hello"))
    record_votes(logs, 200, models=("zeta-9", "alpha"))  # grows the word list: rows are checked again
    costs = []
    for more in (0, 900):
        record_votes(logs, more)
        VoteIndex(logs).catch_up()
        started = VoteIndex(logs)
        steps = vm_steps(started)
        assert started.catch_up().rechecked == 0
        later = steps[0]
        assert started.catch_up().rechecked == 0
        costs.append((later, steps[0] - later))
    assert costs[1] == costs[0], costs
    # An index from before the word lists in use were kept finds them once, by reading the rows.
    started.tables.db.execute("DELETE FROM meta WHERE key LIKE 'word_sets_in_use:%'")
    assert started.catch_up(extra_words="hello").rechecked == 1100  # all but the 100 that leak already
    same_board(started, logs, BoardOptions(rounds=0, extra_identity_words="hello"))


def test_worker_processes_index_what_one_process_does(simulated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from webui.leaderboard.votes import ingest

    # Without foreseeing names (test_a_long_catch_up_foresees_the_names_to_come): late-7b joins
    # halfway, and the votes before it are checked again.
    monkeypatch.setattr(CatchUp, "_foresee", lambda self, ranges, pool: set())
    alone = VoteIndex(simulated, tmp_path / "alone.sqlite3")
    by_one, rows_by_one = alone.catch_up(), alone.rows()
    again_by_one = alone.catch_up(extra_words="terminal")  # a word added: a recheck alone
    monkeypatch.setattr(worker_processes, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ingest, "CHUNK_BYTES", 256 << 10)  # many chunks in flight at once
    monkeypatch.setattr(identity_checks, "RECHECK_BATCH", 97)  # rows checked again in many batches
    pooled = VoteIndex(simulated, tmp_path / "pooled.sqlite3")
    by_workers = pooled.catch_up()
    assert by_workers.votes == 3000 and by_workers.rechecked == by_one.rechecked > 0  # late-7b joins halfway
    pd.testing.assert_frame_equal(pooled.rows(), rows_by_one)
    # A recheck alone gets workers of its own.
    assert pooled.catch_up(extra_words="terminal").rechecked == again_by_one.rechecked > 0
    assert pooled.rows()["leak"].sum() > rows_by_one["leak"].sum()
    pd.testing.assert_frame_equal(pooled.rows(), alone.rows())


@pytest.mark.parametrize("workers", [False, True])
def test_a_long_catch_up_foresees_the_names_to_come(
    simulated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: bool
):
    """The names in the unread bytes are known before the first chunk is checked: no vote is read
    twice, and the rows are those of a catch-up that learnt late-7b halfway and checked again."""
    from webui.leaderboard.votes import ingest

    monkeypatch.setattr(ingest, "CHUNK_BYTES", 256 << 10)
    if workers:
        monkeypatch.setattr(worker_processes, "PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(catch_up, "FORESEE_BYTES", 1 << 20)  # pieces that split lines
    foreseeing = VoteIndex(simulated, tmp_path / "foreseeing.sqlite3")
    report = foreseeing.catch_up()
    with monkeypatch.context() as patch:
        patch.setattr(CatchUp, "_foresee", lambda self, ranges, pool: set())
        surprised = VoteIndex(simulated, tmp_path / "surprised.sqlite3")
        assert surprised.catch_up().rechecked > 0
    assert report.votes == 3000 and report.rechecked == 0
    pd.testing.assert_frame_equal(foreseeing.rows(), surprised.rows())


def test_a_name_foreseen_wrongly_costs_a_check_of_the_leaks_only(
    simulated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A "model_name" in a line that is no record is foreseen, but no vote names it: the votes
    checked with it that leak are checked again without it, and only those."""
    from webui.leaderboard.votes import ingest

    monkeypatch.setattr(ingest, "CHUNK_BYTES", 256 << 10)
    logs = tmp_path / "logs"
    shutil.copytree(simulated, logs)
    first = log_files(logs)[0]
    first.write_bytes(b'not a record: {"model_name": "terminal"}\n' + first.read_bytes())
    foreseeing = VoteIndex(logs, tmp_path / "foreseeing.sqlite3")
    rechecked = foreseeing.catch_up().rechecked
    with monkeypatch.context() as patch:
        patch.setattr(CatchUp, "_foresee", lambda self, ranges, pool: set())
        surprised = VoteIndex(logs, tmp_path / "surprised.sqlite3")
        surprised.catch_up()
    leaks_with_terminal = int(surprised.rows()["leak"].sum())
    surprised.catch_up(extra_words="terminal")
    leaks_with_terminal = int(surprised.rows()["leak"].sum()) - leaks_with_terminal
    assert 0 < leaks_with_terminal <= rechecked < 3000 // 5
    surprised.catch_up()  # "terminal" taken away again
    pd.testing.assert_frame_equal(foreseeing.rows(), surprised.rows())


def test_words_taken_away_check_again_only_the_votes_that_leaked(simulated: Path, tmp_path: Path):
    index = VoteIndex(simulated, tmp_path / "index.sqlite3")
    index.catch_up()
    index.catch_up(extra_words="terminal, hello")
    leaking = int(index.rows()["leak"].sum())
    assert index.catch_up(extra_words="terminal").rechecked == leaking  # no vote that did not leak
    fresh = VoteIndex(simulated, tmp_path / "fresh.sqlite3")
    fresh.catch_up(extra_words="terminal")
    pd.testing.assert_frame_equal(index.rows(), fresh.rows())
    assert index.catch_up().rechecked == int(fresh.rows()["leak"].sum())


def test_a_long_catch_up_gives_back_the_memory_it_freed(
    simulated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):

    calls: list[int] = []  # by thread: a live board left running by another test may catch up meanwhile
    monkeypatch.setattr(catch_up, "give_back_freed_memory", lambda: calls.append(threading.get_ident()))
    VoteIndex(simulated, tmp_path / "short.sqlite3").catch_up()  # under 64 MB: kept for the next one
    assert threading.get_ident() not in calls
    monkeypatch.setattr(worker_processes, "PARALLEL_MIN_BYTES", 0)
    VoteIndex(simulated, tmp_path / "long.sqlite3").catch_up()
    assert calls.count(threading.get_ident()) == 1


_FREED_HEAP = """
import ctypes, sys
from webui.leaderboard.votes.catch_up import give_back_freed_memory
def rss():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS"))
kept = [b"x" * 1000 + bytes([i % 256]) for i in range(200_000)]  # 200 MB in blocks malloc keeps
del kept[:-1]  # the last one stays: the heap's top is in use, so free() alone returns nothing
before = rss()
give_back_freed_memory()
print(before, rss())
"""


def test_the_freed_heap_goes_back_to_the_system():
    """The real call, in a fresh process: glibc's malloc_trim returns the freed heap below a block
    still in use, which free() never does."""
    import ctypes
    import subprocess
    import sys

    if not hasattr(ctypes.CDLL(None), "malloc_trim"):
        pytest.skip("no glibc malloc_trim here: give_back_freed_memory does nothing")
    before, after = map(int, subprocess.check_output([sys.executable, "-c", _FREED_HEAP], text=True).split())
    assert before - after > 100_000  # kB


def test_a_day_file_shorter_than_its_head_is_not_read_again(simulated: Path, tmp_path: Path):
    """A day's first vote makes a file shorter than the bytes that identify one (HEAD_BYTES): the
    votes after it are added, not the file read again (which bumped the generation and made the
    live board load every row back out of SQLite). A short file rewritten is still read again."""
    lines = log_files(simulated)[0].read_bytes().splitlines(keepends=True)[:6]
    logs = tmp_path / "logs"
    logs.mkdir()
    day = logs / log_files(simulated)[0].name
    day.write_bytes(lines[0])
    assert len(lines[0]) < 4096 < len(b"".join(lines[:3]))
    index = VoteIndex(logs, tmp_path / "index.sqlite3")
    index.catch_up()
    for count, line in enumerate(lines[1:4], start=2):
        with day.open("ab") as out:
            out.write(line)
        report = index.catch_up()
        assert (report.reread_files, report.votes, index.count(), index.state()[0]) == (0, 1, count, 0)
    assert VoteIndex(logs, tmp_path / "index.sqlite3").catch_up().reread_files == 0  # another process too
    # The head grew with the file: a change past the first line's bytes is seen.
    rewritten = lines[0] + lines[4] + b"".join(lines[2:4]) + lines[5]  # longer: not told by its size
    assert rewritten[: len(lines[0])] == lines[0] and len(rewritten) > day.stat().st_size
    day.write_bytes(rewritten)
    report = index.catch_up()
    assert report.reread_files == 1 and index.count() == 5
    short = logs / "2026-02-01-conv.json"
    short.write_bytes(lines[0])
    index.catch_up()
    short.write_bytes(lines[5])  # rewritten, as short
    assert index.catch_up().reread_files == 1 and index.count() == 6


def test_reindex_gives_the_same_rows(simulated: Path, tmp_path: Path):
    index = VoteIndex(simulated, tmp_path / "index.sqlite3")
    index.catch_up()
    before = index.rows()
    assert index.reindex().votes == 3000
    pd.testing.assert_frame_equal(index.rows(), before)


def test_two_writers_never_count_a_vote_twice(simulated: Path, tmp_path: Path):
    path = tmp_path / "index.sqlite3"
    indexes = [VoteIndex(simulated, path), VoteIndex(simulated, path)]  # separate connections, as two processes
    errors: list[BaseException] = []

    def run(index: VoteIndex) -> None:
        try:
            index.catch_up()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(ix,)) for ix in indexes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and indexes[0].count() == 3000
    assert not indexes[0].rows()[["file", "offset"]].duplicated().any()


def test_exports_read_the_text_back_from_the_lines(tmp_path: Path):
    logs = tmp_path / "logs"
    record_votes(logs, 3, replies=("first side", "second side"))
    index = VoteIndex(logs)
    board = board_from_index(index, BoardOptions(rounds=0))
    text = index.details(board.battles)
    assert list(text["conversation_a"].map(lambda c: c[-1]["content"])) == ["first side"] * 3
    assert "conversation_a" not in board.battles  # the index itself keeps no text


def test_the_columnar_copy_always_gives_the_rows_sqlite_holds(
    simulated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):

    monkeypatch.setattr(reading, "SNAPSHOT_MIN_ROWS", 1)
    logs, path = tmp_path / "logs", tmp_path / "index.sqlite3"
    shutil.copytree(simulated, logs)
    index = VoteIndex(logs, path)
    index.catch_up()

    def check() -> None:
        pd.testing.assert_frame_equal(index.rows(), index.reader.fetch(0))  # straight from SQLite

    check()
    assert index.snapshot_path.exists()
    record_votes(logs, 3)
    index.catch_up()
    check()  # the copy and the rows added since
    index.catch_up(extra_words="remember")  # rows checked again: a new generation, the copy is stale
    check()
    index.reindex()
    check()
    index.close()
    for leftover in tmp_path.glob("index.sqlite3*"):
        if leftover != index.snapshot_path:
            leftover.unlink()  # the database deleted, its columnar copy left behind
    index = VoteIndex(logs, path)
    index.catch_up()
    check()


@pytest.mark.parametrize("workers", [False, True])
def test_a_catch_up_into_an_empty_index_writes_the_columnar_copy(
    simulated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: bool
):
    """Built as the chunks commit, the copy holds what SQLite holds, in its order, with the
    identity checks that the catch-up's own recheck changed; so the first load reads no row back."""
    from webui.leaderboard.votes import ingest

    monkeypatch.setattr(reading, "SNAPSHOT_MIN_ROWS", 1)
    monkeypatch.setattr(CatchUp, "_foresee", lambda self, ranges, pool: set())  # zeta-9 comes as a surprise
    if workers:
        monkeypatch.setattr(worker_processes, "PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(ingest, "CHUNK_BYTES", 256 << 10)
    logs = tmp_path / "logs"
    shutil.copytree(simulated, logs)
    record_votes(logs, 5, replies=("I am zeta-9", "hello"), clock=1_767_225_600.0)  # the first day
    record_votes(logs, 2, models=("zeta-9", "alpha"), clock=1_767_571_200.0)  # zeta-9 plays days later
    index = VoteIndex(logs, tmp_path / "index.sqlite3")
    report = index.catch_up()
    assert report.rechecked > 0 and index.snapshot_path.exists()
    fetched = 0
    fetch = index.reader.fetch

    def counted(after_id: int) -> pd.DataFrame:
        nonlocal fetched
        rows = fetch(after_id)
        fetched += len(rows)
        return rows

    monkeypatch.setattr(index.reader, "fetch", counted)
    rows = index.rows()
    assert fetched == 0  # every row from the copy
    pd.testing.assert_frame_equal(rows, fetch(0))  # straight from SQLite
    assert rows["leak"].sum() >= 5


def test_a_cold_catch_up_makes_the_session_index_at_its_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Rows go into an empty index without the session index (each row would update it at a random
    place); it is there once the catch-up ends, and made again on open if one died before that."""

    def indexes(index: VoteIndex) -> set[str]:
        return {n for (n,) in index.tables.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}

    logs = tmp_path / "logs"
    record_votes(logs, 3, clock=1_767_225_600.0)
    index = VoteIndex(logs)
    during: list[set[str]] = []
    commit = index.writer._commit

    def watched(*args: Any) -> bool:
        during.append(indexes(index))
        return commit(*args)

    monkeypatch.setattr(index.writer, "_commit", watched)
    index.catch_up()
    assert during and all("votes_session" not in found for found in during)
    assert {"votes_session", "votes_file"} <= indexes(index)
    record_votes(logs, 2, clock=1_767_312_000.0)
    index.catch_up()  # not into an empty index: the index stays
    assert "votes_session" in during[-1]
    index.tables.db.execute("DROP INDEX votes_session")  # as a catch-up that died mid-way leaves it
    index.close()
    again = VoteIndex(logs)
    assert "votes_session" in indexes(again)
    (session,) = again.tables.db.execute("SELECT session FROM votes LIMIT 1").fetchone()
    assert len(again.session_rows(session)) >= 1
    empty = VoteIndex(tmp_path / "empty")  # polled while no vote is logged: nothing is written
    writes = []
    transaction = empty.tables.transaction
    monkeypatch.setattr(empty.tables, "transaction", lambda: writes.append(1) or transaction())
    empty.catch_up()
    assert writes == []


def test_a_catch_up_into_an_index_with_rows_or_an_odd_value_writes_no_copy(tmp_path: Path, monkeypatch):

    monkeypatch.setattr(reading, "SNAPSHOT_MIN_ROWS", 1)
    logs = tmp_path / "logs"
    record_votes(logs, 3, clock=1_767_225_600.0)
    index = VoteIndex(logs)
    index.catch_up()
    index.snapshot_path.unlink()
    record_votes(logs, 3, clock=1_767_312_000.0)
    index.catch_up()
    assert not index.snapshot_path.exists()  # not cold: the next load writes it, as before
    odd = tmp_path / "odd"
    record_votes(odd, 3, clock=1_767_225_600.0)
    line = json.loads(log_files(odd)[0].read_text().splitlines()[0])
    line["states"][0]["messages"][-1][1] = "hello"
    line["tstamp"] = float("nan")  # a time SQLite keeps as NULL
    with log_files(odd)[0].open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    index = VoteIndex(odd)
    index.catch_up()
    assert not index.snapshot_path.exists()
    pd.testing.assert_frame_equal(index.rows(), index.reader.fetch(0))


def test_the_placeholders_of_anonymous_battles_are_not_identity_words(tmp_path: Path):
    from webui.leaderboard.votes.rows import names_in

    record = {
        "type": "leftvote",
        "models": ["Model A", "Model B"],
        "states": [{"model_name": "alpha"}, {"model_name": "beta"}],
    }
    assert names_in(record) == {"alpha", "beta"}
    named = {"type": "leftvote", "models": ["<h3>Model A: gamma</h3>", "delta"], "states": [{}, {}]}
    assert names_in(named) == {"gamma", "delta"}  # a heading some FastChat versions wrapped names in


def test_a_rebuild_by_another_process_is_noticed(tmp_path: Path):
    logs = tmp_path / "logs"
    record_votes(logs, 4)
    first, second = VoteIndex(logs), VoteIndex(logs)  # as the app and the command line
    first.catch_up()
    assert second.reindex().votes == 4
    record_votes(logs, 2)
    first.catch_up()  # its memory of what it had read belongs to the index before the rebuild
    assert first.count() == 6 and second.catch_up().votes == 0
    assert not first.rows()[["file", "offset"]].duplicated().any()


def test_building_a_board_leaves_the_rows_it_was_given_alone(simulated: Path, tmp_path: Path):
    from webui.leaderboard.board.build import board_from_battles
    from webui.leaderboard.votes.rows import drop_reasons

    index = VoteIndex(simulated, tmp_path / "index.sqlite3")
    index.catch_up()
    rows = index.rows()
    rows["drop_reason"] = drop_reasons(rows, True)
    before = rows.copy()
    board = board_from_battles(rows, BoardOptions(rounds=0, votes_per_day=5))
    assert board.dropped["over_daily_cap"] > 0  # the board marked rows...
    pd.testing.assert_frame_equal(rows, before)  # ...in its own copy: a live board reuses its rows


def test_readers_do_not_wait_for_a_long_catch_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    logs = tmp_path / "logs"
    record_votes(logs, 3)
    index = VoteIndex(logs)
    index.catch_up()
    record_votes(logs, 2)
    inside, release = threading.Event(), threading.Event()
    original = CatchUp._catch_up_file

    def slow(self, *args, **kwargs):
        inside.set()
        assert release.wait(60)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CatchUp, "_catch_up_file", slow)
    writer = threading.Thread(target=index.catch_up)
    writer.start()
    try:
        assert inside.wait(30)  # a catch-up holds the index (as a cold one does for minutes)
        assert index.count() == 3 and len(index.session_rows("")) == 3  # readers answer meanwhile
        assert index.catch_up(wait_s=0.1).votes == 0  # and a bounded catch-up gives up
    finally:
        release.set()
        writer.join(60)
    assert index.count() == 5


def test_an_index_from_before_numbered_migrations_is_read_again(tmp_path: Path):
    record_votes(tmp_path, 3)
    with contextlib.closing(sqlite3.connect(tmp_path / INDEX_NAME)) as db:  # the layout before migrations
        db.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "INSERT INTO meta VALUES ('schema_version', '1'), ('generation', '4');"
            "CREATE TABLE files (name TEXT PRIMARY KEY, head TEXT NOT NULL, offset INTEGER NOT NULL, "
            "bad INTEGER NOT NULL, torn INTEGER NOT NULL);"
            "CREATE TABLE votes (id INTEGER PRIMARY KEY, file TEXT NOT NULL, offset INTEGER NOT NULL);"
        )
    index = VoteIndex(tmp_path)
    assert index.catch_up().votes == 3 and index.count() == 3
    with contextlib.closing(sqlite3.connect(tmp_path / INDEX_NAME)) as db:
        assert db.execute("SELECT version FROM migrations").fetchall() == [(m.version,) for m in MIGRATIONS]
    index.close()


def test_flags_and_nulls_are_stored_as_sqlite_binds_them_without_adapters(tmp_path: Path):
    """The store registers adapters for bool and None (a faster path through Python 3.11's
    sqlite3): they must store what sqlite3 stores without them, 0/1 and NULL."""
    from webui.db.store import open_store

    assert sqlite3.adapters[(bool, sqlite3.PrepareProtocol)] is int  # the fast path is the one taken
    assert (type(None), sqlite3.PrepareProtocol) in sqlite3.adapters
    store = open_store(tmp_path / "s.sqlite3")
    with store.transaction():
        store.execute("CREATE TABLE t (flag INTEGER, other)")
        store.executemany("INSERT INTO t VALUES (?, ?)", [(True, None), (False, 2.5), (None, True)])
    stored = store.execute("SELECT flag, typeof(flag), other, typeof(other) FROM t ORDER BY rowid").fetchall()
    assert stored == [(1, "integer", None, "null"), (0, "integer", 2.5, "real"), (None, "null", 1, "integer")]
    plain = sqlite3.connect(":memory:")  # a connection of its own stores the same
    assert plain.execute("SELECT typeof(?), typeof(?), ?", (None, True, False)).fetchone() == ("null", "integer", 0)
    store.close()

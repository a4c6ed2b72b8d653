"""8 processes x 16 threads append 50 KB votes to one day file: every record is found whole.

The same harness runs a known-bad writer (each record split over two unlocked writes) and must
report damage, which shows that the check can fail.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

from tests.records import conversation, vote
from webui.records.privacy import IdentityPolicy
from webui.records.storage import AppendLog, JsonlRecorder

PROCESSES = 8
THREADS = 16
PER_THREAD = 3
RECORD_BYTES = 50_000
FIXED_TIME = 1_780_000_000.0  # one day file for everyone


class SplitWriter(AppendLog):
    """Known-bad: writes each record in two pieces with no lock, pausing in between (the pause
    widens a window that exists anyway, so that the test sees the damage every time)."""

    def append(self, path: Path, line: bytes, *, durable: bool) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            half = len(line) // 2
            os.write(fd, line[:half])
            time.sleep(0.002)
            os.write(fd, line[half:])
        finally:
            os.close(fd)


def payload(tag: str) -> str:
    """~50 KB of text determined by the tag, so the reader can check every byte came back."""
    seed = hashlib.sha256(tag.encode()).hexdigest()
    return (seed * (RECORD_BYTES // len(seed) + 1))[:RECORD_BYTES]


def write_many(log_dir: str, worker: int, bad: bool) -> None:
    """One process: its own recorder, THREADS threads writing PER_THREAD votes each."""
    writer = SplitWriter() if bad else None
    rec = JsonlRecorder(Path(log_dir), IdentityPolicy("none"), clock=lambda: FIXED_TIME, writer=writer)

    def thread_body(thread: int) -> None:
        for i in range(PER_THREAD):
            tag = f"{worker}-{thread}-{i}"
            conv = conversation("m", payload(tag), prompt=tag, mode="direct", anonymous=False)
            rec.vote(vote("upvote", [conv]))

    threads = [threading.Thread(target=thread_body, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_writers(log_dir: Path, bad: bool) -> None:
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no locks or descriptors inherited
    procs = [ctx.Process(target=write_many, args=(str(log_dir), w, bad)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]


def damage(log_dir: Path) -> list[str]:
    """Everything wrong with the files: unparseable lines, wrong payloads, missing or extra records."""
    problems: list[str] = []
    seen: list[str] = []
    for path in sorted(log_dir.glob("*-conv.json")):
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            problems.append(f"{path.name}: last line has no newline")
        for number, line in enumerate(data.splitlines(), 1):
            try:
                record = json.loads(line)
            except ValueError:
                problems.append(f"{path.name}:{number}: not JSON ({len(line)} bytes)")
                continue
            tag = record["state"]["messages"][0][1]
            if record["state"]["messages"][1][1] != payload(tag):
                problems.append(f"{path.name}:{number}: payload of {tag} damaged")
            seen.append(tag)
    expected = {f"{w}-{t}-{i}" for w in range(PROCESSES) for t in range(THREADS) for i in range(PER_THREAD)}
    missing = expected - set(seen)
    if missing:
        problems.append(f"{len(missing)} records missing")
    if len(seen) != len(set(seen)):
        problems.append("duplicated records")
    return problems


@pytest.mark.timeout(240)
def test_many_processes_and_threads_lose_nothing(tmp_path: Path):
    run_writers(tmp_path, bad=False)
    assert damage(tmp_path) == []
    (path,) = tmp_path.glob("*-conv.json")
    assert path.stat().st_size > PROCESSES * THREADS * PER_THREAD * RECORD_BYTES


@pytest.mark.timeout(240)
def test_the_check_catches_a_writer_that_splits_records(tmp_path: Path):
    run_writers(tmp_path, bad=True)
    problems = damage(tmp_path)
    assert problems, "the known-bad writer went unnoticed: the concurrency check proves nothing"
    assert any("not JSON" in p for p in problems)

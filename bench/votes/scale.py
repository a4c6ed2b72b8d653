"""The vote index and the board at scale: `python -m bench.votes.scale`.

    python -m bench.votes.scale                              # 20k, 200k and 1M simulated votes (~15 min)
    python -m bench.votes.scale --sizes 20000 --old-tree DIR # also the code before the index, checked out in DIR
    python -m bench.votes.scale --steps live                 # only the new vote, on the indexes left in --work

For each size: simulated logs (`webui.leaderboard.simulate`, kept in --work between runs), then,
each step in a fresh process so that its peak memory is its own:
- index cold: `VoteIndex.catch_up` from nothing (votes/s, peak memory of it and its workers, CPU
  of it and of its workers: less moved than the wall time by a shared machine's load);
- board, first: the whole default board (200 rounds, style control, categories, history) from the
  index, reading every row out of SQLite; board, warm: the same once the columnar copy exists;
- one more vote: a live board on the index, a vote recorded, the time until the board has it; what
  adding one vote to the board's tally costs (median of 10), and a full build of the live board;
- recording: a vote's `JsonlRecorder.vote` (fsync'ed) with and without the live board's nudge;
- old: `python -m webui.leaderboard LOGDIR` of the code in --old-tree (re-reads every log line).
Writes bench/results/votes-cpu.json and .md. Figures, never asserts.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.report import ROOT, Column, Table, load_average, machine_info, mib, number, seconds, to_markdown

SIZES = (20_000, 200_000, 1_000_000)
STEPS = ("index", "board", "live")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.votes.scale", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="simulated votes per run, comma-separated")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-votes"), help="where logs and indexes go")
    parser.add_argument("--old-tree", type=Path, help="a checkout of the code before the index, timed beside it")
    parser.add_argument("--old-max", type=int, default=200_000, help="largest size the old code is run on")
    parser.add_argument("--steps", default=",".join(STEPS), help="which of index,board,live to run")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "votes-cpu.json")
    parser.add_argument("step", nargs="*", help=argparse.SUPPRESS)  # internal: one step in a child process
    args = parser.parse_args(argv)
    if args.step:
        print(json.dumps({**run_step(*args.step), "rss": _peak()}))
        return 0
    steps = set(args.steps.split(","))
    rows = [
        measure(int(n), args.work, args.old_tree if int(n) <= args.old_max else None, steps)
        for n in args.sizes.split(",")
    ]
    results = {"meta": {**machine_info("cpu"), "load_average": load_average()}, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    markdown = "\n\n".join(
        to_markdown(t) for t in tables(rows) if any(c.key in row for row in t.rows for c in t.columns[2:])
    )  # steps not run: no table
    args.out.with_suffix(".md").write_text(markdown + "\n")
    print(markdown)
    return 0


def measure(n: int, work: Path, old_tree: Path | None, steps: set[str]) -> dict[str, Any]:
    logs = work / str(n)
    if not (logs / "truth.json").exists():
        child("simulate", str(logs), str(n))
    index = work / f"{n}.sqlite3"
    row: dict[str, Any] = {"votes": n, "log_bytes": sum(p.stat().st_size for p in logs.glob("*-conv.json"))}
    if "index" in steps:
        for leftover in work.glob(f"{n}.sqlite3*"):
            leftover.unlink()
        cold = child("index", str(logs), str(index))
        row.update(index_s=cold["wall_s"], index_rss=cold["rss"], index_bytes=index.stat().st_size)
        row["index_votes_per_s"] = n / cold["wall_s"]
        row.update(index_cpu_main_s=cold["cpu_main_s"], index_cpu_workers_s=cold["cpu_workers_s"])
        row["index_cpu_us_per_vote"] = (cold["cpu_main_s"] + cold["cpu_workers_s"]) / n * 1e6
    if "board" in steps:
        first, warm = child("board", str(logs), str(index)), child("board", str(logs), str(index))
        row.update(
            board_first_s=first["wall_s"],
            board_first_rss=first["rss"],
            board_s=warm["wall_s"],
            board_rss=warm["rss"],
            board_only_s=warm["build_s"],
            load_s=warm["load_s"],
        )
    if "live" in steps:
        row.update({k: v for k, v in child("live", str(logs), str(index)).items() if k not in ("wall_s", "rss")})
    if old_tree is not None:
        old = child("old", str(logs), str(old_tree))
        row.update(old_s=old["wall_s"], old_rss=old["rss"])
    print(json.dumps(row), flush=True)
    return row


def child(*step: str) -> dict[str, Any]:
    """Run one step in a fresh interpreter: its result, with its wall time and peak memory."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bench.votes.scale", *step], capture_output=True, text=True, check=False, cwd=ROOT
    )
    if done.returncode != 0:
        raise RuntimeError(f"step {step[0]} failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall_s": time.perf_counter() - started, **result}


def _peak() -> int:
    """Peak memory in bytes: this process, or the largest of its children (worker processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024


def run_step(name: str, *args: str) -> dict[str, Any]:
    if name == "simulate":
        from webui.leaderboard.simulate import simulate

        simulate(Path(args[0]), int(args[1]))
        return {}
    if name == "old":
        return _old(Path(args[0]), Path(args[1]))
    from webui.leaderboard.votes.index import VoteIndex

    index = VoteIndex(Path(args[0]), Path(args[1]))
    return {"index": _index, "board": _board, "live": _live}[name](index)


def _index(index: Any) -> dict[str, Any]:
    started, cpu = time.perf_counter(), _cpu()
    report = index.catch_up()
    wall_s = time.perf_counter() - started
    _end_fork_server()
    main_s, workers_s = (after - before for after, before in zip(_cpu(), cpu, strict=True))
    return {
        "wall_s": wall_s,
        "rechecked": report.rechecked,
        "cpu_main_s": main_s,
        "cpu_workers_s": workers_s,
    }


def _end_fork_server() -> None:
    """The index's workers are children of the fork server (webui.leaderboard.votes.workers), so their CPU,
    and the server's, reaches this process's RUSAGE_CHILDREN only once the server has ended and
    been waited for: end it (a private call; a bench may)."""
    from multiprocessing import forkserver

    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
    if stop is not None:
        stop()


def _cpu() -> tuple[float, float]:
    """(this process's CPU seconds, its ended children's): the less load-dependent side of a timing
    on a shared machine."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _board(index: Any) -> dict[str, Any]:
    from webui.leaderboard.board.build import BoardOptions, board_from_rows

    started = time.perf_counter()
    index.catch_up()
    rows = index.rows()
    loaded = time.perf_counter()
    board = board_from_rows(rows, BoardOptions(), index.skipped_lines())
    done = time.perf_counter()
    return {"wall_s": done - started, "load_s": loaded - started, "build_s": done - loaded, "models": len(board.table)}


def _live(index: Any) -> dict[str, Any]:
    """A vote recorded through the recorder, as the app does, until the live board shows it; then
    single votes added to the board's tally (catch-up included), the catch-up alone, and one full
    build of the live board."""
    import itertools

    from tests.records import battle, vote
    from webui.leaderboard.board.build import BoardOptions
    from webui.leaderboard.board.live import LiveBoard
    from webui.records.privacy import IdentityPolicy
    from webui.records.storage import JsonlRecorder

    live = LiveBoard(index, BoardOptions(), poll_s=3600.0, full_every_s=3600.0).start()
    first = live.sync(3600)
    assert first is not None
    # each vote newer than every one before, as live votes are (earlier runs left theirs in the logs)
    ticks = itertools.count(max(1_900_000_000.0, float(first.board.battles["tstamp"].max()) + 1.0), 0.25)
    recorder = JsonlRecorder(index.log_dir, IdentityPolicy("none"), clock=lambda: next(ticks))
    plain = _vote_times(recorder, 20)
    recorder.vote_listeners.append(live.nudge)
    live.sync(3600)
    started = time.perf_counter()
    recorder.vote(vote("leftvote", battle("ember-7b", "falcon-7b")))
    while (live.latest() or first).votes <= first.votes + 20:
        time.sleep(0.005)
    seen = time.perf_counter() - started
    adds = []
    for _ in range(10):  # one vote, then the board that has it: through the tally
        recorder.vote(vote("rightvote", battle("ember-7b", "falcon-7b")))
        adds.append(_published(live).build_s)
    nudged = _vote_times(recorder, 20)
    live.sync(3600)
    catch_ups = []  # the part of a vote's way that is the index's, not the board's
    for _ in range(5):
        recorder.vote_listeners.clear()
        recorder.vote(vote("leftvote", battle("ember-7b", "falcon-7b")))
        started = time.perf_counter()
        index.catch_up()
        catch_ups.append(time.perf_counter() - started)
    recorder.vote_listeners.append(live.nudge)
    live.sync(3600)
    live.full_every_votes = 1  # the next vote is added, then the board is built in full
    recorder.vote(vote("leftvote", battle("ember-7b", "falcon-7b")))
    full = _published(live)
    live.close()
    return {
        "vote_to_board_s": seen,
        "add_s": statistics.median(adds),
        "full_rebuild_s": full.build_s,
        "catch_up_s": statistics.median(catch_ups),
        "record_ms": statistics.median(plain) * 1000,
        "record_nudged_ms": statistics.median(nudged) * 1000,
    }


def _published(live: Any) -> Any:
    published = live.sync(3600)
    assert published is not None and live.error is None, live.error
    return published


def _vote_times(recorder: Any, n: int) -> list[float]:
    from tests.records import battle, vote

    times = []
    for _ in range(n):
        event = vote("rightvote", battle("ember-7b", "falcon-7b"))
        started = time.perf_counter()
        recorder.vote(event)
        times.append(time.perf_counter() - started)
    return times


def _old(logs: Path, tree: Path) -> dict[str, Any]:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "webui.leaderboard", str(logs)], cwd=tree, check=True, capture_output=True)
    return {"wall_s": time.perf_counter() - started}


def tables(rows: list[dict[str, Any]]) -> list[Table]:
    per_s = number(0)
    return [
        Table(
            "Index and board by number of votes (2-core machine; each step a fresh process)",
            [
                Column("votes", "votes", lambda v: f"{v:,}"),
                Column("log_bytes", "logs", mib),
                Column("index_s", "index cold", seconds),
                Column("index_votes_per_s", "votes/s", per_s),
                Column("index_rss", "index peak", mib),
                Column("index_cpu_us_per_vote", "index CPU µs/vote (all processes)", number(0)),
                Column("index_bytes", "index size", mib),
                Column("board_first_s", "board, rows from SQLite", seconds),
                Column("board_s", "board, columnar copy", seconds),
                Column("load_s", "of which loading", seconds),
                Column("board_rss", "board peak", mib),
                Column("old_s", "old: board from the logs", seconds),
                Column("old_rss", "old peak", mib),
            ],
            rows,
        ),
        Table(
            "A new vote",
            [
                Column("votes", "votes", lambda v: f"{v:,}"),
                Column("vote_to_board_s", "recorded to on the board", seconds),
                Column("add_s", "a vote added to the board (tally)", seconds),
                Column("catch_up_s", "the index's catch-up in it", seconds),
                Column("full_rebuild_s", "a full build (now in between)", seconds),
                Column("record_ms", "recording a vote (fsync)", number(2)),
                Column("record_nudged_ms", "with the board's nudge", number(2)),
            ],
            rows,
            notes=["recording times in ms, median of 20"],
        ),
    ]


if __name__ == "__main__":
    sys.exit(main())

"""The vote index on SQLite and on PostgreSQL, side by side: `python -m bench.tier.vote_store`.

    python -m bench.tier.vote_store --votes 20000 --rounds 2

Simulated logs (`webui.leaderboard.simulate`, kept in --work), then, in turn for each store and
round: a cold `VoteIndex.catch_up` into a fresh store (votes/s) and every row read back
(`IndexReader.fetch`, without the columnar copy). PostgreSQL is a throwaway server started in a
temporary folder by tests/postgres.py (the Debian binaries; scripts/install-postgres.sh), on the
same machine, over TCP on 127.0.0.1, with fsync off as in the tests. Figures, never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.report import load_average


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tier.vote_store", description=__doc__.split("\n")[0])
    parser.add_argument("--votes", type=int, default=20_000, help="simulated votes; default 20000")
    parser.add_argument("--rounds", type=int, default=2, help="cold indexes per store, taken in turn; default 2")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-vote-store"))
    args = parser.parse_args(argv)
    from tests.postgres import remove_server, start_server
    from webui.leaderboard.simulate import simulate

    logs = args.work / str(args.votes)
    if not (logs / "truth.json").exists():
        simulate(logs, args.votes)
    server = start_server()
    print(json.dumps({"load_average_before": load_average()}))
    try:
        for round_ in range(args.rounds):
            for store in ("sqlite", "postgresql"):
                target = server.new_database() if store == "postgresql" else ""
                busy = (lambda: server_cpu(server.folder)) if target else (lambda: 0.0)
                result = cold_index(logs, args.work, target, busy)
                print(json.dumps({"store": store, "round": round_, **result}), flush=True)
    finally:
        remove_server(server)
    print(json.dumps({"load_average_after": load_average()}))
    return 0


def server_cpu(folder: Path) -> float:
    """CPU seconds of the PostgreSQL server's processes so far (its postmaster and backends)."""
    import psutil

    main = psutil.Process(int((folder / "data" / "postmaster.pid").read_text().split()[0]))
    return sum(sum(p.cpu_times()[:2]) for p in [main, *main.children(recursive=True)])


def cold_index(logs: Path, work: Path, database: str, server_busy: Callable[[], float]) -> dict[str, Any]:
    from webui.leaderboard.votes.index import VoteIndex

    path = work / "index.sqlite3"
    for leftover in work.glob("index.sqlite3*"):
        leftover.unlink()
    index = VoteIndex(logs, path, database=database, server="bench" if database else "")
    try:
        started, cpu, server_before = time.perf_counter(), os.times(), server_busy()
        report = index.catch_up()
        indexed, cpu_after, server_after = time.perf_counter(), os.times(), server_busy()
        rows = index.reader.fetch(0)
        loaded = time.perf_counter()
    finally:
        index.close()
    return {
        "votes": report.votes,
        "index_s": round(indexed - started, 3),
        "votes_per_s": round(report.votes / (indexed - started)),
        "index_cpu_s": round(cpu_after.user + cpu_after.system - cpu.user - cpu.system, 3),
        "server_cpu_s": round(server_after - server_before, 3),
        "rows": len(rows),
        "read_rows_s": round(loaded - indexed, 3),
    }


if __name__ == "__main__":
    raise SystemExit(main())

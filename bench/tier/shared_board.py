"""What storing the shared board costs: `python -m bench.tier.shared_board`.

    python -m bench.tier.shared_board --votes 20000 200000 --rounds 3

For each size: simulated logs (`webui.leaderboard.simulate`, kept in --work), indexed, the board
built once (options as the app's defaults), then, best of --rounds, CPU time of what the builder
and each reader of a shared board do (webui.leaderboard.board.codec): the battle rows encoded (once
per full build) and decoded (once per full build, by each reader); the tables encoded (every
published version) and decoded (each reader, every version); and, for comparison, the whole board
pickled and compressed as the stored board was before (zlib level 1) and loaded back. Sizes in
bytes as stored. Figures, never asserts.
"""

from __future__ import annotations

import argparse
import json
import pickle
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.report import load_average


def best_cpu_s(work: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    """The least process CPU time of `rounds` calls, and the last result."""
    times, result = [], None
    for _ in range(rounds):
        started = time.process_time()
        result = work()
        times.append(time.process_time() - started)
    return min(times), result


def measure(votes: int, work: Path, rounds: int) -> dict[str, Any]:
    from webui.leaderboard.board import codec
    from webui.leaderboard.board.build import BoardOptions, board_from_rows
    from webui.leaderboard.simulate import simulate
    from webui.leaderboard.votes.index import VoteIndex

    logs = work / str(votes)
    if not (logs / "truth.json").exists():
        simulate(logs, votes)
    with tempfile.TemporaryDirectory() as folder:
        index = VoteIndex(logs, Path(folder) / "index.sqlite3")
        index.catch_up()
        board = board_from_rows(index.rows(), BoardOptions(), index.skipped_lines())
        index.close()
    rows_s, rows = best_cpu_s(lambda: codec.encode_rows(board), rounds)
    tables_s, tables = best_cpu_s(lambda: codec.encode_rest(board), rounds)
    read_rows_s, frames = best_cpu_s(lambda: codec.decode_rows(rows), rounds)
    read_tables_s, _ = best_cpu_s(lambda: codec.decode(tables, frames), rounds)
    pickle_s, pickled = best_cpu_s(
        lambda: zlib.compress(pickle.dumps(board, protocol=pickle.HIGHEST_PROTOCOL), 1), rounds
    )
    unpickle_s, _ = best_cpu_s(lambda: pickle.loads(zlib.decompress(pickled)), rounds)
    return {
        "votes": votes,
        "rows_bytes": len(rows),
        "tables_bytes": len(tables),
        "pickled_bytes": len(pickled),
        "builder_rows_s": rows_s,
        "builder_tables_s": tables_s,
        "reader_rows_s": read_rows_s,
        "reader_tables_s": read_tables_s,
        "pickle_s": pickle_s,
        "unpickle_s": unpickle_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tier.shared_board", description=__doc__.split("\n")[0])
    parser.add_argument("--votes", type=int, nargs="+", default=[20_000, 200_000], help="simulated votes, per size")
    parser.add_argument("--rounds", type=int, default=3, help="timings per step, best kept; default 3")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-shared-board"))
    args = parser.parse_args(argv)
    print(json.dumps({"load_average_before": load_average()}), flush=True)
    for votes in args.votes:
        print(json.dumps(measure(votes, args.work, args.rounds)), flush=True)
    print(json.dumps({"load_average_after": load_average()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

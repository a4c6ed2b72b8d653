"""What the board's tally costs with and without style control: `python -m bench.votes.style_tally`.

    python -m bench.votes.style_tally --sizes 20000,200000 [--work /tmp/bench-style-tally]

For each size: simulated logs (`webui.leaderboard.simulate`, kept in --work between runs) and their
vote index; the board built in full on all but the last 20 rows, then, with style on and off: the
tally made from it (`Tally.of`, once per full build) and each of the last rows added alone
(`Tally.add`, median of 20, the published board included). Figures, never asserts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.report import load_average, machine_info

LAST = 20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.votes.style_tally", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="20000,200000", help="simulated votes per run, comma-separated")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-style-tally"))
    args = parser.parse_args(argv)
    rows = [measure(int(n), args.work) for n in args.sizes.split(",")]
    print(json.dumps({"meta": {**machine_info("cpu"), "load_average": load_average()}, "rows": rows}, indent=2))
    return 0


def measure(votes: int, work: Path) -> dict[str, Any]:
    from webui.leaderboard.board.build import BoardOptions, board_from_rows
    from webui.leaderboard.board.tally import Tally
    from webui.leaderboard.simulate import simulate
    from webui.leaderboard.votes.index import VoteIndex

    logs = work / f"logs-{votes}"
    if not logs.exists():
        simulate(logs, votes)
    index = VoteIndex(logs)
    index.catch_up()
    rows = index.rows()
    result: dict[str, Any] = {"votes": len(rows)}
    for style in (False, True):
        options = BoardOptions(style=style)
        started = time.perf_counter()
        board = board_from_rows(rows.iloc[:-LAST], options)
        built = time.perf_counter()
        tally = Tally.of(board)
        made = time.perf_counter()
        adds = []
        for i in range(len(rows) - LAST, len(rows)):
            before = time.perf_counter()
            assert tally.add(rows.iloc[i : i + 1]) is not None, "declined"
            adds.append(time.perf_counter() - before)
        key = "style" if style else "plain"
        result |= {
            f"{key}_build_s": built - started,
            f"{key}_of_s": made - built,
            f"{key}_add_s": statistics.median(adds),
        }
    return result


if __name__ == "__main__":
    sys.exit(main())

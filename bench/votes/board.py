"""The leaderboard's board from a battles table: time and peak memory at 20k, 200k and 1M votes.

    python -m bench.votes.board                        # this tree, 20k / 200k / 1M
    python -m bench.votes.board --old 4817e92          # and the code of a commit beside it
    python -m bench.votes.board --sizes 20000 --json out.json

Measures `webui.leaderboard.board.build.board_from_battles` with the default options (200 bootstrap
rounds, style control, 20 history points), the vote index's part already done: the rows are a
synthetic battles table shaped like `VoteIndex.rows()` (10 models of known strength, a style
effect, ties, 1% identity leaks and errors, 5% named votes, one voter per ~300 votes, seven
languages), made in the measuring process so that nothing else is in it. Each measurement is a
fresh Python process: wall time of the board alone, and the process's peak RSS (which includes
the table itself, shown apart). `--old REV` runs the same measurement on `git archive REV webui`
(by default only up to 200k votes: the old board needs minutes at 1M). Not wired into the test
suite and asserts nothing: docs/performance.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.report import ROOT, Column, Table, mib, number, seconds, text, to_markdown

MARK = "BENCH-BOARD "
SIZES = (20_000, 200_000, 1_000_000)
MODELS = {
    "granite-3-8b": 1120.0,
    "command-r": 1070.0,
    "solar-10.7b": 1030.0,
    "ember-7b": 1000.0,
    "verbose-7b": 1000.0,
    "nous-hermes-2": 970.0,
    "falcon-7b": 940.0,
    "late-7b": 1050.0,
    "SmolLM2-135M-Instruct": 870.0,
    "rare-1b": 700.0,
}
LANGUAGES = ("English", "Chinese", "Spanish", "French", "German", "Russian", "Japanese")
LANGUAGE_SHARE = (0.62, 0.1, 0.08, 0.06, 0.06, 0.05, 0.03)


def synthetic_rows(n: int, seed: int = 0) -> pd.DataFrame:
    """A battles table of `n` votes with the columns of `VoteIndex.rows()` that the board reads."""
    rng = np.random.default_rng(seed)
    names = np.array(list(MODELS))
    weights = np.ones(len(names))
    weights[-1] = 1e-5  # rare-1b: a handful of battles (preliminary)
    a = rng.choice(len(names), n, p=weights / weights.sum())
    b = (a + rng.integers(1, len(names), n)) % len(names)
    length = np.where(names == "verbose-7b", 400, 100)
    la, lb = (np.floor(length[s] * rng.lognormal(0, 0.7, n)) + 1 for s in (a, b))
    strength = np.array(list(MODELS.values())) * np.log(10) / 400
    p_a = 1 / (1 + np.exp(-(strength[a] - strength[b] + 1.2 * (la - lb) / (la + lb))))
    draw = rng.random(n)
    winner = np.where(draw < 0.15, "tie", np.where(rng.random(n) < p_a, "model_a", "model_b"))
    frame = pd.DataFrame(
        {
            "tstamp": 1_767_225_600.0 + np.sort(rng.random(n)) * 86400 * max(10, n // 20_000),
            "model_a": names[a],
            "model_b": names[b],
            "winner": winner,
            "anony": rng.random(n) > 0.05,
            "turn": 1 + (rng.random(n) < 0.1),
            "language": np.array(LANGUAGES)[rng.choice(len(LANGUAGES), n, p=LANGUAGE_SHARE)],
            "voter": np.char.add("h:", rng.integers(0, max(1, n // 300), n).astype(str)),
            "base_reason": None,
            "leak": rng.random(n) < 0.01,
            "error": rng.random(n) < 0.01,
            "stopped": rng.random(n) < 0.01,
            "coding": rng.random(n) < 0.12,
            "long_prompt": rng.random(n) < 0.05,
        }
    )
    frame["session"] = frame["voter"]
    for side, words in (("a", la), ("b", lb)):
        frame[f"length_{side}"] = words.astype(np.int64)
        for feature in ("headers", "bold", "lists"):
            frame[f"{feature}_{side}"] = rng.poisson(1.0, n)
    return frame.astype(dict.fromkeys(("model_a", "model_b", "winner", "language", "voter", "session"), "str"))


def child(n: int) -> dict[str, Any]:
    """Measure in this process (a fresh one): the board of `n` synthetic votes."""
    from webui.leaderboard.board.build import BoardOptions, board_from_battles
    from webui.leaderboard.votes.rows import drop_reasons

    rows = synthetic_rows(n)
    rows["drop_reason"] = drop_reasons(rows, True)
    rss_rows = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    started = time.perf_counter()
    board = board_from_battles(rows, BoardOptions())
    elapsed = time.perf_counter() - started
    return {
        "votes": n,
        "counted": len(board.counted),
        "seconds": elapsed,
        "rss_rows": rss_rows,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "top": board.table["model"].iloc[0],
    }


def measure(n: int, code_root: Path | None, timeout: float) -> dict[str, Any]:
    """`child(n)` in a fresh process, on this tree's webui or on the one under `code_root`."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in (code_root, ROOT) if p))
    cwd = code_root or ROOT
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench.votes.board", "--child", str(n)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"votes": n, "error": f"over {timeout:.0f} s"}
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    return {"votes": n, "error": (done.stderr.strip().splitlines() or ["no result"])[-1]}


def old_tree(rev: str, into: Path) -> Path:
    """The webui package of commit `rev`, unpacked under `into`."""
    archive = subprocess.run(["git", "archive", rev, "webui"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def table(results: list[dict[str, Any]]) -> Table:
    columns = [
        Column("code", "code"),
        Column("votes", "votes", number(0)),
        Column("seconds", "board", seconds),
        Column("peak_rss", "peak RSS", mib),
        Column("rss_rows", "RSS with the table only", mib),
        Column("error", "note", text),
    ]
    return Table(
        "Leaderboard board from a battles table (default options)",
        columns,
        results,
        ["one fresh process per row; peak RSS includes the battles table (next column)"],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.votes.board", description=__doc__.splitlines()[0])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated vote counts")
    parser.add_argument("--old", metavar="REV", help="also measure the webui of this commit")
    parser.add_argument("--old-max", type=int, default=200_000, help="largest size measured on --old (default 200000)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per measurement")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    if args.child is not None:
        print(MARK + json.dumps(child(args.child)), flush=True)
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-board-") as tmp:
        old = old_tree(args.old, Path(tmp)) if args.old else None
        for n in sizes:
            results.append({"code": "this tree", **measure(n, None, args.timeout)})
            if old is not None and n <= args.old_max:
                results.append({"code": args.old, **measure(n, old, args.timeout)})
            print(results[-1], file=sys.stderr, flush=True)
    print(to_markdown(table(results)))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

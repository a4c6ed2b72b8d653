"""What each compiled module is worth to a cold vote index: `python -m bench.votes.compiled_steps`.

    python -m bench.votes.compiled_steps --votes 1000000          # logs simulated into --work if missing
    python -m bench.votes.compiled_steps --votes 200000 --rounds 2

For one simulated log of current-format votes (features and identity check written with each
vote, as the app writes them: webui.leaderboard.simulate), a cold `VoteIndex.catch_up` in a fresh
process (bench.votes.scale's `index` step) with every compiled module, then without each one in turn,
then with none: the module is made unimportable for that process and its workers (a
`sitecustomize` on PYTHONPATH refuses it), so the index runs the Python fallback a build without a
compiler runs. Last, the same votes without the keys written with them (as older logs and
FastChat's hold), every module built and none: what counting once at write time saves, and what
such logs lose without the modules. Rounds alternate the
variants, so a shared machine's load falls on all of them alike. Also what counting the features
adds to writing a vote (`vote_record` with and without them, median of 2,000), with every module
and with none.

Writes bench/results/compiled-steps-cpu.json and .md. Figures, never asserts.

Measured with four modules (2026-11-29, 1M votes): without `_rows` a cold index took 40% more CPU
per vote; without `_tokens`, `_counts` or `_language` (the identity check's token scan, the word
count, the language detector's ASCII path) it took within the noise of every module, as the index
now reads the features written with each vote. Those three were dropped (docs/performance.md,
"Features once, when the vote is written"): MODULES keeps `_rows`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.report import ROOT, Column, Table, load_average, machine_info, mib, number, seconds, to_markdown

# The compiled modules a cold index can use (setup.py); the board's online Elo is not one of them.
MODULES = ("webui.leaderboard.votes._rows",)
BLOCKER = '''"""Written by bench.votes.compiled_steps: refuse the modules named in BENCH_WITHOUT, as if not built."""
import os
import sys

_WITHOUT = frozenset(filter(None, os.environ.get("BENCH_WITHOUT", "").split(",")))


class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name in _WITHOUT:
            raise ImportError(f"{name}: left out by bench.votes.compiled_steps")
        return None


sys.meta_path.insert(0, _Refuse())
'''


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.votes.compiled_steps", description=__doc__.split("\n")[0])
    parser.add_argument("--votes", type=int, default=1_000_000, help="simulated votes; default 1,000,000")
    parser.add_argument("--rounds", type=int, default=1, help="times each variant runs; default 1")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-votes"), help="where logs and indexes go")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "compiled-steps-cpu.json")
    parser.add_argument("--recording-only", action="store_true", help=argparse.SUPPRESS)  # internal: a child
    args = parser.parse_args(argv)
    if args.recording_only:
        print(json.dumps(_recording()))
        return 0
    logs = args.work / str(args.votes)
    if not (logs / "truth.json").exists():
        _bench_votes(os.environ, "simulate", str(logs), str(args.votes))
    bare = args.work / f"{args.votes}-bare"
    if not (bare / "done").exists():
        _strip(logs, bare)
    variants = [("every module", (), logs)]
    if len(MODULES) > 1:  # with one module, "without" it is "none"
        variants += [(f"without {m.rpartition('.')[2]}", (m,), logs) for m in MODULES]
    variants += [("none", MODULES, logs), ("every module, logs without the written keys", (), bare)]
    variants += [("none, logs without the written keys", MODULES, bare)]  # what older logs lose without them
    rows: dict[str, dict[str, Any]] = {name: {"variant": name, "runs": []} for name, _, _ in variants}
    with tempfile.TemporaryDirectory() as blocker:
        Path(blocker, "sitecustomize.py").write_text(BLOCKER)
        for _ in range(args.rounds):
            for name, without, folder in variants:
                run = _cold_index(_without(blocker, without), folder, args.work / "compiled-steps.sqlite3", args.votes)
                rows[name]["runs"].append(run)
                print(json.dumps({"variant": name, **run}), flush=True)
        recording = {
            name: _recorded(_without(blocker, without)) for name, without in (("every", ()), ("none", MODULES))
        }
    table_rows = [_summary(row) for row in rows.values()]
    results = {
        "meta": {**machine_info("cpu"), "load_average": load_average(), "votes": args.votes},
        "rows": table_rows,
        "recording": recording,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    markdown = to_markdown(table(table_rows, args.votes)) + "\n\n" + _recording_line(results["recording"])
    args.out.with_suffix(".md").write_text(markdown + "\n")
    print(markdown)
    return 0


def _without(blocker: str, modules: tuple[str, ...]) -> dict[str, str]:
    """The environment of a child that cannot import `modules` (BLOCKER, from the folder `blocker`)."""
    env = {**os.environ, "BENCH_WITHOUT": ",".join(modules)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (blocker, str(ROOT), env.get("PYTHONPATH"))))
    return env


def _recorded(env: dict[str, str]) -> dict[str, float]:
    """`_recording` in a fresh interpreter with `env`."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.votes.compiled_steps", "--recording-only"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=env,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _bench_votes(env: Any, *step: str) -> dict[str, Any]:
    """bench.votes.scale's step in a fresh interpreter with `env`: its result, wall time and peak memory."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bench.votes.scale", *step],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"step {step[0]} failed: {done.stderr[-2000:]}")
    return {"wall_s": time.perf_counter() - started, **json.loads(done.stdout.strip().splitlines()[-1])}


def _cold_index(env: dict[str, str], logs: Path, index: Path, votes: int) -> dict[str, Any]:
    for leftover in index.parent.glob(index.name + "*"):
        leftover.unlink()
    found = _bench_votes(env, "index", str(logs), str(index))
    return {
        "wall_s": found["wall_s"],
        "votes_per_s": votes / found["wall_s"],
        "cpu_us_per_vote": (found["cpu_main_s"] + found["cpu_workers_s"]) / votes * 1e6,
        "cpu_main_s": found["cpu_main_s"],
        "cpu_workers_s": found["cpu_workers_s"],
        "rss": found["rss"],
    }


def _strip(source: Path, target: Path) -> None:
    """The log files of `source` without "features" and the word list's version, as older logs."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.glob("*-conv.json")):
        with path.open() as lines, (target / path.name).open("w") as out:
            for line in lines:
                record = json.loads(line)
                record.pop("features", None)
                if isinstance(record.get("hygiene"), dict):
                    record["hygiene"].pop("identity_words", None)
                out.write(json.dumps(record) + "\n")
    (target / "done").write_text("")


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    runs = row["runs"]
    out: dict[str, Any] = {"variant": row["variant"], "runs": runs}
    for key in ("wall_s", "votes_per_s", "cpu_us_per_vote", "cpu_main_s", "cpu_workers_s", "rss"):
        out[key] = statistics.median(run[key] for run in runs)
    out["best_votes_per_s"] = max(run["votes_per_s"] for run in runs)
    return out


def table(rows: list[dict[str, Any]], votes: int) -> Table:
    return Table(
        f"Cold index of {votes:,} current-format votes, by compiled module (medians over the rounds)",
        [
            Column("variant", "compiled modules"),
            Column("wall_s", "index cold", seconds),
            Column("votes_per_s", "votes/s", number(0)),
            Column("best_votes_per_s", "best votes/s", number(0)),
            Column("cpu_us_per_vote", "CPU µs per vote, all processes", number(1)),
            Column("cpu_main_s", "main CPU s", number(2)),
            Column("cpu_workers_s", "workers CPU s", number(2)),
            Column("rss", "peak", mib),
        ],
        rows,
    )


def _recording() -> dict[str, float]:
    """Microseconds to build a battle vote record (`vote_record`, no disk), median of 2,000: with the
    features counted and without."""
    import numpy as np

    from tests.records import battle, vote
    from webui.leaderboard.simulate import _reply
    from webui.leaderboard.votes.rows import vote_features
    from webui.records.identity import identity_words
    from webui.records.privacy import IdentityPolicy
    from webui.records.storage import VoteContext, vote_record

    rng = np.random.default_rng(0)
    words = identity_words(["ember-7b", "verbose-7b"])
    event = vote(
        "leftvote", battle("ember-7b", "verbose-7b", (_reply(rng, "ember-7b", False), _reply(rng, "verbose-7b", False)))
    )
    found = {}
    for name, counted in (("without_features_us", None), ("with_features_us", vote_features)):
        ctx = VoteContext(lambda conv: [], words, features=counted)
        times = []
        for _ in range(2000):
            started = time.perf_counter()
            vote_record(event, IdentityPolicy("none"), 1_767_225_600.0, ctx)
            times.append((time.perf_counter() - started) * 1e6)
        found[name] = statistics.median(times)
    return found


def _recording_line(recording: dict[str, dict[str, float]]) -> str:
    every, none = recording["every"], recording["none"]
    return (
        f"Building a battle vote record (no disk; median of 2,000): every module built "
        f"{every['without_features_us']:.0f} µs without the features, {every['with_features_us']:.0f} µs with "
        f"them; none built {none['without_features_us']:.0f} and {none['with_features_us']:.0f} µs."
    )


if __name__ == "__main__":
    sys.exit(main())

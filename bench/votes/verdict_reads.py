"""What reading a judge's verdicts costs: every line of the judge files, as the agreement figures,
the composite board and a judging run's "judged already" read them: `python -m bench.votes.verdict_reads`.

    python -m bench.votes.verdict_reads                          # 21,600 simulated battles (~20,000 verdicts)
    python -m bench.votes.verdict_reads --battles 200000 --answer-chars 0

Makes a simulated log (webui.leaderboard.simulate) and a simulated judge's verdicts on it
(webui.judge.simulate, accuracy 0.7) in a temporary folder; with `--answer-chars N` each order's
answer is first given N characters of reasoning, as a real judge writes (the simulated one answers
"[[A]]" alone: its files are the smallest a verdict can be). Then, each the median of `--repeats`:
every verdict line read and tabulated (`verdict_table(read_verdicts(...))`, what `--agreement`,
`--composite` and the Leaderboard tab's Agreement section do first), and the votes one judge has
answered with one prompt (`judged`, what a judging run does first). It decides whether verdicts
need an index of their own (docs/performance.md). Figures, never asserts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from webui.judge.calibration import verdict_table
from webui.judge.records import judge_files, judged, read_verdicts
from webui.judge.simulate import PROMPT_VERSION, simulate_verdicts
from webui.leaderboard.simulate import simulate

REASONING = "The first reply answers the question directly and gives a correct example; the second wanders. "


def timed(call: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """(median seconds, the last result) of `repeats` calls."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def with_reasoning(folder: Path, chars: int) -> None:
    """Each order's answer preceded by `chars` characters of reasoning, the files rewritten."""
    text = (REASONING * (chars // len(REASONING) + 1))[:chars]
    for path in judge_files(folder):
        lines = []
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            for order in record["orders"]:
                order["answer"] = text + order["answer"]
            lines.append(json.dumps(record))
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def measure(folder: Path, repeats: int) -> dict[str, float]:
    table_s, table = timed(lambda: verdict_table(read_verdicts(folder)), repeats)
    judged_s, _ = timed(lambda: judged(folder, "sim-judge", PROMPT_VERSION), repeats)
    size = sum(p.stat().st_size for p in judge_files(folder))
    return {"verdicts": float(len(table)), "judge_file_mb": size / 1e6, "table_s": table_s, "judged_s": judged_s}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.votes.verdict_reads", description=__doc__.split("\n")[0])
    parser.add_argument("--battles", type=int, default=21_600, help="simulated battle votes; default 21600")
    parser.add_argument("--answer-chars", type=int, default=1200, help="reasoning per answer; default 1200")
    parser.add_argument("--repeats", type=int, default=5, help="timings per figure (the median); default 5")
    args = parser.parse_args(argv)
    if args.battles < 1 or args.answer_chars < 0 or args.repeats < 1:
        print("error: --battles and --repeats must be at least 1, --answer-chars at least 0", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-verdicts-") as folder:
        logs = Path(folder)
        simulate(logs, args.battles)
        simulate_verdicts(logs, 0.7, seed=0)
        rows = []
        for chars in dict.fromkeys((0, args.answer_chars)):
            if chars:
                with_reasoning(logs, chars)
            rows.append((chars, measure(logs, args.repeats)))
    print("| answer chars | verdicts | judge files | read and tabulate every line | the votes one judge answered |")
    print("|---|---|---|---|---|")
    for chars, f in rows:
        print(
            f"| {chars:,} | {f['verdicts']:,.0f} | {f['judge_file_mb']:.0f} MB | {f['table_s']:.2f} s | "
            f"{f['judged_s']:.2f} s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

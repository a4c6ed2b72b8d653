"""The bench within a short device lease (docs/performance.md, "On a GPU"): `python -m bench`'s own
sections, with counts sized to a few minutes and overhead first, since the lease may end before
the last section (the JSON is written after every section either way).

    python -m bench.serving.lease MODELS_FILE OUT_JSON            # overhead, ttft, panes, users, memory, coldstart
    python -m bench.serving.lease MODELS_FILE OUT_JSON --part2    # users (1-8 chats, 32 tokens), memory, coldstart
    python -m bench.serving.lease MODELS_FILE OUT_JSON --batching # users (1, 4, 16 chats) on continuous batching
    python -m bench.serving.lease MODELS_FILE OUT_JSON --quick    # small counts: checks the harness (CPU, tiny models)

--batching is issue 34's GPU measurement: the app's transformers models on continuous batching
(`ARENA_TRANSFORMERS_BATCHING=on` for the app the bench starts), many users only, 16 chats
included, so that it fits one lease beside a warm-up that captures CUDA graphs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import bench.__main__ as cli
from bench.report import load_average, machine_info
from bench.serving.config import BenchConfig

ORDER = ("overhead", "ttft", "panes", "users", "memory", "coldstart")
PART2 = ("users", "memory", "coldstart")
BATCHING: dict[str, Any] = {"users_levels": (1, 4, 16), "users_tokens": 64, "users_repeats": 2}
FULL: dict[str, Any] = {
    "overhead_tokens": 128,
    "overhead_repeats": 3,
    "ttft_tokens": 4,
    "ttft_repeats": 5,
    "panes_tokens": 64,
    "panes_repeats": 2,
    "users_levels": (1, 2, 4, 8, 16),
    "users_tokens": 48,
    "users_repeats": 1,
}
QUICK: dict[str, Any] = {
    "overhead_tokens": 24,
    "overhead_repeats": 2,
    "ttft_tokens": 4,
    "ttft_repeats": 2,
    "panes_tokens": 16,
    "panes_repeats": 1,
    "users_levels": (1, 2, 4),
    "users_tokens": 12,
    "users_repeats": 1,
}


def config_for(models_file: Path, quick: bool, part2: bool, batching: bool = False) -> BenchConfig:
    counts = dict(QUICK if quick else FULL)
    if part2:
        counts.update(users_levels=(1, 2, 4, 8), users_tokens=32)
    if batching:
        counts.update(BATCHING if not quick else {"users_levels": (1, 4), "users_tokens": 12})
    preset = "gpu-quick" if quick else "gpu-part2" if part2 else "gpu"
    preset += "-batching" if batching else ""
    # coldstart_cold off: the models are folders, there is nothing to dequantise
    return BenchConfig(
        preset=preset,
        models_file=models_file,
        device="auto",
        sections=("users",) if batching else PART2 if part2 else ORDER,
        users_path="api",
        coldstart_cold=False,
        coldstart_timeout_s=240.0,
        server_timeout_s=240.0,
        **counts,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.serving.lease", description=__doc__.split("\n\n")[0])
    parser.add_argument("models", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--part2", action="store_true")
    parser.add_argument("--batching", action="store_true", help="users only, on transformers' continuous batching")
    args = parser.parse_args(argv)
    config = config_for(args.models.resolve(), args.quick, args.part2, args.batching)
    if args.batching:
        os.environ["ARENA_TRANSFORMERS_BATCHING"] = "on"  # the app the bench starts inherits it
    cli.RUN_ORDER = config.sections  # run_sections follows RUN_ORDER; here, the order given
    meta = {**machine_info(config.device), "preset": config.preset}
    meta["device"] = "cuda" if meta.get("gpu") else "cpu"
    out = args.out.resolve()
    started = time.perf_counter()
    results = cli.run_sections(config, meta, out)
    meta.update(load_average_after=load_average(), duration_s=round(time.perf_counter() - started, 1))
    cli.write_json(results, out)
    markdown = cli.render(results)
    out.with_suffix(".md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return 1 if any("failed" in s for s in results["sections"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())

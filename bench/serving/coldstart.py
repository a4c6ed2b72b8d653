"""5. Cold start: launch (`python app.py`) to page served, and to each model ready.

Twice in the full preset: first with an empty weights cache (a temporary --cache-dir: every GGUF
model is dequantised and written to the cache), then again with the cache that launch just wrote.
--quick launches once, with the user's own cache, and says whether it was warm. Models load one
after another in one background thread, so the second model's time includes the first's.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from bench.report import Column, Table, seconds, text
from bench.serving.context import BenchContext
from bench.serving.server import ArenaProcess

_READY = re.compile(r"webui\.engine\.registry: (.+) ready on (\S+) in ([\d.]+) s")


def run(ctx: BenchContext) -> dict[str, Any]:
    cfg = ctx.config
    runs: dict[str, Any] = {}
    if cfg.coldstart_cold:
        cache = ctx.workdir / "coldstart-cache"
        shutil.rmtree(cache, ignore_errors=True)
        try:
            runs["empty cache"] = launch_once(ctx, "cold", cache)
            runs["warm cache"] = launch_once(ctx, "warm", cache)
        finally:
            shutil.rmtree(cache, ignore_errors=True)  # a second copy of every model's weights
    else:
        runs["user's cache"] = launch_once(ctx, "user", None)
    return {"runs": runs, "models": [e["name"] for e in ctx.entries]}


def launch_once(ctx: BenchContext, label: str, cache_dir: Path | None) -> dict[str, Any]:
    cache = cache_dir if cache_dir is not None else _default_cache()
    before = cached_models(cache)
    proc = ArenaProcess(ctx.models_file, ctx.workdir / f"coldstart-{label}", cache_dir=cache_dir)
    proc.start()
    try:
        launch = proc.wait(ctx.config.coldstart_timeout_s)
    finally:
        proc.stop()
    return {
        "page_s": launch.page_s,
        "healthz_s": launch.healthz_s,
        "models": launch.models,
        "load_s": load_times(proc.log_path.read_text(errors="replace")),
        "cache_dir": str(cache),
        "cached_before": before,
        "cached_after": cached_models(cache),
    }


def cached_models(cache_dir: Path) -> int:
    """Complete entries in the dequantised-weights cache (webui.models.loading's layout)."""
    return sum(1 for _ in (cache_dir / "dequantised").glob("*/.complete"))


def load_times(log: str) -> dict[str, float]:
    """The registry's own load time per model ("NAME ready on DEVICE in X s" in the server log)."""
    return {m.group(1): float(m.group(3)) for m in _READY.finditer(log)}


def _default_cache() -> Path:
    from webui.config import Settings

    return Settings().cache_dir


def tables(result: dict[str, Any]) -> list[Table]:
    rows = []
    for label, run_ in result["runs"].items():
        warmth = "cold (filled by this launch)" if run_["cached_after"] > run_["cached_before"] else "warm"
        rows.append({"run": label, "what": "page served (GET / = 200)", "s": run_["page_s"], "cache": warmth})
        for name, info in run_["models"].items():
            state = info["state"] if info["state"] != "ready" else None
            rows.append(
                {
                    "run": label,
                    "what": f"{name} ready",
                    "s": info["s"],
                    "load": run_["load_s"].get(name),
                    "cache": warmth,
                    "state": state and f"{state}: {info.get('reason')}",
                }
            )
    columns = [
        Column("run", "launch"),
        Column("what", "milestone"),
        Column("s", "since launch", seconds),
        Column("load", "registry load time", seconds),
        Column("cache", "weights cache", text),
        Column("state", "problem", text),
    ]
    notes = [
        "Since launch = from starting `python app.py` to the first answer showing the milestone (polled every 0.1 s).",
        "Registry load time = the model's own load, from the server log; two at a time by default (--load-parallel), so they overlap.",
    ]
    return [Table("5. Cold start: launch to page served and to each model ready", columns, rows, notes)]

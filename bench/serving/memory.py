"""6. Memory: resident memory per loaded model, and two variants of one set of weights.

Each measurement runs in a fresh Python process (`python -m bench.serving.memory --child ...`) so that
nothing loaded earlier is counted: RSS after the imports, then after each model the registry
loads. The variants case loads two models-file entries sharing one source; the second should add
next to nothing. RSS is read after a first short reply, once the memory-mapped weights are in. `weights` is the size of the parameters themselves, the floor for any loader.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.report import ROOT, Column, Table, mib, number, text
from bench.serving import models
from bench.serving.context import BenchContext

MARK = "BENCH-MEMORY "


def run(ctx: BenchContext) -> dict[str, Any]:
    if not ctx.local_names:
        return {"skipped": "no local model in the models file"}
    result: dict[str, Any] = {"models": {}}
    for name in ctx.local_names:
        result["models"][name] = child(ctx.models_file, [name])
    first = next(e for e in ctx.entries if e["name"] == ctx.local_names[0])
    pair = models.variants(first)
    path = models.write(pair, ctx.workdir / "variants.yaml")
    result["variants"] = child(path, [e["name"] for e in pair])
    return result


def child(models_file: Path, names: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.serving.memory", "--child", str(models_file), *names]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    raise RuntimeError(f"memory child failed ({done.returncode}):\n{done.stderr[-3000:]}")


# ---- in the child process ---------------------------------------------------------------------------
def measure(models_file: Path, names: list[str]) -> dict[str, Any]:
    import psutil
    import torch
    import transformers  # noqa: F401 - imported before the baseline: the imports are not the model

    import webui.engine.transformers  # before the baseline too
    import webui.models.loading  # noqa: F401
    from webui.config import Settings
    from webui.engine.registry import build_registry

    registry = build_registry(Settings(models_file=models_file, preload=False))
    proc = psutil.Process()
    gc.collect()
    out: dict[str, Any] = {"baseline_rss": proc.memory_info().rss, "steps": []}
    for name in names:
        started = time.perf_counter()
        backend = registry.load(name)
        load_s = time.perf_counter() - started
        gc.collect()
        loaded_rss = proc.memory_info().rss
        _first_reply(backend)
        gc.collect()
        info = proc.memory_full_info()
        status = registry.status(name)
        model = getattr(backend, "model", None)
        out["steps"].append(
            {
                "name": name,
                "rss": info.rss,
                "uss": info.uss,
                "rss_after_load": loaded_rss,
                "load_s": load_s,
                "weights_bytes": weights_bytes(model) if model is not None else folder_weights_bytes(backend),
                "engine_rss": engine_rss(backend),
                "engine": status.engine,
                "from_cache": status.from_cache,
                "device": status.device,
                "gpu_allocated": torch.cuda.memory_allocated() if torch.cuda.is_available() else None,
            }
        )
    registry.close()
    return out


def engine_rss(backend: Any) -> int | None:
    """Resident memory of the engine's own processes (a vLLM server: supervisor, API server, engine
    core, worker), summed; None when the model runs in this process."""
    import psutil

    server = getattr(backend, "server", None)
    if server is None or server.process is None:
        return None
    group = server.process.pid
    total = 0
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == group:
                total += proc.memory_info().rss
        except (psutil.Error, ProcessLookupError):
            continue
    return total


def folder_weights_bytes(backend: Any) -> int:
    """The size of the weights a vLLM server loaded (the safetensors files of its model folder)."""
    folder = Path(backend.server.config.model_dir)
    return sum(f.stat().st_size for f in folder.glob("*.safetensors"))


def _first_reply(backend: Any) -> None:
    """A two-token reply: weights read from the cache are memory-mapped, and only become resident
    once a forward pass touches them, so RSS right after loading understates what serving costs."""
    from webui.engine.base import collect
    from webui.types import Message

    params = backend.default_params().replace(temperature=0.0, max_new_tokens=2)
    collect(backend.stream([Message("user", "Hello")], params))


def weights_bytes(model: Any) -> int:
    """Bytes of parameters and buffers, each storage counted once (tied weights share one)."""
    seen, total = set(), 0
    for tensor in [*model.parameters(), *model.buffers()]:
        key = (tensor.device, tensor.data_ptr())
        if key not in seen:
            seen.add(key)
            total += tensor.numel() * tensor.element_size()
    return total


def tables(result: dict[str, Any]) -> list[Table]:
    if "skipped" in result:
        return [Table("6. Memory", [Column("skipped", "skipped")], [result])]
    rows = []
    for name, r in result["models"].items():
        step = r["steps"][0]
        added = step["rss"] - r["baseline_rss"] + (step.get("engine_rss") or 0)
        rows.append(
            {
                "case": name,
                "added": added,
                "weights": step["weights_bytes"],
                "ratio": added / step["weights_bytes"],
                "engine": step.get("engine_rss"),
                "gpu": step["gpu_allocated"],
                "cache": "yes" if step["from_cache"] else "no",
                "device": step["device"],
                "served": (step.get("engine") or "transformers").split(":")[0],
            }
        )
    v = result["variants"]
    first, second = v["steps"]
    rows.append(
        {
            "case": f"{first['name']} + {second['name']} (one source)",
            "added": second["rss"] - v["baseline_rss"],
            "weights": first["weights_bytes"],
            "ratio": (second["rss"] - v["baseline_rss"]) / first["weights_bytes"],
            "second": second["rss"] - first["rss"],
            "gpu": second["gpu_allocated"],
            "cache": "yes" if first["from_cache"] else "no",
            "device": first["device"],
        }
    )
    columns = [
        Column("case", "loaded"),
        Column("served", "engine", text),
        Column("added", "RSS added", mib),
        Column("engine", "of which engine processes", mib),
        Column("weights", "weights (params)", mib),
        Column("ratio", "RSS ÷ weights", number(2)),
        Column("second", "second variant added", mib),
        Column("gpu", "GPU allocated", mib),
        Column("device", "device", text),
        Column("cache", "from cache", text),
    ]
    notes = [
        "RSS added = resident memory after loading and a first two-token reply, minus after the imports, "
        "in a fresh process per row (cached weights are memory-mapped: they become resident when first used), "
        "plus the engine's own processes when a vLLM server serves the model (its KV cache included: "
        "1 GiB by default on the CPU).",
        "Two variants (same source, another system prompt) should cost one copy: 'second variant added' ≈ 0.",
    ]
    return [Table("6. Memory per loaded model; two variants of one set of weights", columns, rows, notes)]


def _child_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.serving.memory")
    parser.add_argument("--child", type=Path, required=True, help="models file")
    parser.add_argument("names", nargs="+")
    args = parser.parse_args(argv)
    print(MARK + json.dumps(measure(args.child, args.names)), flush=True)


if __name__ == "__main__":
    _child_main(sys.argv[1:])

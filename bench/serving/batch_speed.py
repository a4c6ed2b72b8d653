"""Chats at once on one transformers model, in process (no app, no HTTP): continuous batching
against one generate() per reply, the same greedy requests through the engine's own `stream`. What
a lent GPU without the app's web stack can run (issue 34's GPU goals); on a CPU, the in-process
figures of docs/performance.md.

    python -m bench.serving.batch_speed MODELS_FILE MODEL [--levels 1,4,16] [--tokens 64] [--out OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PROMPT = "Write a long, detailed story about a lighthouse keeper who finds an old map hidden in the wall."


def level(backend: Any, chats: int, tokens: int) -> dict[str, float]:
    """`chats` greedy replies of `tokens` tokens at once: aggregate tokens/s and the slowest reply."""
    from webui.types import Finished, Message, SamplingParams

    greedy = SamplingParams(temperature=0, max_new_tokens=tokens, ignore_eos=True)
    counted = [0] * chats

    def chat(index: int) -> None:
        for event in backend.stream([Message("user", PROMPT)], greedy, threading.Event()):
            if isinstance(event, Finished):
                counted[index] = event.completion_tokens

    threads = [threading.Thread(target=chat, args=(i,)) for i in range(chats)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {"tokens_per_s": round(sum(counted) / wall, 1), "wall_s": round(wall, 2), "tokens": sum(counted)}


def measure(models_file: Path, model: str, batching: bool, levels: list[int], tokens: int) -> dict[str, Any]:
    from webui.config import Settings
    from webui.engine.registry import build_registry

    settings = Settings.from_env(
        models_file=models_file,
        log_dir=Path(tempfile.mkdtemp(prefix="batch-speed-")),
        transformers_batching="on" if batching else "off",
        batch_slots=max(levels),
        max_concurrency=max(levels),  # the generate() path gets a thread per chat, as many as the batch has rows
        queue_timeout_s=600.0,
        vllm_python="none",
        llama_server="none",
        preload=False,
    )
    registry = build_registry(settings)
    try:
        backend = registry.load(model)
        level(backend, 1, 4)  # warm-up
        result: dict[str, Any] = {"engine": registry.status(model).engine, "device": str(backend.model.device)}
        result["levels"] = {str(chats): level(backend, chats, tokens) for chats in levels}
        return result
    finally:
        registry.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.serving.batch_speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("models", type=Path)
    parser.add_argument("model")
    parser.add_argument("--levels", default="1,4,16")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--paths", default="on,off", help="on (the batch), off (generate()), or both")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    levels = [int(part) for part in args.levels.split(",")]
    report: dict[str, Any] = {"model": args.model, "tokens": args.tokens, "paths": {}}
    for path in args.paths.split(","):
        report["paths"][path] = measure(args.models.resolve(), args.model, path == "on", levels, args.tokens)
        print(json.dumps({path: report["paths"][path]}), flush=True)
        if args.out:  # after every path: a lease that ends early keeps what ran
            args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"| chats at once | {' | '.join(f'{p}: tokens/s' for p in report['paths'])} |")
    print(f"|---|{'---|' * len(report['paths'])}")
    for chats in levels:
        cells = [str(result["levels"][str(chats)]["tokens_per_s"]) for result in report["paths"].values()]
        print(f"| {chats} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

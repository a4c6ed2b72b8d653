"""2. Time to first token on each path, against the prefill floor.

Prefill is one forward pass over the prompt (no sampling, no streamer): nothing can show a token
sooner. Raw is model.generate's first new token. The engine, UI and API times are the first
visible text, which the text streamer releases at a word boundary — usually one decode step after
the first token; the engine's own first-token time (from its statistics) is kept beside it.
"""

from __future__ import annotations

from typing import Any

from bench.report import Column, Table, number, seconds, text
from bench.serving.context import BenchContext
from bench.serving.paths import Request, Sample, prefill_s
from bench.stats import median, percentile


def run(ctx: BenchContext) -> dict[str, Any]:
    cfg = ctx.config
    runners, missing = ctx.runners()
    result: dict[str, Any] = {
        "tokens": cfg.ttft_tokens,
        "repeats": cfg.ttft_repeats,
        "unavailable": missing,
        "models": {},
    }
    for name in ctx.local_names:
        request = Request(name, cfg.prompt, cfg.ttft_tokens)
        backend = ctx.backend(name)
        prepare = getattr(backend, "prepare", None) or backend.prompts.prepare  # transformers, or vLLM's prompt builder
        prompt_tokens = len(prepare(request.messages(), backend.default_params()).token_ids)
        floor = prefill_s(backend, request, cfg.ttft_repeats)
        for path, runner in runners.items():
            ctx.warm_up(path, runner, name)
        samples: dict[str, list[Sample]] = {path: [] for path in runners}
        for _ in range(cfg.ttft_repeats):
            for path, runner in runners.items():
                samples[path].append(runner(request))
        result["models"][name] = {
            "prefill_s": floor,
            "prompt_tokens": prompt_tokens,
            "paths": {p: _summary(runs, floor) for p, runs in samples.items()},
        }
    return result


def _summary(runs: list[Sample], floor: float | None) -> dict[str, Any]:
    times = [s.ttft_s for s in runs if s.error is None and s.ttft_s is not None]
    ttft = median(times)
    return {
        "ttft_s": ttft,
        "ttft_p95_s": percentile(times, 95),
        "over_prefill_s": None if ttft is None or floor is None else ttft - floor,
        "ratio_to_prefill": None if not ttft or not floor else ttft / floor,
        "engine_first_token_s": median([s.server_ttft_s for s in runs if s.server_ttft_s is not None]),
        "errors": [s.error for s in runs if s.error],
        "samples": [s.as_dict() for s in runs],
    }


def tables(result: dict[str, Any]) -> list[Table]:
    rows = []
    for model, r in result["models"].items():
        if r["prefill_s"] is not None:  # None in a vLLM server: its raw first token is the floor there
            rows.append(
                {
                    "model": model,
                    "path": f"prefill (floor), {r['prompt_tokens']}-token prompt",
                    "ttft_s": r["prefill_s"],
                    "ratio": 1.0,
                }
            )
        for path, p in r["paths"].items():
            rows.append(
                {
                    "model": model,
                    "path": path,
                    "ttft_s": p["ttft_s"],
                    "p95": p["ttft_p95_s"],
                    "over": p["over_prefill_s"],
                    "ratio": p["ratio_to_prefill"],
                    "engine": p["engine_first_token_s"],
                    "errors": len(p["errors"]) or None,
                }
            )
    for path, reason in result.get("unavailable", {}).items():
        rows.append({"model": "all", "path": path, "errors": reason})
    columns = [
        Column("model", "model"),
        Column("path", "path"),
        Column("ttft_s", "first token/text", seconds),
        Column("p95", "p95", seconds),
        Column("over", "over prefill", seconds),
        Column("ratio", "× prefill", number(2)),
        Column("engine", "engine's own first token", seconds),
        Column("errors", "errors", text),
    ]
    notes = [
        f"The same chat prompt on every path (each model's template applied), {result['tokens']} new tokens, "
        f"median of {result['repeats']} runs per path, paths interleaved.",
        "raw: first new token; engine / gradio / api: first visible text (the text streamer waits for a word "
        "boundary). 'engine's own first token' is the engine's token-level figure for the same request.",
    ]
    return [Table("2. Time to first token per path, against one prefill pass", columns, rows, notes)]

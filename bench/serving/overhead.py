"""1. Overhead: tokens/s of one request on each path, as a ratio to the engine alone (raw).

The paths take turns (raw, engine, gradio, api, raw, ...) rather than running one after another,
so that a change in background load spreads over all of them instead of landing on one. The
figure per path is the median over the repeats of tokens / (request sent -> stream finished).
"""

from __future__ import annotations

from typing import Any

from bench.report import Column, Table, number, seconds, text
from bench.serving.context import BenchContext
from bench.serving.paths import Request, Sample, run_engine
from bench.stats import median, ratio

GOAL = 0.95


def run(ctx: BenchContext) -> dict[str, Any]:
    cfg = ctx.config
    runners, missing = ctx.runners()
    result: dict[str, Any] = {
        "tokens": cfg.overhead_tokens,
        "repeats": cfg.overhead_repeats,
        "goal": GOAL,
        "unavailable": missing,
        "models": {},
    }
    for name in ctx.local_names:
        for path, runner in runners.items():
            ctx.warm_up(path, runner, name)
        request = Request(name, cfg.prompt, common_length(ctx, name, cfg.overhead_tokens))
        samples: dict[str, list[Sample]] = {path: [] for path in runners}
        for _ in range(cfg.overhead_repeats):
            for path, runner in runners.items():
                samples[path].append(runner(request))
        result["models"][name] = summarise(samples)
    return result


def common_length(ctx: BenchContext, name: str, wanted: int) -> int:
    """The length every path can produce: `wanted`, unless the model's chat template ends the
    reply sooner (a stop string such as fschat's "###", which the UI and the API cannot switch off).
    Greedy decoding makes every path stop at the same token, so raw is then run to that length."""
    sample = run_engine(ctx.backend(name), Request(name, ctx.config.prompt, wanted))
    return min(wanted, sample.tokens or wanted)


def summarise(samples: dict[str, list[Sample]]) -> dict[str, Any]:
    ok = {path: [s for s in runs if s.error is None] for path, runs in samples.items()}
    raw_rate = median([s.tokens_per_s for s in ok.get("raw", [])])
    raw_text = ok["raw"][0].text if ok.get("raw") else None
    out: dict[str, Any] = {}
    for path, runs in samples.items():
        good = ok[path]
        rate = median([s.tokens_per_s for s in good])
        out[path] = {
            "tokens_per_s": rate,
            "ratio_to_raw": ratio(rate, raw_rate),
            "total_s": median([s.total_s for s in good]),
            "ttft_s": median([s.ttft_s for s in good]),
            "tokens": sorted({s.tokens for s in good if s.tokens is not None}),
            "same_text_as_raw": None if raw_text is None or not good else _same([s.text for s in good], raw_text),
            "errors": [s.error for s in runs if s.error is not None],
            "samples": [s.as_dict() for s in runs],
        }
    return out


def _same(texts: list[str], raw: str) -> str:
    """yes: every run gave raw's text; prefix: a shorter text that raw's begins with (a stop string
    removed the end); no: something else was generated (the paths did not get the same request).
    Surrounding whitespace is ignored: streaming may trim it."""
    raw = raw.strip()
    if all(t.strip() == raw for t in texts):
        return "yes"
    if all(raw.startswith(t.strip()) for t in texts):
        return "prefix"
    return "**no**"


def tables(result: dict[str, Any]) -> list[Table]:
    rows = []
    for model, paths in result["models"].items():
        for path, r in paths.items():
            goal = (
                None
                if path == "raw" or r["ratio_to_raw"] is None
                else ("yes" if r["ratio_to_raw"] >= GOAL else "**no**")
            )
            runs = "/".join(f"{x['tokens_per_s']:.1f}" if x["tokens_per_s"] else "✗" for x in r["samples"])
            rows.append(
                {
                    **r,
                    "model": model,
                    "path": path,
                    "tokens": "/".join(map(str, r["tokens"])) or None,
                    "runs": runs,
                    "goal": goal,
                    "same": r["same_text_as_raw"],
                    "errors": len(r["errors"]) or None,
                }
            )
    for path, reason in result.get("unavailable", {}).items():
        rows.append({"model": "all", "path": path, "goal": reason})
    columns = [
        Column("model", "model"),
        Column("path", "path"),
        Column("tokens", "tokens", text),
        Column("tokens_per_s", "tokens/s", number(1)),
        Column("runs", "each run", text),
        Column("ratio_to_raw", "ratio to raw", number(3)),
        Column("goal", f"≥ {GOAL}", text),
        Column("total_s", "request time", seconds),
        Column("same", "same text as raw", text),
        Column("errors", "errors", text),
    ]
    notes = [
        f"Up to {result['tokens']} new tokens (fewer where the model's chat template ends the reply: every "
        f"path then runs that same length), greedy, median of {result['repeats']} runs per path, paths interleaved.",
        "tokens/s = generated tokens / (request sent → stream finished); raw is the engine alone: "
        "model.generate in-process for a model on transformers, the app's own vLLM server for the model asked "
        "directly (the same prompt token ids, plain HTTP) for a model on vLLM.",
        "gradio: the Direct chat event read as the page reads it (each update as it arrives), in a session "
        "the server already holds, as after the page's load.",
    ]
    return [Table("1. Overhead: tokens/s per path, relative to the engine alone (raw)", columns, rows, notes)]

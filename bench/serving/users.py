"""4. Many users: 1, 2, 4, 8 and 16 chats at once on one model.

Each level starts all its chats together (a barrier) and waits for every one to end. By default
the chats go through the HTTP API (`--users-path gradio` drives the UI instead, one page client
per user; `engine` skips HTTP). The server runs with its shipped limits: requests beyond the
model's generation slots wait in its queue (a full queue is refused at once with 429) — those are
the rejections counted here.

In the same run the same levels go to the engine alone (the `raw` path: for a model on vLLM, the
app's own vLLM server for the model asked directly over HTTP, without the rest of the app), the
reference the app is measured against.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from bench.report import Column, Table, number, seconds, text
from bench.serving.context import BenchContext, PathUnavailable
from bench.serving.gradio_path import GradioDriver
from bench.serving.paths import Request, Sample, run_api, run_engine, run_raw
from bench.stats import gaps, median, percentile, rate

Runner = Callable[[Request], Sample]


def run(ctx: BenchContext) -> dict[str, Any]:
    cfg = ctx.config
    if not ctx.local_names:
        return {"skipped": "no local model in the models file"}
    name = ctx.local_names[0]
    try:
        make_runner = _runner_factory(ctx, cfg.users_path)
    except PathUnavailable as exc:
        return {"skipped": f"{cfg.users_path} path {exc}"}
    request = Request(name, cfg.prompt, cfg.users_tokens)
    reference = _runner_factory(ctx, "raw")
    for factory in (make_runner, reference):
        factory()(Request(name, cfg.prompt, 2))  # warm-up
    levels, alone = {}, {}
    for users in cfg.users_levels:
        # the app and the engine alone take turns, so that a change in background load hits both
        runs: dict[str, list[dict[str, Any]]] = {"app": [], "alone": []}
        for _ in range(cfg.users_repeats):
            runs["app"].append(_level(users, make_runner, request, cfg.server_timeout_s))
            runs["alone"].append(_level(users, reference, request, cfg.server_timeout_s))
        levels[str(users)], alone[str(users)] = _median_run(runs["app"]), _median_run(runs["alone"])
    return {
        "model": name,
        "path": cfg.users_path,
        "tokens": cfg.users_tokens,
        "repeats": cfg.users_repeats,
        "levels": levels,
        "engine_alone": alone,
        "server_limits": _limits(),
        "engine": ctx.engine_name(name),
    }


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median aggregate throughput, with every run's aggregate beside it."""
    ordered = sorted(runs, key=lambda r: r["aggregate_tokens_per_s"] or 0.0)
    return {
        **ordered[(len(ordered) - 1) // 2],
        "runs_aggregate_tokens_per_s": [r["aggregate_tokens_per_s"] for r in runs],
    }


def _runner_factory(ctx: BenchContext, path: str) -> Callable[[], Runner]:
    """A function giving each user its own runner (the UI needs one client per user: one session
    each; the API's client pools connections and is shared, as an application would)."""
    if path == "api":
        client = ctx.api()
        return lambda: lambda r: run_api(client, r)
    if path in ("engine", "raw"):
        backend = ctx.backend(ctx.local_names[0])
        run = run_engine if path == "engine" else run_raw
        return lambda: lambda r: run(backend, r)
    if path == "gradio":
        url = ctx.server().url
        ctx.gradio()  # raises PathUnavailable when there is no UI
        return lambda: GradioDriver(url).sample
    raise PathUnavailable(f"unknown users path {path!r}: use api, gradio or engine")


def _level(users: int, make_runner: Callable[[], Runner], request: Request, timeout_s: float) -> dict[str, Any]:
    runners = [make_runner() for _ in range(users)]  # before the clock: connecting is not the chat
    samples: list[Sample | None] = [None] * users
    barrier = threading.Barrier(users + 1)

    def chat(i: int) -> None:
        barrier.wait()
        try:
            samples[i] = runners[i](request)
        except Exception as exc:  # one user's failure is a figure, not a crash
            samples[i] = Sample("?", request.model, 0.0, error=f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=chat, args=(i,), name=f"bench-user-{i}", daemon=True) for i in range(users)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join(timeout_s)
    wall = time.perf_counter() - start
    done = [s if s is not None else Sample("?", request.model, wall, error="did not finish") for s in samples]
    return summarise(done, wall)


def summarise(samples: list[Sample], wall: float) -> dict[str, Any]:
    ok = [s for s in samples if s.error is None]
    all_gaps = [g for s in ok for g in gaps(s.chunk_times)]
    return {
        "users": len(samples),
        "wall_s": wall,
        "completed": len(ok),
        "errors": sum(1 for s in samples if s.error and not s.rejected),
        "rejections": sum(1 for s in samples if s.rejected),
        "aggregate_tokens_per_s": rate(sum(s.tokens or 0 for s in ok), wall),
        "per_user_tokens_per_s": median([s.tokens_per_s for s in ok]),
        "ttft_p50_s": percentile([s.ttft_s for s in ok if s.ttft_s is not None], 50),
        "ttft_p95_s": percentile([s.ttft_s for s in ok if s.ttft_s is not None], 95),
        "gap_p95_s": percentile(all_gaps, 95),
        "gap_max_s": max(all_gaps) if all_gaps else None,
        "error_messages": sorted({s.error for s in samples if s.error})[:5],
        "samples": [s.as_dict() for s in samples],
    }


def _limits() -> dict[str, Any]:
    from webui.config import Settings

    defaults = Settings()
    return {
        "max_concurrency": defaults.max_concurrency,
        "batch_slots": defaults.batch_slots,
        "queue_per_slot": defaults.queue_per_slot,
    }


def _batch_slots(limits: dict[str, Any]) -> Any:
    """The batching engines' slots a result was run with (results before the rename name them vllm_concurrency)."""
    return limits.get("batch_slots", limits.get("vllm_concurrency"))


def tables(result: dict[str, Any]) -> list[Table]:
    if "skipped" in result:
        return [Table("4. Many users", [Column("skipped", "skipped")], [result])]
    alone = result.get("engine_alone", {})
    rows = []
    for k, v in result["levels"].items():
        ref = alone.get(k, {})
        row = {
            "users": int(k),
            **v,
            "ref_tokens_per_s": ref.get("aggregate_tokens_per_s"),
            "ref_ttft_p50_s": ref.get("ttft_p50_s"),
        }
        if row["ref_tokens_per_s"] and v.get("aggregate_tokens_per_s"):
            row["ratio"] = v["aggregate_tokens_per_s"] / row["ref_tokens_per_s"]
        rows.append(row)
    columns = [
        Column("users", "chats at once"),
        Column("aggregate_tokens_per_s", "app: aggregate tokens/s", number(1)),
        Column("ref_tokens_per_s", "engine alone: aggregate tokens/s", number(1)),
        Column("ratio", "app ÷ engine", number(3)),
        Column("per_user_tokens_per_s", "app: per chat tokens/s", number(1)),
        Column("ttft_p50_s", "app: first text p50", seconds),
        Column("ref_ttft_p50_s", "engine: first text p50", seconds),
        Column("ttft_p95_s", "app: first text p95", seconds),
        Column("gap_p95_s", "gap p95", seconds),
        Column("errors", "errors", text),
        Column("rejections", "rejected", text),
        Column("wall_s", "wall", seconds),
    ]
    limits = result.get("server_limits", {})
    notes = [
        f"{result['model']} ({result.get('engine') or 'engine not reported'}), {result['tokens']} new tokens per "
        f"chat, greedy, through the {result['path']} path; the engine alone gets the same levels in the same run.",
        f"Server defaults: {_batch_slots(limits)} generations at once per model on a batching engine "
        f"(vLLM, llama.cpp, transformers' continuous batching; {limits.get('max_concurrency')} on transformers' "
        f"generate() path), {limits.get('queue_per_slot')} waiting per slot, "
        "beyond that refused at once.",
        "Gaps are between streamed text chunks.",
        f"Each level ran {result.get('repeats', 1)} time(s), the app and the engine alone in turn; the run with "
        "the median aggregate is shown (every run's aggregate is in the JSON).",
    ]
    one, eight = (next((r for r in rows if r["users"] == n), None) for n in (1, 8))
    if one and eight and one.get("aggregate_tokens_per_s") and eight.get("aggregate_tokens_per_s"):
        notes.append(
            f"8 chats ÷ 1 chat (app): {eight['aggregate_tokens_per_s'] / one['aggregate_tokens_per_s']:.2f}x "
            "(goal >= 4x); app ÷ engine alone at 1 and 8: "
            f"{_fmt(one.get('ratio'))} and {_fmt(eight.get('ratio'))} (goal >= 0.9); first text p50 at 8: "
            f"{_fmt(eight.get('ttft_p50_s'))} s (goal <= 1 s)."
        )
    return [
        Table(
            "4. Many users: concurrent chats on one model, through the app and on the engine alone",
            columns,
            rows,
            notes,
        )
    ]


def _fmt(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "?"

"""3. Two panes at once: a battle turn (two models answering together) against each model alone.

Measured twice: in-process with the UI's own merger of two streams (webui.arena.streaming.PaneStreams,
which the battle and side-by-side handlers use), and through the UI over HTTP (Side by side with
two named models: the same handler code as a battle, with models that are known in advance).
Each pane's time to first text is the time until that pane shows something.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from bench.report import Column, Table, number, seconds, text
from bench.serving.context import BenchContext, PathUnavailable
from bench.serving.gradio_path import DIRECT, SIDE_BY_SIDE, GradioUnavailable, PaneTiming
from bench.serving.paths import Request, greedy_params
from bench.stats import median
from webui.types import Finished, TextDelta

Turn = Callable[[list[str]], tuple[float, list[PaneTiming]]]


def run(ctx: BenchContext) -> dict[str, Any]:
    cfg = ctx.config
    names = ctx.local_names[:2]
    if len(names) < 2:
        return {"skipped": f"needs two local models in the models file, found {len(names)}"}
    result: dict[str, Any] = {
        "models": names,
        "tokens": cfg.panes_tokens,
        "repeats": cfg.panes_repeats,
        "paths": {},
        "unavailable": {},
    }
    result["paths"]["engine"] = measure(lambda models: engine_turn(ctx, models), names, cfg.panes_repeats)
    try:
        driver = ctx.gradio()
        driver.endpoint(SIDE_BY_SIDE)
    except (PathUnavailable, GradioUnavailable) as exc:
        result["unavailable"]["gradio"] = str(exc)
    else:
        request = Request("", cfg.prompt, cfg.panes_tokens)

        def ui_turn(models: list[str]) -> tuple[float, list[PaneTiming]]:
            return driver.turn(DIRECT if len(models) == 1 else SIDE_BY_SIDE, models, request)

        result["paths"]["gradio"] = measure(ui_turn, names, cfg.panes_repeats)
    return result


def measure(turn: Turn, names: list[str], repeats: int) -> dict[str, Any]:
    """Alone A, alone B, together: taking turns, `repeats` times; medians."""
    turn([names[0]])  # warm-up: first requests pay one-off costs (the UI: each event's first use)
    turn(names)
    alone: dict[str, list[tuple[float, PaneTiming]]] = {n: [] for n in names}
    together: list[tuple[float, list[PaneTiming]]] = []
    for _ in range(repeats):
        for name in names:
            wall, (pane,) = turn([name])
            alone[name].append((wall, pane))
        together.append(turn(names))
    alone_wall = {n: median([w for w, _ in runs]) for n, runs in alone.items()}
    result = {
        "alone": {
            n: {
                "wall_s": alone_wall[n],
                "ttft_s": median([p.ttft_s for _, p in runs]),
                "tokens": [p.tokens for _, p in runs],
            }
            for n, runs in alone.items()
        },
        "together": {
            "wall_s": median([w for w, _ in together]),
            "panes": {
                n: {
                    "ttft_s": median([ps[i].ttft_s for _, ps in together]),
                    "end_s": median([ps[i].end_s for _, ps in together]),
                    "tokens": [ps[i].tokens for _, ps in together],
                    "errors": [ps[i].error for _, ps in together if ps[i].error],
                }
                for i, n in enumerate(names)
            },
        },
    }
    wall = result["together"]["wall_s"]
    result["together_over_slowest"] = wall / max(alone_wall.values()) if wall else None
    result["together_over_sum"] = wall / sum(alone_wall.values()) if wall else None
    return result


def engine_turn(ctx: BenchContext, names: list[str]) -> tuple[float, list[PaneTiming]]:
    """Stream `names` at once through PaneStreams, exactly as the UI handlers do."""
    from webui.arena.streaming import Job, PaneStreams

    cfg = ctx.config
    timings = [PaneTiming() for _ in names]
    jobs = [Job(i, _opener(ctx.backend(n), Request(n, cfg.prompt, cfg.panes_tokens))) for i, n in enumerate(names)]
    start = time.perf_counter()
    streams = PaneStreams(jobs, threading.Event())
    try:
        for batch in streams.batches():
            now = time.perf_counter() - start
            for item in batch:
                _note(timings[item.pane], item, now)
    finally:
        streams.close()
    return time.perf_counter() - start, timings


def _opener(backend: Any, request: Request) -> Callable[[threading.Event], Any]:
    params = greedy_params(backend, request)
    return lambda cancel: backend.stream(request.messages(), params, cancel)


def _note(pane: PaneTiming, item: Any, now: float) -> None:
    if item.error is not None:
        pane.error = f"{type(item.error).__name__}: {item.error}"
    elif isinstance(item.event, TextDelta) and item.event.text:
        pane.ttft_s = pane.ttft_s if pane.ttft_s is not None else now
        pane.chunk_times.append(now)
        pane.text += item.event.text
    elif isinstance(item.event, Finished):
        pane.end_s, pane.tokens, pane.server_ttft_s = now, item.event.completion_tokens, item.event.ttft_s


def tables(result: dict[str, Any]) -> list[Table]:
    if "skipped" in result:
        return [Table("3. Two panes at once", [Column("skipped", "skipped")], [result])]
    rows = []
    for path, r in result["paths"].items():
        for name in result["models"]:
            alone, pane = r["alone"][name], r["together"]["panes"][name]
            tokens = sorted({t for t in [*alone["tokens"], *pane["tokens"]] if t is not None})
            rows.append(
                {
                    "path": path,
                    "model": name,
                    "tokens": "/".join(map(str, tokens)) or None,
                    "alone_wall": alone["wall_s"],
                    "alone_ttft": alone["ttft_s"],
                    "together_ttft": pane["ttft_s"],
                    "together_end": pane["end_s"],
                    "turn": r["together"]["wall_s"],
                    "slowest": r["together_over_slowest"],
                    "sum": r["together_over_sum"],
                }
            )
    for path, reason in result.get("unavailable", {}).items():
        rows.append({"path": path, "model": reason})
    columns = [
        Column("path", "path"),
        Column("model", "model", text),
        Column("tokens", "tokens", text),
        Column("alone_wall", "alone: reply", seconds),
        Column("alone_ttft", "alone: first text", seconds),
        Column("together_ttft", "together: first text", seconds),
        Column("together_end", "together: reply", seconds),
        Column("turn", "battle turn", seconds),
        Column("slowest", "turn ÷ slower alone", number(2)),
        Column("sum", "turn ÷ sum alone", number(2)),
    ]
    notes = [
        f"Up to {result['tokens']} new tokens per pane (a model's chat template may end its reply sooner), "
        f"greedy, median of {result['repeats']} runs.",
        "turn ÷ slower alone = 1.00 would be two panes for the price of one; turn ÷ sum alone = 1.00 is no "
        "better than answering one after the other.",
    ]
    return [Table("3. Two panes at once: a battle turn against each model alone", columns, rows, notes)]

"""8. Engines on the CPU: the demo models on llama.cpp and on vLLM, one engine after the other in one
run, through the app's own engine path (our template, our token ids, the models file's sampling).

For each engine that is installed: both models start with `backend: <engine>` (warm caches; start
to ready is timed), then one battle (both replies, the same prompt, at once: until both finished),
8 battles at once (aggregate tokens/s), the engine servers' resident memory, and finally SmolLM2
alone with the whole machine (one chat). Every reply is `tokens` long (end-of-sequence ignored), with
the models file's own sampling (repetition penalty, top_p) and no seed, as the app sends them.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from bench.report import ROOT, Column, Table, mib, number, seconds, text
from bench.serving import models
from bench.serving.context import BenchContext
from bench.serving.memory import engine_rss

ENGINES = ("llamacpp", "vllm")
SMOL = "SmolLM2-135M-Instruct"


def run(ctx: BenchContext) -> dict[str, Any]:
    from webui.config import Settings
    from webui.engine.llamacpp import find_llama_server
    from webui.engine.vllm import find_vllm_python

    entries = models.local_entries(ctx.entries)
    if len(entries) < 2:
        return {"skipped": "needs two local models (a battle)"}
    settings = Settings(log_dir=ctx.workdir / "engine-logs", queue_timeout_s=600)
    installed = {"llamacpp": find_llama_server("", ROOT) is not None, "vllm": find_vllm_python("", ROOT) is not None}
    cfg = ctx.config
    result: dict[str, Any] = {"tokens": cfg.users_tokens, "engines": {}}
    for engine in ENGINES:
        if not installed[engine]:
            result["engines"][engine] = {"skipped": "not installed"}
            continue
        result["engines"][engine] = _measure(engine, entries[:2], settings, cfg.users_tokens, cfg.overhead_repeats)
    return result


def _measure(engine: str, entries: list[dict], settings: Any, tokens: int, repeats: int) -> dict[str, Any]:
    names = [e["name"] for e in entries]
    registry, ready_s = _start(engine, entries, settings)
    try:
        backends = {name: registry.get(name) for name in names}
        out: dict[str, Any] = {"ready_s": ready_s, "served_as": {n: registry.status(n).engine for n in names}}
        _at_once(backends, tokens, battles=1)  # warm-up: the first request of a server pays for its buffers
        battles = [_at_once(backends, tokens, battles=1) for _ in range(repeats)]
        out["battle_s"] = statistics.median(b["wall_s"] for b in battles)
        out["battle_s_range"] = [min(b["wall_s"] for b in battles), max(b["wall_s"] for b in battles)]
        many = _at_once(backends, tokens, battles=8)
        out["battles_8_tok_s"] = many["tokens"] / many["wall_s"]
        out["memory_bytes"] = sum(engine_rss(b) or 0 for b in backends.values())
    finally:
        registry.close()
    smol = next((e for e in entries if e["name"] == SMOL), entries[0])
    registry, _ = _start(engine, [smol], settings)
    try:
        backend = registry.get(smol["name"])
        _reply(backend, tokens)
        chats = [_reply(backend, 128) for _ in range(repeats)]
        out["one_chat_tok_s"] = statistics.median(c["tok_s"] for c in chats)
    finally:
        registry.close()
    return out


def _start(engine: str, entries: list[dict], settings: Any) -> tuple[Any, float]:
    from webui.engine.registry import ModelState, Registry
    from webui.models.specs import parse_specs

    forced = [{**e, "backend": engine} for e in entries]
    started = time.perf_counter()
    registry = Registry(parse_specs({"models": forced}), settings)
    registry.start()
    if not registry.wait_idle(900):
        raise RuntimeError(f"{engine}: models not ready after 900 s")
    for entry in forced:
        status = registry.status(entry["name"])
        if status.state is not ModelState.READY:
            registry.close()
            raise RuntimeError(f"{engine}: {entry['name']} {status.describe()}")
    return registry, time.perf_counter() - started


def _params(backend: Any, tokens: int) -> Any:
    # No seed, as the app's own requests: vLLM samples a seeded request on a slower path of its own.
    return backend.spec.sampling.replace(max_new_tokens=tokens, ignore_eos=True)


def _reply(backend: Any, tokens: int) -> dict[str, Any]:
    from bench.serving.config import PROMPT
    from webui.types import Finished, Message

    started = time.perf_counter()
    final = None
    for event in backend.stream([Message("user", PROMPT)], _params(backend, tokens)):
        if isinstance(event, Finished):
            final = event
    wall = time.perf_counter() - started
    completion = final.completion_tokens if final is not None else 0
    return {"wall_s": wall, "tokens": completion, "tok_s": completion / wall if wall else 0.0}


def _at_once(backends: dict[str, Any], tokens: int, *, battles: int) -> dict[str, Any]:
    """`battles` battles at once: every model answers each; until the slowest reply is done."""
    replies: list[dict[str, Any]] = []
    lock = threading.Lock()

    def one(backend: Any) -> None:
        reply = _reply(backend, tokens)
        with lock:
            replies.append(reply)

    threads = [threading.Thread(target=one, args=(backend,)) for _ in range(battles) for backend in backends.values()]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"wall_s": time.perf_counter() - started, "tokens": sum(r["tokens"] for r in replies)}


def tables(section: dict[str, Any]) -> list[Table]:
    if "skipped" in section:
        return [Table("Engines on the CPU", [Column("skipped", "skipped", text)], [section])]
    rows = []
    for engine, found in section["engines"].items():
        rows.append(
            {"engine": engine, **found} if "skipped" not in found else {"engine": engine, "note": found["skipped"]}
        )
    columns = [
        Column("engine", "engine", text),
        Column("battle_s", "one battle (both replies)", seconds),
        Column("battles_8_tok_s", "8 battles at once, tok/s", number(0)),
        Column("one_chat_tok_s", "one chat, SmolLM2 alone, tok/s", number(0)),
        Column("memory_bytes", "memory, both models", mib),
        Column("ready_s", "start to ready (both)", seconds),
    ]
    table = Table(f"Engines on the CPU ({section['tokens']} tokens a reply; one chat 128)", columns, rows)
    table.notes.append("Each engine in turn, the same models, prompt, sampling and seeds; caches warm.")
    return [table]

"""Whether a set of weights served by transformers goes on continuous batching when it loads
(webui.engine.batching), or on one generate() per reply, and why.

Checked before the manager starts, each with a reason the model status shows:

* where it runs: not on ZeroGPU (the GPU is lent per call), not with `--transformers-batching off`,
  not spread over several devices;
* its paged KV cache (`kv_cache_tokens`, whole pages) fits in the memory free on the model's device:
  the manager allocates it all at once, and on a CPU an allocation the kernel overcommits ends in the
  out-of-memory killer, not an error;
* the cache holds the entry's own reply (its `max_new_tokens`) after the smallest conversation, a
  one-word message in the entry's template: else every reply with the entry's settings is refused;
* then a one-token request proves that the manager runs the model (an architecture or attention it
  cannot run fails here, not in a visitor's reply).

The generate() path has no paged cache (each reply grows its own), so it serves what fails a check.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from webui.config import Settings
from webui.engine.paging import DEFAULT_KV_CACHE_TOKENS, PAGE_SIZE, whole_pages
from webui.engine.templates import PromptBuilder
from webui.handoff import Handoff
from webui.models.specs import ModelSpec
from webui.types import Message, SamplingParams

if TYPE_CHECKING:
    from webui.engine.batching import Batching

log = logging.getLogger(__name__)
PROBE_TIMEOUT_S = 120.0  # a one-token request at load; generous for a big model on a slow CPU
MEMORY_SHARE = 0.8  # of the free memory the cache may take: the forward pass needs room too (transformers' default)
SMALLEST_CONVERSATION = (Message("user", "hi"),)
GIB = 1024**3


def start_batching(
    model: Any, tokenizer: Any, spec: ModelSpec, settings: Settings, context: int
) -> tuple[Batching | None, str]:
    """The continuous-batching engine for these weights, or None and why the generate() path serves
    them ("" when batching is simply off)."""
    from webui.engine.zerogpu import zero_gpu

    if zero_gpu():
        return None, "ZeroGPU lends the GPU per call, and the batching loop runs for good"
    if not batching_wanted(settings.transformers_batching, model.device.type):
        return None, ""  # turned off: nothing went wrong, so the status has nothing to explain
    if getattr(model, "hf_device_map", None) and len(set(model.hf_device_map.values())) > 1:
        return None, "the model is spread over several devices"
    free = free_memory(model)
    chosen = spec.engine_options.get("kv_cache_tokens", settings.transformers_kv_cache_tokens)
    slots = spec.max_concurrency or settings.batch_slots
    tokens = whole_pages(chosen) if chosen else sized_cache(model, slots * context, settings, free)
    problem = cache_problem(model, tokens, free) or reply_problem(spec, tokenizer, tokens)
    if problem:
        log.warning("%s: one generate() per reply, not continuous batching: %s", spec.name, problem)
        return None, problem
    missing = missing_api()
    if missing:
        log.warning("%s: one generate() per reply, not continuous batching: %s", spec.name, missing)
        return None, missing
    started = time.perf_counter()
    try:
        batching = _start(model, tokenizer, spec, tokens, slots, graphs=True)
    except Exception as exc:  # any refusal of the manager means the generate() path, with the reason
        log.warning("%s: continuous batching cannot serve it, one generate() per reply: %s", spec.name, exc)
        kind = type(model).__name__
        return None, f"continuous batching cannot run {kind}: {type(exc).__name__}: {str(exc)[:160]}"
    batching.ready_s = time.perf_counter() - started
    return batching, ""


def _start(model: Any, tokenizer: Any, spec: ModelSpec, tokens: int, slots: int, graphs: bool) -> Batching:
    """The engine, proven by a one-token request. Where the manager captured CUDA graphs and that
    failed, the engine again without them, saying why."""
    from webui.engine.batching import Batching

    batching: Batching | None = None
    try:
        batching = Batching(model, eos_ids(model, tokenizer), tokens, spec.name, slots=slots, graphs=graphs)
        _probe(batching, tokenizer)
        return batching
    except Exception as exc:
        if batching is not None:
            batching.close()
        if not graphs or model.device.type != "cuda":
            raise
        log.warning("%s: continuous batching with CUDA graphs failed, starting it without: %s", spec.name, exc)
        batching = _start(model, tokenizer, spec, tokens, slots, graphs=False)
        batching.no_graphs_why = f"{type(exc).__name__}: {str(exc)[:160]}"
        return batching


def batching_wanted(mode: str, device_type: str) -> bool:
    """--transformers-batching: on, off, or auto (on for a model on a GPU)."""
    return mode == "on" or (mode == "auto" and device_type == "cuda")


def sized_cache(model: Any, wanted: int, settings: Settings, free: int | None) -> int:
    """The cache's tokens where none was chosen. On a GPU, what every slot's whole context wants,
    as far as `--transformers-kv-cache-memory` of the free memory holds (a page at least: the load
    check then says what it cannot hold). On a CPU, whose memory every other program shares and
    whose batch decodes a few rows a step, DEFAULT_KV_CACHE_TOKENS."""
    per_token = cache_bytes(model.config, model.dtype, 1)
    if model.device.type != "cuda" or free is None or per_token is None:
        return DEFAULT_KV_CACHE_TOKENS
    fits = int(free * settings.transformers_kv_cache_memory) // per_token // PAGE_SIZE * PAGE_SIZE
    return max(PAGE_SIZE, min(whole_pages(wanted), fits))


def missing_api() -> str:
    """Why the installed transformers cannot run our batching engine ("" when it can): the manager's
    API moved between 5.x releases, and the app's pin is only >=5.0 for what else it needs."""
    from importlib.metadata import version

    try:
        import webui.engine.batching  # noqa: F401
    except ImportError as exc:
        return f"transformers {version('transformers')} lacks the continuous-batching API it needs ({exc})"
    return ""


def cache_bytes(config: Any, dtype: Any, tokens: int) -> int | None:
    """Bytes of a paged KV cache of `tokens` tokens: a key and a value per token, layer and KV head
    (the manager's own measure of a block; its few index tensors beside it are left out). None for
    a model without attention heads to count (the manager's own probe then says what it thinks)."""
    from transformers.generation.continuous_batching.utils import find_head_dim, find_num_key_value_heads

    text = config.get_text_config()
    try:
        per_token = 2 * find_num_key_value_heads(text) * find_head_dim(text) * dtype.itemsize
        return int(text.num_hidden_layers) * per_token * tokens
    except (AttributeError, ValueError, TypeError):
        return None


def cache_problem(model: Any, tokens: int, free: int | None) -> str | None:
    """Why a cache of `tokens` does not fit in `free` bytes (None: it fits, or nothing is known)."""
    needed = cache_bytes(model.config, model.dtype, tokens)
    if free is None or needed is None or needed <= free * MEMORY_SHARE:
        return None
    fits = int(free * MEMORY_SHARE / needed * tokens) // PAGE_SIZE * PAGE_SIZE
    return (
        f"its paged KV cache of {tokens} tokens needs {needed / GIB:.1f} GiB, more than {MEMORY_SHARE:.0%} of the "
        f"{free / GIB:.1f} GiB free on {model.device.type}: lower kv_cache_tokens (models file) or "
        f"--transformers-kv-cache-tokens to at most {fits}"
    )


def reply_problem(spec: ModelSpec, tokenizer: Any, tokens: int) -> str | None:
    """Why a cache of `tokens` cannot hold the entry's own reply after the smallest conversation."""
    reply = spec.sampling.max_new_tokens
    smallest = PromptBuilder(spec, tokenizer, tokens).count(SMALLEST_CONVERSATION)
    if smallest + reply <= tokens:
        return None
    return (
        f"its paged KV cache of {tokens} tokens cannot hold a reply of max_new_tokens {reply} (sampling) after the "
        f"{smallest}-token prompt of a one-word message: raise kv_cache_tokens (models file) or "
        f"--transformers-kv-cache-tokens to at least {whole_pages(smallest + reply)}, or lower max_new_tokens"
    )


def free_memory(model: Any) -> int | None:
    """Bytes free on the model's device now: the GPU's own count, or the memory the kernel can give
    without swapping on a CPU; None where it cannot be told (the manager then checks alone)."""
    import torch

    device = model.device
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type != "cpu":
        return None
    try:
        import psutil  # accelerate brings it; transformers sizes its own cache with it too

        return int(psutil.virtual_memory().available)
    except ImportError:
        return None


def eos_ids(model: Any, tokenizer: Any) -> list[int]:
    base = model.generation_config
    eos = base.eos_token_id if base is not None else None
    eos = eos if eos is not None else tokenizer.eos_token_id
    if eos is None:
        return []
    return [eos] if isinstance(eos, int) else list(eos)


def _probe(batching: Batching, tokenizer: Any) -> None:
    """One token through the manager, or the reason it gave none."""
    probe = Handoff[list[int]]()
    batching.submit(
        [tokenizer.bos_token_id or 0] * 4,
        SamplingParams(temperature=0.0, max_new_tokens=1, ignore_eos=True),
        probe.put,
        lambda error: probe.fail(RuntimeError(error)) if error else probe.close(),
    )
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    if sum(len(ids) for ids in probe.until(lambda: time.monotonic() > deadline)) != 1:
        raise RuntimeError(f"a one-token request gave no token within {PROBE_TIMEOUT_S:.0f} s")

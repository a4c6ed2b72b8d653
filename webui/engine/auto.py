"""`backend: auto`, the default for local sources: the best engine this machine has for the entry,
and why, in the model's status.

1. llama.cpp, for a GGUF file on a machine without an NVIDIA GPU, where its server is installed: it
   reads the quantised file as it is (no dequantised copy), is ready in about a second and decodes
   fastest on a CPU (docs/performance.md, "Engines on the CPU").
2. vLLM, where it is installed and supports the model here (continuous batching; on a GPU, first).
3. transformers, in this process, everywhere.

An engine passed over says why in the status ("transformers: vLLM is not installed"); llama.cpp's
reason is given only for a GGUF source, the one kind of entry it could have served.
"""

from __future__ import annotations

import logging
from pathlib import Path

from webui.config import PACKAGE_DIR, Settings
from webui.engine import llamacpp, vllm
from webui.engine.base import EngineUnavailable, Weights
from webui.engine.process import EngineStartError
from webui.models.sources import resolve_source
from webui.models.specs import ModelSpec

log = logging.getLogger(__name__)


def load_auto(spec: ModelSpec, settings: Settings) -> Weights:
    """Registry loader for `backend: auto`."""
    weights, passed_over = _on_llamacpp(spec, settings)
    if weights is not None:
        return weights
    try:
        install = vllm._install(settings)
        folder = vllm._folder(spec, settings)
        reason = vllm.why_not(spec, folder, install)
        if reason is None:
            weights = vllm._serve(spec, settings, install, folder)
            if passed_over:
                weights.engine = f"{weights.engine} ({passed_over})"
            return weights
    except (EngineUnavailable, EngineStartError) as exc:
        log.warning("%s: serving with transformers: %s", spec.name, exc)  # the status gets the public reason only
        reason = exc.public
    else:
        log.warning("%s: serving with transformers: %s", spec.name, reason)
    from webui.engine.transformers import load_transformers

    weights = load_transformers(spec, settings)
    # "transformers: vLLM is not installed (continuous batching)"; the loader chose the slots
    how = weights.engine.removeprefix("transformers").strip()
    weights.engine = " ".join(
        part for part in ("transformers: " + "; ".join(p for p in (reason, passed_over) if p), how) if part
    )
    return weights


def _on_llamacpp(spec: ModelSpec, settings: Settings) -> tuple[Weights | None, str]:
    """The entry on llama.cpp when it is the engine for it here; else why not ("" where llama.cpp
    never was a candidate: a model folder, or a GPU, which vLLM serves better)."""
    source = resolve_source(spec.source)
    if not source.gguf_file or has_nvidia_gpu():
        return None, ""
    try:
        binary = llamacpp.installed_server(settings)
        problem = llamacpp.why_not(spec, source)
        if problem is None:
            return llamacpp.serve(spec, settings, binary, source), ""
    except (EngineUnavailable, EngineStartError) as exc:
        log.warning("%s: not on llama.cpp: %s", spec.name, exc)
        problem = exc.public
    return None, f"llama.cpp: {problem}" if not problem.startswith("llama.cpp") else problem


def has_nvidia_gpu() -> bool:
    """An NVIDIA driver's device nodes, without importing torch."""
    return Path("/dev/nvidiactl").exists()


def default_concurrency(settings: Settings) -> int:
    """Generations at once for an `auto` entry: a batching engine's where one is installed (an entry
    that falls back to transformers is resized to transformers' when it loads)."""
    batching = llamacpp.find_llama_server(settings.llama_server) or vllm.find_vllm_python(
        settings.vllm_python, PACKAGE_DIR.parent
    )
    return settings.vllm_concurrency if batching or settings.transformers_batching else settings.max_concurrency

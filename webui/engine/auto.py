"""`backend: auto`, the default for local sources: the best engine this machine has for the entry,
and why, in the model's status.

The engines it tries, and in which order, are their rows' `auto` (webui.models.entries): today
llama.cpp first (for a GGUF file on a machine without an NVIDIA GPU: it reads the quantised file
as it is, is ready in about a second and decodes fastest on a CPU), then vLLM (where it is
installed and supports the model here), and transformers last, in this process, everywhere.

An engine passed over says why in the status ("transformers: vLLM is not installed"); one that
was never a candidate for the entry (llama.cpp for a model folder) says nothing.
"""

from __future__ import annotations

import logging

from webui.config import Settings
from webui.engine.base import EngineUnavailable, Weights
from webui.engine.process import EngineStartError
from webui.models.entries import BACKENDS, AutoChoice, Backend
from webui.models.specs import ModelSpec, engine_function

log = logging.getLogger(__name__)


def candidates() -> list[tuple[AutoChoice, Backend]]:
    """The engines `auto` tries, best first; the last is the fallback."""
    rows = [(row.auto, row) for row in BACKENDS.values() if row.auto is not None]
    return sorted(rows, key=lambda pair: pair[0].rank)


def load_auto(spec: ModelSpec, settings: Settings) -> Weights:
    """Registry loader for `backend: auto`."""
    *better, (fallback, fallback_row) = candidates()
    passed_over: list[str] = []
    for choice, row in better:
        weights, reason = _try(choice, row, spec, settings)
        if weights is not None:
            if passed_over:
                weights.engine = f"{weights.engine} ({'; '.join(passed_over)})"
            return weights
        if reason:
            passed_over.append(reason if choice.label in reason else f"{choice.label}: {reason}")
    log.warning("%s: serving with %s: %s", spec.name, fallback.label, "; ".join(passed_over) or "no other engine")
    weights = engine_function(fallback_row.load)(spec, settings)
    # "transformers: vLLM is not installed (continuous batching)": the loader's own words follow the reasons
    how = weights.engine.removeprefix(fallback.label).strip()
    said = f"{fallback.label}: {'; '.join(passed_over)}" if passed_over else fallback.label
    weights.engine = " ".join(part for part in (said, how) if part)
    return weights


def _try(choice: AutoChoice, row: Backend, spec: ModelSpec, settings: Settings) -> tuple[Weights | None, str]:
    """The entry on this engine when it can serve it here; else why not ("" where it never was a
    candidate for the entry)."""
    try:
        served = engine_function(choice.try_serve or row.load)(spec, settings)
    except (EngineUnavailable, EngineStartError) as exc:
        log.warning("%s: not on %s: %s", spec.name, choice.label, exc)  # the status gets the public reason only
        return None, exc.public
    return (None, served) if isinstance(served, str) else (served, "")


def default_concurrency(settings: Settings) -> int:
    """Generations at once for an `auto` entry: those of the best engine installed here (an entry
    that falls back is resized to its engine's when it loads)."""
    for _choice, row in candidates():
        value = engine_function(row.concurrency)(settings) if row.concurrency else None
        if value is not None:
            return int(value)
    return settings.max_concurrency

"""Shares this machine's devices out among the engine servers before anything loads.

Every server of ours runs its model on threads pinned to cores, and a server on a GPU (vLLM's)
takes a fixed share of its memory: left to themselves, they would all pin to the first cores and
each claim most of the GPU. The shares are written into each entry's `engine_options`; which
engines take a GPU share their rows say (`Backend.gpu_share` in webui.models.entries).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from webui.models.entries import BACKENDS
from webui.models.specs import ModelSpec

GPU_MEMORY_BUDGET = 0.9  # the share of a GPU that the models on it divide among themselves


def place(specs: Sequence[ModelSpec], cores: int) -> list[ModelSpec]:
    """The entries of our own engine servers, each set of weights with its part of the GPU and its cores."""
    return share_cpu_cores(share_gpu_memory(specs), cores)


def share_gpu_memory(specs: Sequence[ModelSpec]) -> list[ModelSpec]:
    """Entries that may take a GPU share (may run on vLLM) and do not set gpu_memory_utilization get an equal part of
    what the others leave of GPU_MEMORY_BUDGET, so that several models fit on one GPU together,
    or the one that does not fit fails with vLLM's own reason (not an out-of-memory later on).
    Variants share one server, so a set of weights counts once."""
    candidates = [s for s in specs if BACKENDS[s.backend].gpu_share]
    fixed = {
        s.weights_key: s.engine_options["gpu_memory_utilization"]
        for s in candidates
        if "gpu_memory_utilization" in s.engine_options
    }
    shared = {s.weights_key for s in candidates} - set(fixed)
    if not shared:
        return list(specs)
    part = round(max(0.05, GPU_MEMORY_BUDGET - sum(fixed.values())) / len(shared), 3)
    return [
        dataclasses.replace(s, engine_options={**s.engine_options, "gpu_memory_utilization": part})
        if s.weights_key in shared
        else s
        for s in specs
    ]


def share_cpu_cores(specs: Sequence[ModelSpec], cores: int) -> list[ModelSpec]:
    """On the CPU each server runs its model on its own threads, pinned to cores; left to itself every
    server pins to the same first cores, and two models in a battle then take turns on one core while
    the others idle. So entries that do not set `cpu_cores` get cores of their own: with one such
    model the engine chooses (vLLM keeps a core for its HTTP side, llama.cpp takes them all); with
    several, the cores are divided among them (keeping one for the app when there are enough)."""
    keys = list(dict.fromkeys(s.weights_key for s in specs if "cpu_cores" not in s.engine_options))
    if len(keys) < 2 or cores < 2:
        return list(specs)
    usable = cores - 1 if cores > len(keys) else cores
    each = max(1, usable // len(keys))
    ranges = {}
    for i, key in enumerate(keys):
        first = (i * each) % usable
        ranges[key] = str(first) if each == 1 else f"{first}-{first + each - 1}"
    return [
        dataclasses.replace(s, engine_options={**s.engine_options, "cpu_cores": ranges[s.weights_key]})
        if s.weights_key in ranges
        else s
        for s in specs
    ]


def has_nvidia_gpu() -> bool:
    """An NVIDIA driver's device nodes, without importing torch."""
    return Path("/dev/nvidiactl").exists()

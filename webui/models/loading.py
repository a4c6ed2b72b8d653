"""Loading transformers weights: dtype, device placement and the dequantised-GGUF cache.

GGUF files are dequantised by transformers on every load (17 s for SmolLM2-135M on 2 cores). The
first load therefore writes the dequantised weights, config and tokenizer to the cache as a normal
model folder (safetensors); later loads read that folder instead (well under a second).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webui.models.cache_records import COMPLETE_MARK, prune_stale
from webui.models.sources import ResolvedSource, resolve_source
from webui.models.specs import DeviceSpec, ModelSpec

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)
_CACHE_FORMAT = "2"  # bump when the cache layout changes (2: loadable by vLLM too)
CPU_DTYPE_NAMES = {"auto": "float32", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}  # torch_dtype(_, "cpu")
# What the engines take from transformers' namespace, which transformers fills lazily on first use.
TRANSFORMERS_NAMES = (
    "AutoConfig",
    "AutoModelForCausalLM",
    "AutoTokenizer",
    "GenerationConfig",
    "LogitsProcessor",
    "LogitsProcessorList",
    "StoppingCriteria",
    "StoppingCriteriaList",
    "TemperatureLogitsWarper",
    "TextStreamer",
    "TopKLogitsWarper",
    "TopPLogitsWarper",
)
_importing = threading.Lock()
_imported = False
# One model built by transformers at a time in this process. Two from_pretrained calls in two loader
# threads (the registry loads in parallel) gave both models garbage weights, some runs in two:
# building a model goes through process-wide state (default dtype, meta-device initialisation).
_building = threading.Lock()


def import_transformers() -> None:
    """Import transformers once, under a lock, before a loader thread uses it.

    transformers fills its namespace lazily, and not thread-safely: two loader threads (the
    registry loads models in parallel) importing it at the same moment got "cannot import name
    'AutoConfig' from 'transformers'", or 'GGUF_CONFIG_ARCHS' from its GGUF integration, and a
    cold start lost a model to it. Every loader calls this before it imports from transformers."""
    global _imported
    with _importing:
        if _imported:
            return
        import transformers
        import transformers.integrations.gguf  # imported inside from_pretrained(gguf_file=...)

        for name in TRANSFORMERS_NAMES:
            getattr(transformers, name)
        _imported = True


class LoadError(RuntimeError):
    """A model could not be loaded; the message is shown as the model's status."""


@dataclass
class LoadedWeights:
    model: Any
    tokenizer: Any
    device: str  # human-readable placement, e.g. "cpu" or "cuda:0,cuda:1"
    from_cache: bool


def torch_dtype(name: str, device: str) -> torch.dtype:
    import torch

    if name == "fp32":
        return torch.float32
    if name == "fp16":
        return torch.float16
    if name == "bf16":
        return torch.bfloat16
    # auto: half precision on GPUs, full precision on CPUs (fp16 matmuls are slow or missing there)
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def load_weights(spec: ModelSpec, cache_dir: Path) -> LoadedWeights:
    import_transformers()
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    source = resolve_source(spec.source)
    target = _target_device(spec.device)
    dtype = torch_dtype(spec.dtype, target)
    folder, gguf_file, from_cache = source.folder, source.gguf_file, False
    if gguf_file:
        cached = _cache_folder(cache_dir, source, dtype)
        if (cached / COMPLETE_MARK).is_file():
            folder, gguf_file, from_cache = cached, None, True

    file_kwargs: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
    with _building:
        device_map = _device_map(spec.device, target, AutoConfig.from_pretrained(folder, **file_kwargs), dtype)
        tokenizer = AutoTokenizer.from_pretrained(folder, **file_kwargs)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, device_map=device_map, **file_kwargs)
    model.eval()
    if gguf_file:
        _write_cache(model, tokenizer, _cache_folder(cache_dir, source, dtype), source)
    return LoadedWeights(model, tokenizer, _placement(model), from_cache)


def model_folder(spec: ModelSpec, cache_dir: Path) -> Path:
    """A plain Hugging Face model folder holding the entry's weights, for engines that load folders
    themselves (vLLM): the source folder as is, or for a GGUF file the dequantised cache, written
    first if it is not there yet (which loads the model once, on the CPU)."""
    source = resolve_source(spec.source)
    if not source.gguf_file:
        return source.folder
    cached = _cache_folder(cache_dir, source, CPU_DTYPE_NAMES[spec.dtype])
    if not (cached / COMPLETE_MARK).is_file():
        dtype = torch_dtype(spec.dtype, "cpu")
        import_transformers()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        log.info("%s: dequantising %s once (the cache then serves every engine)", spec.name, source.gguf_file)
        with _building:
            tokenizer = AutoTokenizer.from_pretrained(source.folder, gguf_file=source.gguf_file)
            model = AutoModelForCausalLM.from_pretrained(source.folder, gguf_file=source.gguf_file, dtype=dtype)
        _write_cache(model, tokenizer, cached, source)
        del model
    if not (cached / COMPLETE_MARK).is_file():
        raise LoadError(f"could not write the dequantised weights of {source.gguf_file} to {cached.parent}")
    return cached


def _target_device(device: DeviceSpec) -> str:
    import torch

    if device.kind in ("cuda", "auto") and torch.cuda.is_available():
        return "cuda"
    if device.kind == "auto":
        return "cpu"
    if device.kind.startswith("cuda") and not torch.cuda.is_available():
        raise LoadError(f"device {device.kind} was asked for but no CUDA GPU is visible")
    return device.kind


def _device_map(device: DeviceSpec, target: str, config: Any, dtype: torch.dtype) -> Any:
    import torch

    if not target.startswith("cuda"):
        return {"": target}
    if target != "cuda":  # cuda:N
        return {"": target}
    free = {i: torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())}
    return plan_gpu_placement(config, dtype, free, device.max_memory)


def plan_gpu_placement(
    config: Any,
    dtype: torch.dtype,
    free_bytes: Mapping[int, int],
    max_memory: Mapping[str, str] | None = None,
    headroom: float = 0.9,
) -> dict[str, Any]:
    """Spread a model over GPUs by free memory (accelerate does the arithmetic). Refuses, with the
    sizes, a model that would spill to CPU or disk: a clear failure beats an OOM mid-request."""
    from accelerate import infer_auto_device_map, init_empty_weights
    from accelerate.utils import compute_module_sizes, convert_file_size_to_int

    import_transformers()
    from transformers import AutoModelForCausalLM

    with init_empty_weights():
        skeleton = AutoModelForCausalLM.from_config(config, dtype=dtype)
    budget = {gpu: int(free * headroom) for gpu, free in free_bytes.items()}
    for key, amount in (max_memory or {}).items():
        if key.isdigit() and int(key) in budget:
            budget[int(key)] = min(budget[int(key)], convert_file_size_to_int(amount))
    needed = compute_module_sizes(skeleton, dtype=dtype)[""]
    no_split = getattr(skeleton, "_no_split_modules", None) or []
    limits: dict[int | str, int] = {"cpu": 0, "disk": 0, **dict(budget.items())}
    plan = infer_auto_device_map(skeleton, max_memory=limits, no_split_module_classes=no_split, dtype=dtype)
    spilled = sorted({str(v) for v in plan.values() if not isinstance(v, int)})
    if spilled or not plan:
        total = sum(budget.values())
        raise LoadError(
            f"does not fit on the GPUs: needs about {needed / 2**30:.1f} GiB in {dtype}, "
            f"{total / 2**30:.1f} GiB usable across {len(budget)} GPU(s); "
            "free memory (unload a model), choose a smaller dtype, or set device: cpu"
        )
    return plan


def _placement(model: Any) -> str:
    devices = getattr(model, "hf_device_map", None)
    if devices:
        names = sorted({str(v) if not isinstance(v, int) else f"cuda:{v}" for v in devices.values()})
        return ",".join(names)
    return str(next(model.parameters()).device)


def _cache_folder(cache_dir: Path, source: ResolvedSource, dtype: torch.dtype | str) -> Path:
    """Keyed by the file, the dtype ("float32"), the transformers version and the cache format;
    worked out without importing torch or transformers (an engine in another process only needs
    the folder)."""
    from importlib.metadata import version

    stem = Path(source.gguf_file or "model").stem
    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    key = f"{source.fingerprint()}-{name}-tf{version('transformers')}-v{_CACHE_FORMAT}"
    return cache_dir / "dequantised" / f"{stem}-{key}"


def _write_cache(model: Any, tokenizer: Any, folder: Path, source: ResolvedSource) -> None:
    """Write atomically (a temp folder renamed into place) so a crash never leaves half a cache.
    Failure to cache is not fatal: the model is loaded, the next start is just slower. The mark
    records `source`'s identity, and folders whose source is gone or changed are removed (cache_records).

    The folder is a plain Hugging Face model folder that other loaders read too (vLLM serves it):
    the config names its architecture, and tied weights are stored under the input embedding's
    name (safetensors' own de-duplication may keep the output head's name instead, which loaders
    that tie the head to the embedding do not look for)."""
    if (folder / COMPLETE_MARK).is_file():
        return
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
        try:
            _write_folder(getattr(model, "_orig_mod", model), tokenizer, staging)
            (staging / COMPLETE_MARK).write_text(json.dumps(source.identity()), encoding="utf-8")
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        prune_stale(folder.parent, keep=folder)
    except OSError as exc:
        log.warning("could not cache dequantised weights in %s: %s", folder, exc)


def _write_folder(model: Any, tokenizer: Any, staging: Path) -> None:
    from safetensors.torch import save_file

    save_file(untied_state_dict(model), str(staging / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)  # the cache holds plain weights
    config["architectures"] = [type(model).__name__]
    type(model.config).from_dict(config).save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(staging)


def untied_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The weights with each shared tensor stored once, under the first name that is not an output
    head (`lm_head.weight` shares the embedding's storage when the config ties them)."""

    kept: dict[str, torch.Tensor] = {}
    owners: dict[tuple[int, int], str] = {}
    names = sorted(model.state_dict(keep_vars=False).items(), key=lambda item: item[0].startswith("lm_head"))
    for name, tensor in names:
        identity = (tensor.untyped_storage().data_ptr(), tensor.storage_offset())
        if identity in owners:
            continue
        owners[identity] = name
        kept[name] = tensor.detach().contiguous()
    return kept

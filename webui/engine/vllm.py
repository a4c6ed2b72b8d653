"""Local models served by vLLM (continuous batching), with transformers as the fallback.

`backend: vllm` runs the entry on a vLLM server that the app starts and owns
(webui.engine.vllm_server); `backend: auto`, the default for local sources, does the same when vLLM
is installed and supports the model on this machine and llama.cpp is not the better choice
(webui.engine.auto), saying why in the model's status.

The engine contract does not change with the engine (webui.engine.own_server): our template, our
token ids, every sampling setting with each request, and Stop aborts the request inside vLLM.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from webui.config import Settings
from webui.engine.base import EngineUnavailable, Weights
from webui.engine.folder_tokenizer import read_folder
from webui.engine.own_server import Dialect, RunningServer, file_name, server_weights, trained_context
from webui.engine.process import EngineServer
from webui.engine.vllm_server import ServerConfig
from webui.models.fingerprint import source_components
from webui.models.specs import ModelSpec

log = logging.getLogger(__name__)
PROBE_TIMEOUT_S = 180.0
DEFAULT_CPU_KV_CACHE_GB = 1  # 46k tokens of KV cache for SmolLM2-135M, 55k for Gemma 3 270M
_NOT_USABLE = "vLLM does not start on this machine"
VLLM = Dialect("vllm", lambda _params, _context: {"skip_special_tokens": True})
_VLLM_DTYPES = {"auto": "auto", "bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


class VllmUnavailable(EngineUnavailable):
    """vLLM cannot serve this entry on this machine."""


@dataclass(frozen=True)
class VllmInstall:
    python: str
    version: str
    device: str  # "cpu" or "cuda"
    archs: frozenset[str]


# ---- what vLLM can do here ----------------------------------------------------------------------
def find_vllm_python(setting: str, repo_root: Path) -> str | None:
    """The interpreter that has vLLM: the setting when given ("none" turns vLLM off), else the
    `.venv-vllm` the installer made beside the app, else this interpreter if it has vLLM."""
    if setting.strip().lower() in ("none", "off", "no", "false"):
        return None
    if setting:
        return setting
    beside = repo_root / ".venv-vllm" / "bin" / "python"
    if beside.exists():
        return str(beside)
    import importlib.util

    return sys.executable if importlib.util.find_spec("vllm") is not None else None


def probe(python: str, cache_dir: Path) -> VllmInstall:
    """What the vLLM behind `python` is: version, device and supported architectures. Importing
    vLLM takes 10-30 s, so the answer is kept on disk, keyed by the installation's files."""
    stamp = _install_stamp(python)
    record = cache_dir / "vllm" / "probe.json"
    try:
        known = json.loads(record.read_text())
    except (OSError, ValueError):
        known = {}
    entry = known.get(python)
    if not entry or entry.get("stamp") != stamp:
        entry = {"stamp": stamp, **_run_probe(python)}
        known[python] = entry
        try:
            record.parent.mkdir(parents=True, exist_ok=True)
            record.write_text(json.dumps(known))
        except OSError as exc:
            log.warning("could not keep the vLLM probe in %s: %s", record, exc)
    return VllmInstall(python, entry["version"], entry["device"], frozenset(entry["archs"]))


_PROBE = """
import json, vllm
from vllm.model_executor.models import ModelRegistry
from vllm.platforms import current_platform
print("PROBE " + json.dumps({"version": vllm.__version__, "device": current_platform.device_type,
                             "archs": sorted(ModelRegistry.get_supported_archs())}))
"""


@lru_cache(maxsize=8)
def _run_probe(python: str) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [python, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env={"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "PATH": "/usr/bin:/bin"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VllmUnavailable(f"vLLM at {python} does not start ({type(exc).__name__})", _NOT_USABLE) from None
    for line in done.stdout.splitlines():
        if line.startswith("PROBE "):
            return dict(json.loads(line[len("PROBE ") :]))
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    raise VllmUnavailable(f"vLLM is not usable with {python}: {last}", _NOT_USABLE)


def _install_stamp(python: str) -> str:
    """Changes when the vLLM installation changes (its package folder's modification time)."""
    root = Path(python).parent.parent
    folders = sorted(root.glob("lib/python3*/site-packages/vllm"))
    try:
        return f"{Path(python).resolve()}:{folders[0].stat().st_mtime_ns}" if folders else str(Path(python).resolve())
    except OSError:
        return str(python)


def why_not(spec: ModelSpec, folder: Path, install: VllmInstall) -> str | None:
    """Why vLLM cannot serve this entry on this machine, or None when it can."""
    arch = _architecture(folder)
    if arch not in install.archs:
        return f"vLLM {install.version} does not support {arch} on {install.device}"
    if install.device == "cpu" and spec.dtype == "fp16":
        return "vLLM's CPU build does not run fp16 (use bf16, fp32 or auto)"
    wants_gpu = spec.device.kind.startswith("cuda") or spec.device.max_memory
    if wants_gpu and install.device != "cuda":
        return f"the entry asks for {spec.device.kind} but vLLM here runs on {install.device}"
    if spec.device.kind == "cpu" and install.device != "cpu":
        return f"the entry asks for the CPU but this vLLM build runs on {install.device}"
    return None


def _architecture(folder: Path) -> str:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return "an unreadable config.json"
    archs = config.get("architectures") or []
    return str(archs[0]) if archs else f"a config without 'architectures' ({config.get('model_type', '?')})"


# ---- loaders ----------------------------------------------------------------------------------------
def load_vllm(spec: ModelSpec, settings: Settings) -> Weights:
    """Registry loader for `backend: vllm`: a server of our own for these weights."""
    served = try_serve(spec, settings)
    if isinstance(served, str):
        raise VllmUnavailable(served)
    return served


def try_serve(spec: ModelSpec, settings: Settings) -> Weights | str:
    """`backend: auto`'s call (webui.models.entries.AutoChoice): the entry on a vLLM server of its
    own when vLLM can serve it here, else why not. Raises VllmUnavailable when vLLM is not installed
    or does not run, EngineStartError when its server does not start."""
    install = _install(settings)  # first: a missing vLLM says so before a GGUF is dequantised for it
    folder = _folder(spec, settings)
    return why_not(spec, folder, install) or _serve(spec, settings, install, folder)


def default_concurrency(settings: Settings) -> int | None:
    """Generations at once for an entry on vLLM: its batch, where it is installed (None elsewhere)."""
    from webui.config import PACKAGE_DIR

    installed = find_vllm_python(settings.vllm_python, PACKAGE_DIR.parent) is not None
    return settings.batch_slots if installed else None


def _install(settings: Settings) -> VllmInstall:
    from webui.config import PACKAGE_DIR

    python = find_vllm_python(settings.vllm_python, PACKAGE_DIR.parent)
    if python is None:
        off = settings.vllm_python.strip().lower() in ("none", "off", "no", "false")
        raise VllmUnavailable("vLLM is turned off (--vllm-python none)" if off else "vLLM is not installed")
    return probe(python, Path(settings.cache_dir))


def _folder(spec: ModelSpec, settings: Settings) -> Path:
    from webui.models.loading import model_folder

    return model_folder(spec, Path(settings.cache_dir))


def _serve(spec: ModelSpec, settings: Settings, install: VllmInstall, folder: Path) -> Weights:
    context = spec.context_length or _model_context(folder) or 2048
    options = spec.engine_options
    server = EngineServer(
        ServerConfig(
            python=install.python,
            model_dir=folder,
            served_name=spec.name,
            max_model_len=context,
            log_file=Path(settings.cache_dir) / "vllm" / "logs" / f"{file_name(spec.name)}.log",
            cache_root=Path(settings.cache_dir) / "vllm",
            dtype=_VLLM_DTYPES[spec.dtype],
            enforce_eager=options.get("enforce_eager", True),
            max_num_seqs=options.get("max_num_seqs"),
            # On the CPU, vLLM would otherwise reserve 92% of the machine's memory for its KV cache.
            kv_cache_gb=options.get("kv_cache_gb", DEFAULT_CPU_KV_CACHE_GB) if install.device == "cpu" else None,
            gpu_memory_utilization=options.get("gpu_memory_utilization") if install.device == "cuda" else None,
            cpu_cores=options.get("cpu_cores"),
            extra_args=tuple(options.get("extra_args", ())),
        )
    )
    server.launch()
    try:  # our tokenizer while vLLM boots
        tokenizer = _tokenizer(folder)
    except BaseException:
        server.stop()
        raise
    server.wait_ready(settings.vllm_start_timeout_s)
    weights = server_weights(
        spec.name, server, tokenizer, context, settings, VLLM, engine=f"vLLM {install.version}", device=install.device
    )
    weights.identity = source_components(spec.source, _VLLM_DTYPES[spec.dtype], f"vllm {install.version}")
    return weights


def attach(spec: ModelSpec, settings: Settings, base_url: str, engine: str = "vLLM") -> Weights:
    """Weights for an entry that a vLLM server started elsewhere already serves under the entry's
    name (the bench asks the app's own servers for "the engine alone", rather than starting a second
    copy of every model beside them): the same prompt, token ids and settings as `_serve`'s."""
    folder = _folder(spec, settings)
    context = spec.context_length or _model_context(folder) or 2048
    return server_weights(
        spec.name, RunningServer(base_url), _tokenizer(folder), context, settings, VLLM, engine=engine, device=""
    )


def _tokenizer(folder: Path) -> Any:
    """`tokenizers` and jinja2, not transformers: nothing of torch in the app for a model on vLLM."""
    return read_folder(folder)


def _model_context(folder: Path) -> int | None:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return trained_context(config)

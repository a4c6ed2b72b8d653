"""Local models served by vLLM (continuous batching), with transformers as the fallback.

`backend: vllm` runs the entry on a vLLM server that the app starts and owns
(webui.engine.vllm_server); `backend: auto`, the default for local sources, does the same when vLLM
is installed and supports the model on this machine, and otherwise loads it with transformers, saying
why in the model's status ("transformers: vLLM does not support Gemma3ForCausalLM on cpu").

The engine contract does not change with the engine. Our template renders the prompt and our
tokenizer turns it into token ids, which vLLM receives as they are (`/v1/completions` with a list of
ids), so the prompt shown under "Show prompt" is exactly what the model saw; the context is fitted
the same way; stop strings (ours and the template's), the per-request seed, repetition penalty and
ignore_eos go with each request. Stop, a closed tab or a dropped API client close the HTTP stream,
which makes vLLM abort the request at once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import httpx

from webui.config import Settings
from webui.engine.base import ENGINE_EXITED, Slots, Weights
from webui.engine.openai_remote import CONNECTION_LOST, UNREACHABLE, Health, RemoteBackend
from webui.engine.process import EngineServer, EngineStartError
from webui.engine.templates import PromptBuilder, Rendered
from webui.engine.vllm_server import ServerConfig
from webui.errors import ConfigError, ModelNotReady
from webui.models.fingerprint import source_components
from webui.models.specs import ModelSpec
from webui.types import Finished, FinishReason, Message, SamplingParams, StreamEvent

log = logging.getLogger(__name__)
PROBE_TIMEOUT_S = 180.0
DEFAULT_CPU_KV_CACHE_GB = 1  # 46k tokens of KV cache for SmolLM2-135M, 55k for Gemma 3 270M
GPU_MEMORY_BUDGET = 0.9  # the share of a GPU that the vLLM models on it divide among themselves
_NOT_USABLE = "vLLM does not start on this machine"
_VLLM_DTYPES = {"auto": "auto", "bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


class VllmUnavailable(ConfigError):
    """vLLM cannot serve this entry on this machine; the message says why (shown with the fallback,
    or as the failure of a `backend: vllm` entry, which is not retried: the machine will not change).
    `public`, what every visitor reads in the status, is the message itself unless it names a path."""

    def __init__(self, message: str, public: str | None = None) -> None:
        super().__init__(message)
        self.public = public or message


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


# ---- the backend ----------------------------------------------------------------------------------
class VllmBackend(RemoteBackend):
    """A variant of a model on our own vLLM server: our prompt, as token ids, over HTTP."""

    def __init__(
        self,
        spec: ModelSpec,
        client: httpx.Client,
        slots: Slots,
        health: Health,
        server: EngineServer | RunningServer,
        prompts: PromptBuilder,
        *,
        queue_timeout_s: float,
    ) -> None:
        super().__init__(spec, client, slots, health, queue_timeout_s=queue_timeout_s)
        self.server = server
        self.prompts = prompts
        self.tokenizer = prompts.tokenizer

    @property
    def context_length(self) -> int:
        return self.prompts.context_length

    def health(self) -> str | None:
        return ENGINE_EXITED if self.server.failure() else super().health()

    def render_prompt(self, messages: Sequence[Message]) -> str:
        return self.prompts.render(messages)

    def prompt_tokens(self, prompt: Sequence[Message] | str) -> int:
        return self.prompts.count(prompt)

    def template_source(self) -> str:
        return self.prompts.template.source

    def stream(
        self, messages: Sequence[Message], params: SamplingParams, cancel: threading.Event | None = None
    ) -> Iterator[StreamEvent]:
        rendered = self.prompts.prepare(messages, params)
        params = params.replace(stop=(*params.stop, *self.prompts.template.stop))
        return self._send(rendered, params, cancel, self.prompts.template.name)

    def complete(
        self, prompt: str, params: SamplingParams, cancel: threading.Event | None = None
    ) -> Iterator[StreamEvent]:
        return self._send(self.prompts.raw(prompt, params), params, cancel, "raw")

    def _send(
        self, rendered: Rendered, params: SamplingParams, cancel: threading.Event | None, template: str
    ) -> Iterator[StreamEvent]:
        if self.server.failure() is not None or self.client.is_closed:  # died (and failed or about to be)
            raise ModelNotReady(f"{self.name} is not ready ({ENGINE_EXITED})")

        def finish(final: Finished) -> Finished:
            extra: dict[str, Any] = {
                "dropped_messages": rendered.dropped_messages,
                "template": template,
                "engine": "vllm",
            }
            lost = (final.extra or {}).get("upstream_failure") in (UNREACHABLE, CONNECTION_LOST)
            if final.reason is FinishReason.ERROR and (lost or self.server.failure() is not None):
                extra["engine_down"] = True  # our own engine died under the request: it comes back
            return Finished(
                final.reason,
                prompt_tokens=len(rendered.token_ids),
                completion_tokens=final.completion_tokens,
                ttft_s=final.ttft_s,
                tokens_per_s=final.tokens_per_s,
                error=final.error,
                prompt=rendered.text,
                extra=extra,
            )

        payload = {"prompt": rendered.token_ids, "skip_special_tokens": True}
        return self._start(
            "completions",
            payload,
            params,
            cancel,
            finish=finish,
            prompt_tokens=len(rendered.token_ids),
            prompt=rendered.text,
        )


# ---- loaders ----------------------------------------------------------------------------------------
def load_vllm(spec: ModelSpec, settings: Settings) -> Weights:
    """Registry loader for `backend: vllm`: a server of our own for these weights."""
    install = _install(settings)
    folder = _folder(spec, settings)
    problem = why_not(spec, folder, install)
    if problem:
        raise VllmUnavailable(problem)
    return _serve(spec, settings, install, folder)


def load_auto(spec: ModelSpec, settings: Settings) -> Weights:
    """Registry loader for `backend: auto`: vLLM where it can serve the entry, else transformers,
    with the reason in the status."""
    from webui.engine.transformers import load_transformers

    try:
        install = _install(settings)
        folder = _folder(spec, settings)
        reason = why_not(spec, folder, install)
        if reason is None:
            return _serve(spec, settings, install, folder)
    except (VllmUnavailable, EngineStartError) as exc:
        # the status shows the public reason: the whole one may name paths and ports
        log.warning("%s: serving with transformers: %s", spec.name, exc)
        reason = exc.public
    else:
        log.warning("%s: serving with transformers: %s", spec.name, reason)
    weights = load_transformers(spec, settings)
    weights.engine = f"transformers: {reason}"
    weights.concurrency = settings.max_concurrency  # the registry sized the slots for vLLM's batching
    return weights


def default_concurrency(settings: Settings) -> int:
    """Generations at once for an entry that may run on vLLM: vLLM's batch where it is installed
    (an `auto` entry it cannot serve is resized to transformers' when it falls back)."""
    from webui.config import PACKAGE_DIR

    installed = find_vllm_python(settings.vllm_python, PACKAGE_DIR.parent) is not None
    return settings.vllm_concurrency if installed else settings.max_concurrency


def place(specs: Sequence[ModelSpec], cores: int) -> list[ModelSpec]:
    """The entries that may run on vLLM, each set of weights with its part of the GPU and its cores."""
    return share_cpu_cores(share_gpu_memory(specs), cores)


def share_gpu_memory(specs: Sequence[ModelSpec]) -> list[ModelSpec]:
    """Entries (that may run on vLLM) that do not set gpu_memory_utilization get an equal part of
    what the others leave of GPU_MEMORY_BUDGET, so that several models fit on one GPU together,
    or the one that does not fit fails with vLLM's own reason (not an out-of-memory later on).
    Variants share one server, so a set of weights counts once."""
    candidates = list(specs)
    fixed = {s.weights_key: s.vllm["gpu_memory_utilization"] for s in candidates if "gpu_memory_utilization" in s.vllm}
    shared = {s.weights_key for s in candidates} - set(fixed)
    if not shared:
        return list(specs)
    part = round(max(0.05, GPU_MEMORY_BUDGET - sum(fixed.values())) / len(shared), 3)
    return [
        dataclasses.replace(s, vllm={**s.vllm, "gpu_memory_utilization": part}) if s.weights_key in shared else s
        for s in specs
    ]


def share_cpu_cores(specs: Sequence[ModelSpec], cores: int) -> list[ModelSpec]:
    """On the CPU each vLLM server runs its model on its own OpenMP threads, pinned to cores; left to
    itself every server pins to the same first cores, and two models in a battle then take turns on
    one core while the others idle. So entries that may run on vLLM and do not set `cpu_cores` get
    cores of their own: with one such model vLLM chooses (it keeps a core for its HTTP side); with
    several, the cores are divided among them (keeping one for the app when there are enough)."""
    keys = list(dict.fromkeys(s.weights_key for s in specs if "cpu_cores" not in s.vllm))
    if len(keys) < 2 or cores < 2:
        return list(specs)
    usable = cores - 1 if cores > len(keys) else cores
    each = max(1, usable // len(keys))
    ranges = {}
    for i, key in enumerate(keys):
        first = (i * each) % usable
        ranges[key] = str(first) if each == 1 else f"{first}-{first + each - 1}"
    return [
        dataclasses.replace(s, vllm={**s.vllm, "cpu_cores": ranges[s.weights_key]}) if s.weights_key in ranges else s
        for s in specs
    ]


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
    options = spec.vllm
    server = EngineServer(
        ServerConfig(
            python=install.python,
            model_dir=folder,
            served_name=spec.name,
            max_model_len=context,
            log_file=Path(settings.cache_dir) / "vllm" / "logs" / f"{_file_name(spec.name)}.log",
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
    try:  # our tokenizer (and the transformers import) while vLLM boots: ~15 s off every start
        tokenizer = _tokenizer(folder)
    except BaseException:
        server.stop()
        raise
    server.wait_ready(settings.vllm_start_timeout_s)
    weights = _weights(
        spec.name, server, tokenizer, context, settings, engine=f"vLLM {install.version}", device=install.device
    )
    weights.identity = source_components(spec.source, _VLLM_DTYPES[spec.dtype], f"vllm {install.version}")
    return weights


class RunningServer:
    """A vLLM server that another process started and will stop: `attach` talks to it."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def failure(self) -> str | None:
        return None

    def on_exit(self, listener: Callable[[], None]) -> None:
        pass  # not ours to watch

    def stop(self) -> None:
        pass


def attach(spec: ModelSpec, settings: Settings, base_url: str, engine: str = "vLLM") -> Weights:
    """Weights for an entry that a vLLM server started elsewhere already serves under the entry's
    name (the bench asks the app's own servers for "the engine alone", rather than starting a second
    copy of every model beside them): the same prompt, token ids and settings as `_serve`'s."""
    folder = _folder(spec, settings)
    context = spec.context_length or _model_context(folder) or 2048
    return _weights(spec.name, RunningServer(base_url), _tokenizer(folder), context, settings, engine=engine, device="")


def _tokenizer(folder: Path) -> Any:
    from webui.models.loading import import_transformers

    import_transformers()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def _weights(
    name: str,
    server: EngineServer | RunningServer,
    tokenizer: Any,
    context: int,
    settings: Settings,
    *,
    engine: str,
    device: str,
) -> Weights:
    client = httpx.Client(
        base_url=server.base_url,
        timeout=httpx.Timeout(None, connect=5.0),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
    )
    health = Health(name)

    def make_backend(variant: ModelSpec, slots: Slots) -> VllmBackend:
        prompts = PromptBuilder(variant, tokenizer, context)
        return VllmBackend(
            _as_remote(variant, server.base_url),
            client,
            slots,
            health,
            server,
            prompts,
            queue_timeout_s=settings.queue_timeout_s,
        )

    def close() -> None:
        client.close()
        server.stop()

    return Weights(
        make_backend, device=device, engine=engine, close=close, failure=server.failure, on_failure=server.on_exit
    )


def _as_remote(spec: ModelSpec, base_url: str) -> ModelSpec:
    """The entry as the HTTP client sees it: our server, the model under its own name."""
    return dataclasses.replace(spec, base_url=f"{base_url}/v1", remote_model=spec.name)


def _model_context(folder: Path) -> int | None:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    value = text.get("max_position_embeddings") if isinstance(text, Mapping) else None
    return value if isinstance(value, int) and 16 <= value <= 10_000_000 else None


def _file_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)

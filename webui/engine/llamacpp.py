"""GGUF models served by llama.cpp's `llama-server`: one server per set of weights, started and owned
by the app, batching the generations of every visitor (continuous batching over `slots`).

`backend: llamacpp` runs the entry there; `backend: auto` does so on a machine without an NVIDIA GPU
when the source is a GGUF file (webui.engine.auto). The server reads the GGUF as it is: no
dequantised copy, ready in about a second. `scripts/install-llamacpp.sh` builds the binary.

The engine contract is vLLM's (webui.engine.own_server): our template and our token ids, every
sampling setting with each request, and Stop aborts the request inside the server. The token ids
come from the server's own tokenizer and the template from the GGUF's header, rendered with jinja2
(webui.engine.server_tokenizer): nothing of transformers or torch is imported for a model here, and
the model is ready as soon as its server answers. llama.cpp's own sampler defaults differ from the other engines' (min_p
0.05, top_k 40, a repetition window of 64 tokens); each request sets them to what Hugging Face's
settings mean, so the same slider values mean the same thing on every engine.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import httpx

from webui.config import PACKAGE_DIR, Settings
from webui.engine.base import EngineUnavailable, Weights
from webui.engine.own_server import Dialect, file_name, server_weights
from webui.engine.placement import has_nvidia_gpu
from webui.engine.process import EngineServer
from webui.engine.server_tokenizer import ServerTokenizer, special_tokens
from webui.models.fingerprint import local_components
from webui.models.gguf_meta import GGUFError, read_metadata
from webui.models.sources import ResolvedSource, resolve_source
from webui.models.specs import ModelSpec
from webui.types import SamplingParams

log = logging.getLogger(__name__)
START_TIMEOUT_S = 120.0  # loading a GGUF takes seconds; this is for a slow disk
DEFAULT_CONTEXT = 4096  # tokens one request may use unless the entry says
# The KV cache every slot of a server draws from (as vLLM's pool): allocated up front, so not
# slots x context (8 x 8192 tokens of SmolLM2 would be 1.5 GB)
DEFAULT_KV_CACHE_TOKENS = 16384
_OFF = ("none", "off", "no", "false")
_NOT_USABLE = "llama.cpp does not start on this machine"


class LlamaCppUnavailable(EngineUnavailable):
    """llama.cpp cannot serve this entry on this machine."""


def find_llama_server(setting: str, repo_root: Path = PACKAGE_DIR.parent) -> str | None:
    """The llama-server binary: the setting when given ("none" turns llama.cpp off), else the one the
    installer linked beside the app, else one on PATH."""
    if setting.strip().lower() in _OFF:
        return None
    if setting:
        return setting
    beside = repo_root / ".llama.cpp" / "bin" / "llama-server"
    if beside.exists():
        return str(beside)
    return shutil.which("llama-server")


@lru_cache(maxsize=8)
def server_version(binary: str) -> str:
    """ "0c1e570" (the llama.cpp commit it was built from), or why the binary does not run."""
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LlamaCppUnavailable(
            f"llama-server at {binary} does not run ({type(exc).__name__})", _NOT_USABLE
        ) from None
    text = done.stdout + done.stderr
    found = re.search(r"commit (?!unknown)([\w.-]+)", text) or re.search(r"version: (\S+)", text)
    if done.returncode != 0 or not found:
        raise LlamaCppUnavailable(
            f"llama-server at {binary} does not run: {text.strip()[-200:] or 'no output'}", _NOT_USABLE
        )
    return found.group(1)


def why_not(spec: ModelSpec, source: ResolvedSource) -> str | None:
    """Why llama.cpp cannot serve this entry, or None when it can."""
    if not source.gguf_file:
        return "llama.cpp serves GGUF files and the source is a model folder"
    if spec.device.kind.startswith(("cuda", "mps")) or spec.device.max_memory:
        return f"the entry asks for {spec.device.kind if not spec.device.max_memory else 'a GPU'}; llama.cpp here runs on the CPU"
    if spec.dtype != "auto":
        return f"the entry asks for {spec.dtype}; llama.cpp runs the GGUF's own quantisation (dtype: auto)"
    return None


def _request(params: SamplingParams, context: int) -> dict[str, Any]:
    """llama.cpp's names for Hugging Face's sampling settings, and its extra samplers off."""
    params = params.effective()
    return {
        "repeat_penalty": params.repetition_penalty,
        "repeat_last_n": context,  # every token so far, the prompt included, as HF and vLLM count them
        "top_k": params.top_k,  # 0: off (llama.cpp's default is 40)
        "min_p": 0.0,
        "typical_p": 1.0,
    }


LLAMACPP = Dialect("llamacpp", _request)


@dataclass(frozen=True)
class LlamaServerConfig:
    binary: str
    model_file: Path
    served_name: str
    context: int  # tokens one request may use
    slots: int
    kv_cache_tokens: int  # the pool all slots share
    log_file: Path
    cache_root: Path
    cpu_cores: str | None = None  # "0" or "0-3": the server's threads, pinned there
    extra_args: tuple[str, ...] = ()

    label = "llama.cpp"

    @property
    def supervisor_python(self) -> str:
        return sys.executable

    @property
    def core_range(self) -> tuple[int, int] | None:
        """The first and last core of `cpu_cores` ("2-5" -> (2, 5), "1" -> (1, 1))."""
        if not self.cpu_cores:
            return None
        first, _, last = self.cpu_cores.partition("-")
        return int(first), int(last or first)

    @property
    def threads(self) -> int:
        if self.core_range:
            first, last = self.core_range
            return last - first + 1
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

    def server_command(self, port: int) -> list[str]:
        args = [
            self.binary,
            "--model",
            str(self.model_file),
            "--alias",
            self.served_name,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--parallel",
            str(self.slots),
            "--kv-unified",
            "--ctx-size",
            str(max(self.kv_cache_tokens, self.context)),
            "--kv-unified-per-slot",
            str(self.context),
            "--cont-batching",
            "--threads",
            str(self.threads),
            "--threads-batch",
            str(self.threads),
            "--metrics",
            "--no-webui",
            "--offline",
        ]
        if self.core_range:
            first, last = self.core_range
            args += ["--cpu-range", f"{first}-{last}", "--cpu-strict", "1"]
        return [*args, *self.extra_args]

    def environment(self) -> dict[str, str]:
        # LLAMA_ARG_* would silently override the arguments above
        return {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}


def default_concurrency(settings: Settings) -> int | None:
    """Slots of one llama.cpp server: it batches them, as vLLM does (None where it is not installed)."""
    return settings.batch_slots if find_llama_server(settings.llama_server) else None


# ---- loaders ----------------------------------------------------------------------------------------
def load_llamacpp(spec: ModelSpec, settings: Settings) -> Weights:
    """Registry loader for `backend: llamacpp`."""
    binary = installed_server(settings)
    source = resolve_source(spec.source)
    problem = why_not(spec, source)
    if problem:
        raise LlamaCppUnavailable(problem)
    return serve(spec, settings, binary, source)


def try_serve(spec: ModelSpec, settings: Settings) -> Weights | str:
    """`backend: auto`'s call (webui.models.entries.AutoChoice): the entry on llama.cpp when it can
    serve it here; else why not, or "" where it never would (a model folder, or a machine with an
    NVIDIA GPU, which vLLM serves better). Raises LlamaCppUnavailable when it is not installed. The
    source is resolved once (a packaged model's assembler checks its whole file on every call)."""
    source = resolve_source(spec.source)
    if not source.gguf_file or has_nvidia_gpu():
        return ""
    binary = installed_server(settings)
    return why_not(spec, source) or serve(spec, settings, binary, source)


def installed_server(settings: Settings) -> str:
    binary = find_llama_server(settings.llama_server)
    if binary is None:
        off = settings.llama_server.strip().lower() in _OFF
        raise LlamaCppUnavailable(
            "llama.cpp is turned off (--llama-server none)" if off else "llama.cpp is not installed"
        )
    if not os.access(binary, os.X_OK):
        raise LlamaCppUnavailable(f"llama-server not found at {binary}", "llama.cpp is not installed")
    server_version(binary)  # runs, or says why not
    return binary


def serve(spec: ModelSpec, settings: Settings, binary: str, source: ResolvedSource) -> Weights:
    options = spec.engine_options
    own = options if spec.backend == "llamacpp" else {}  # an `auto` entry's options are vLLM's; the cores are ours
    config = LlamaServerConfig(
        binary=binary,
        model_file=source.path,
        served_name=spec.name,
        context=spec.context_length or DEFAULT_CONTEXT,
        slots=spec.max_concurrency or settings.batch_slots,
        kv_cache_tokens=own.get("kv_cache_tokens", DEFAULT_KV_CACHE_TOKENS),
        log_file=Path(settings.cache_dir) / "llamacpp" / "logs" / f"{file_name(spec.name)}.log",
        cache_root=Path(settings.cache_dir) / "llamacpp",
        cpu_cores=options.get("cpu_cores"),
        extra_args=tuple(own.get("extra_args", ())),
    )
    server = EngineServer(config)
    server.launch()
    try:  # the GGUF's own chat template (a fraction of a second) while the server loads the weights
        chat_template = _chat_template(source)
        server.wait_ready(START_TIMEOUT_S)
        client = httpx.Client(base_url=server.base_url, timeout=httpx.Timeout(30.0, connect=5.0))
        trained, props = _served(client)
    except BaseException:
        server.stop()
        raise
    context = min(config.context, trained or config.context)
    tokenizer = ServerTokenizer(spec.name, client, chat_template, special_tokens(props))
    version = server_version(binary)
    weights = server_weights(
        spec.name, server, tokenizer, context, settings, LLAMACPP, engine=f"llama.cpp {version}", device="cpu"
    )
    weights.identity = local_components(source.folder, source.gguf_file, "gguf", f"llama.cpp {version}")
    return weights


def _chat_template(source: ResolvedSource) -> str | None:
    """The chat template stored in the GGUF, or None (a base model)."""
    try:
        found = read_metadata(source.path).get("tokenizer.chat_template")
    except (OSError, GGUFError) as exc:  # llama-server says what is wrong with the file, if anything is
        log.warning("the chat template of %s could not be read: %s", source.path, exc)
        return None
    return found if isinstance(found, str) and found.strip() else None


def _served(client: httpx.Client) -> tuple[int | None, dict[str, Any]]:
    """What the server read from the GGUF: the context the model was trained for (or None), and its
    /props (the special tokens' text)."""
    trained: int | None = None
    props: dict[str, Any] = {}
    try:
        value = client.get("/v1/models").json()["data"][0]["meta"]["n_ctx_train"]
        trained = value if isinstance(value, int) and value >= 16 else None
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        pass
    try:
        answer = client.get("/props").json()
        props = answer if isinstance(answer, dict) else {}
    except (httpx.HTTPError, ValueError):
        pass
    return trained, props

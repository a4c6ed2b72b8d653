"""What a models-file entry may say, declared once per backend (pydantic), and the table of backends.

Each backend has an entry class listing exactly the keys that apply to it; a key that does not
apply (a `template` on a remote entry, whose server applies its own) is an error like a typo, never
silently ignored. `BACKENDS` registers each class with its engine, so adding a backend is one
engine module plus an entry class and one row here (docs/models.md). `models_schema()` is the JSON schema of a whole models file,
published as assets/models.schema.json for editors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictStr, create_model, field_validator

from webui.types import MODEL_NAME_MAX_CHARS

DTYPES = ("auto", "bf16", "fp16", "fp32")
DEVICE_PATTERN = r"^(auto|cpu|cuda(:\d+)?|mps)$"
MEMORY_PATTERN = r"^\d+(\.\d+)?\s*(GiB|MiB|GB|MB)$"
TEMPLATE_PATTERN = r"^(auto|chat_template|fschat:.+|jinja:.+)$"


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number, got {value!r}")
    return value


def _whole(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError(f"must be a whole number, got {value!r}")
    return int(value)


Number = Annotated[float, BeforeValidator(_number)]
Whole = Annotated[int, BeforeValidator(_whole)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Sampling(_Strict):
    """Defaults for the UI's sliders and the API (ranges are checked by SamplingParams.validate,
    the one check the UI, the API and the models file share)."""

    temperature: Number | None = Field(None, description="0..2; 0 = greedy")
    top_p: Number | None = Field(None, description="(0, 1]")
    top_k: Whole | None = Field(None, description="0..1000000; 0 = off")
    max_new_tokens: Whole | None = Field(None, description="1..context_length")
    repetition_penalty: Number | None = Field(None, description="(0, 2]")
    seed: Whole | None = Field(None, description="same seed, same output")
    ignore_eos: StrictBool | None = None

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class MaxMemory(_Strict):
    max_memory: dict[str, StrictStr] = Field(
        description="per device: a GPU index, cuda:N or cpu -> an amount like '20GiB' or '512MiB'"
    )

    @field_validator("max_memory", mode="before")
    @classmethod
    def _keys_as_text(cls, value: Any) -> Any:
        return {str(k): v for k, v in value.items()} if isinstance(value, dict) else value

    @field_validator("max_memory")
    @classmethod
    def _devices_and_amounts(cls, value: dict[str, str]) -> dict[str, str]:
        for device, amount in value.items():
            if not (device.isdigit() or device == "cpu" or re.match(r"^cuda:\d+$", device)):
                raise ValueError(f"device {device!r} must be a GPU index, cuda:N or cpu")
            if not re.match(MEMORY_PATTERN, amount):
                raise ValueError(f"{device}: amount must look like '20GiB' or '512MiB', got {amount!r}")
        return value


class Entry(_Strict):
    """Keys every backend shares."""

    name: StrictStr = Field(min_length=1, max_length=MODEL_NAME_MAX_CHARS, description="display name, unique")
    description: StrictStr = ""
    system_prompt: StrictStr | None = Field(None, description="used unless the conversation brings its own")
    sampling: Sampling = Sampling()
    context_length: Whole | None = Field(None, ge=16, description="tokens; default: the model's own")
    stop: StrictStr | list[StrictStr] = Field(default_factory=list, description="stop strings, never shown")
    weight: Number = Field(1.0, ge=0, description="chance of being drawn for a battle; 0 keeps it out")
    max_concurrency: Whole | None = Field(None, ge=1, description="simultaneous generations on these weights")
    family: StrictStr | None = Field(
        None, min_length=1, description="a family of variants: the leaderboard says when its best is the best of many"
    )

    def spec_fields(self) -> dict[str, Any]:
        """What this kind of entry adds to its ModelSpec beyond the shared keys (a remote entry's
        server); the engine's own options block is the row's `options`."""
        return {}

    @field_validator("stop")
    @classmethod
    def _stop_strings(cls, value: str | list[str]) -> list[str]:
        stops = [value] if isinstance(value, str) else value
        if not all(stops):
            raise ValueError("stop strings must be non-empty")
        return stops


class LocalEntry(Entry):
    """Weights on this machine."""

    source: StrictStr = Field(min_length=1, description="folder, .gguf file, hf:org/name (cached), package:...")
    dtype: Literal["auto", "bf16", "fp16", "fp32"] = "auto"
    device: MaxMemory | StrictStr = Field("auto", description="auto | cpu | cuda | cuda:N | mps | {max_memory: ...}")
    template: StrictStr = Field("auto", description="auto | chat_template | fschat:NAME | jinja:PATH")

    @field_validator("template")
    @classmethod
    def _template(cls, value: str) -> str:
        if not re.match(TEMPLATE_PATTERN, value):
            raise ValueError(f"must be auto, chat_template, fschat:NAME or jinja:PATH, got {value!r}")
        return value

    @field_validator("device")
    @classmethod
    def _device(cls, value: MaxMemory | str) -> MaxMemory | str:
        if isinstance(value, str) and not re.match(DEVICE_PATTERN, value):
            raise ValueError(f"must be auto, cpu, cuda, cuda:N, mps or a mapping with max_memory; got {value!r}")
        return value


class TransformersOptions(_Strict):
    """How transformers serves the entry's weights (docs/models.md, "transformers")."""

    kv_cache_tokens: Whole | None = Field(
        None,
        ge=1,
        description="continuous batching: the paged KV cache all its requests share, in tokens (whole pages of 256, "
        "allocated at load); default --transformers-kv-cache-tokens (sized at load: 8192 on a CPU)",
    )


class TransformersEntry(LocalEntry):
    backend: Literal["transformers"]
    transformers: TransformersOptions = TransformersOptions()


class VllmOptions(_Strict):
    """How the app starts the entry's vLLM server (docs/models.md, "vLLM")."""

    kv_cache_gb: Whole | None = Field(
        None, ge=1, description="CPU: whole GiB for the KV cache (VLLM_CPU_KVCACHE_SPACE); default 1"
    )
    gpu_memory_utilization: Number | None = Field(
        None,
        gt=0,
        le=1,
        description="GPU: share of the GPU's memory for this model; default: shared out among the models on it",
    )
    enforce_eager: StrictBool = Field(
        True, description="skip torch.compile: ready in about 30 s instead of minutes, about half the throughput on CPU"
    )
    max_num_seqs: Whole | None = Field(None, ge=1, description="requests batched at once; default vLLM's")
    cpu_cores: StrictStr | None = Field(
        None,
        description="CPU cores for the model's threads (VLLM_CPU_OMP_THREADS_BIND), "
        "e.g. '0' or '0-3'; default: vLLM's own choice",
    )
    extra_args: list[StrictStr] = Field(default_factory=list, description="more vllm serve arguments, as is")


class VllmEntry(LocalEntry):
    backend: Literal["vllm"]
    vllm: VllmOptions = VllmOptions()


class LlamaCppOptions(_Strict):
    """How the app starts the entry's llama.cpp server (docs/models.md, "llama.cpp")."""

    cpu_cores: StrictStr | None = Field(
        None,
        pattern=r"^\d+(-\d+)?$",
        description="CPU cores for the model's threads, e.g. '0' or '0-3'; default: shared out among the models",
    )
    kv_cache_tokens: Whole | None = Field(
        None, ge=256, description="the KV cache all requests share, in tokens (allocated up front); default 16384"
    )
    extra_args: list[StrictStr] = Field(default_factory=list, description="more llama-server arguments, as is")


class LlamaCppEntry(LocalEntry):
    """A GGUF file on llama.cpp's own server (scripts/install-llamacpp.sh builds it)."""

    backend: Literal["llamacpp"]
    llamacpp: LlamaCppOptions = LlamaCppOptions()


class AutoEntry(LocalEntry):
    """The best engine here: llama.cpp for a GGUF file on a machine without an NVIDIA GPU, else vLLM
    where it is installed and supports the model, else transformers (webui/engine/auto.py)."""

    backend: Literal["auto"] = "auto"
    vllm: VllmOptions = VllmOptions()
    transformers: TransformersOptions = TransformersOptions()  # where it falls back to transformers


class OpenAIEntry(Entry):
    """A model served by another OpenAI-compatible server, which applies its own chat template."""

    backend: Literal["openai"]
    base_url: StrictStr | list[StrictStr] = Field(
        description="e.g. http://gpu-box:8000/v1, or a list of replicas of the model (requests are spread over them)"
    )
    remote_model: StrictStr = Field(min_length=1, description="the model id on that server")
    api_key_env: StrictStr | None = Field(None, description="environment variable holding the key")
    timeout_s: Number = Field(120.0, gt=0)
    connect_timeout_s: Number = Field(10.0, gt=0)
    max_concurrency: Whole | None = Field(
        None,
        ge=1,
        description="requests in flight to the server, all replicas together; default 16 per replica "
        "(--remote-concurrency): the server batches them",
    )

    def spec_fields(self) -> dict[str, Any]:
        first = self.base_url if isinstance(self.base_url, str) else self.base_url[0]
        return {
            "base_url": first.rstrip("/"),
            "remote_model": self.remote_model,
            "api_key_env": self.api_key_env,
            "timeout_s": float(self.timeout_s),
            "connect_timeout_s": float(self.connect_timeout_s),
        }

    @field_validator("base_url")
    @classmethod
    def _urls(cls, value: str | list[str]) -> str | list[str]:
        urls = [value] if isinstance(value, str) else value
        if not urls:
            raise ValueError("list at least one URL")
        for url in urls:
            if not re.match(r"^https?://[^/\s]+", url):
                raise ValueError(f"must be an http:// or https:// URL, got {url!r}")
        stripped = [url.rstrip("/") for url in urls]
        if len(set(stripped)) != len(stripped):
            raise ValueError(f"lists a replica twice: {sorted({u for u in stripped if stripped.count(u) > 1})}")
        return value


def _judge_weight(value: Any) -> Any:
    if value == "auto":
        return value
    value = _number(value)
    if not 0 <= value < float("inf"):
        raise ValueError(f"must be 'auto' or a number of 0 or more, got {value!r}")
    return value


class JudgeBlock(_Strict):
    """The models file's `judge:` block (docs/judge.md): the entry that judges battles, its prompt,
    how much one verdict weighs beside one human vote in the composite board, and how long an
    answer may run (a small judge that rambles without a mark wastes the rest of its budget)."""

    model: StrictStr = Field(min_length=1, description="the name of an entry above")
    prompt: StrictStr | None = Field(None, description="a prompt file, relative to this file; default ours")
    weight: Annotated[float | Literal["auto"], BeforeValidator(_judge_weight)] = Field(
        "auto", description="a verdict's weight beside a human vote's 1, or 'auto'"
    )
    max_tokens: Whole | None = Field(
        None, ge=1, description="at most this many tokens per answer; default the entry's max_new_tokens"
    )


@dataclass(frozen=True)
class AutoChoice:
    """Where `backend: auto` puts an engine (webui.engine.auto): it tries the engines in `rank`
    order, best first, and the last one is the fallback, which serves every entry everywhere.

    - `label`: the engine's name in the status ("llama.cpp"), written before a reason of its that
      does not name it already ("transformers: llama.cpp: engine failed to start").
    - `try_serve(spec, settings) -> Weights | str`: the entry served by the engine when it can serve
      it on this machine; else why not, or "" where it never is a candidate (llama.cpp for a model
      folder: said nowhere). It may raise EngineUnavailable or EngineStartError instead, whose
      `public` is the reason. One call, so that what the check found (the resolved source, the
      install) serves the entry without being looked up again. The fallback has none: its `load`.
    """

    rank: int
    label: str
    try_serve: str | None = None


@dataclass(frozen=True)
class Backend:
    """One backend: the keys its entries take, and its engine as "module:function" names that are
    imported on first use (a remote-only setup never imports torch).

    - `load(spec, settings) -> Weights`: the registry's loader.
    - `concurrency(settings) -> int | None`: generations one copy of the weights runs well at once,
      for an engine that batches; None where it cannot say (not installed here). Without it, or on
      None, settings.max_concurrency.
    - `place(specs, cores) -> specs`: shares devices out among this engine's entries before
      anything loads (each vLLM server its own cores and part of the GPU).
    - `own_weights`: every entry is its own copy (a remote server), never a variant of another.
    - `options`: the entry's keys holding the engine's own options (`llamacpp: {...}`), merged into
      `spec.engine_options` (with what `place` shares out added); `auto` reads vLLM's and
      transformers' (no key is shared; each engine reads its own).
    - `gpu_share`: its servers take a part of a GPU's memory (webui.engine.placement shares it out).
    - `auto`: where `backend: auto` tries it, if it does (AutoChoice).
    """

    entry: type[Entry]
    load: str
    concurrency: str | None = None
    place: str | None = None
    own_weights: bool = False
    options: tuple[str, ...] = ()
    gpu_share: bool = False
    auto: AutoChoice | None = None


# Adding a backend: an engine module with its loader, an entry class above, and one row here.
BACKENDS: dict[str, Backend] = {
    "auto": Backend(
        AutoEntry,
        "webui.engine.auto:load_auto",
        concurrency="webui.engine.auto:default_concurrency",
        place="webui.engine.placement:place",
        options=("vllm", "transformers"),
        gpu_share=True,  # it may run on vLLM
    ),
    "vllm": Backend(
        VllmEntry,
        "webui.engine.vllm:load_vllm",
        concurrency="webui.engine.vllm:default_concurrency",
        place="webui.engine.placement:place",
        options=("vllm",),
        gpu_share=True,
        auto=AutoChoice(20, "vLLM", "webui.engine.vllm:try_serve"),
    ),
    "llamacpp": Backend(
        LlamaCppEntry,
        "webui.engine.llamacpp:load_llamacpp",
        concurrency="webui.engine.llamacpp:default_concurrency",
        place="webui.engine.placement:place",
        options=("llamacpp",),
        auto=AutoChoice(10, "llama.cpp", "webui.engine.llamacpp:try_serve"),
    ),
    "transformers": Backend(
        TransformersEntry,
        "webui.engine.transformers:load_transformers",
        concurrency="webui.engine.transformers:default_concurrency",
        options=("transformers",),
        auto=AutoChoice(90, "transformers"),
    ),
    "openai": Backend(
        OpenAIEntry,
        "webui.engine.openai_remote:load_openai",
        concurrency="webui.engine.openai_remote:default_concurrency",
        own_weights=True,
    ),
}
DEFAULT_BACKEND = "auto"


def models_schema() -> dict[str, Any]:
    """The JSON schema of a whole models file (published as assets/models.schema.json)."""
    entry = Union[tuple(info.entry for info in BACKENDS.values())]  # type: ignore[valid-type]  # noqa: UP007
    models_file = create_model(
        "ModelsFile",
        __config__=ConfigDict(extra="forbid"),
        models=(list[entry], Field(min_length=1)),  # type: ignore[valid-type]
        judge=(JudgeBlock | None, None),
    )
    schema = models_file.model_json_schema()
    schema["title"] = "Pairwise Arena models file"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def resolve_relative(value: str, base_dir: Path | None) -> str:
    """Paths in a models file are relative to the file, like includes in most config formats."""
    if base_dir is None or ":" in value.split("/", 1)[0] or value.startswith(("/", "~")):
        return value
    if value.startswith(("./", "../")):
        return str((base_dir / value).resolve())
    return value


if __name__ == "__main__":  # python -m webui.models.entries > assets/models.schema.json
    import json

    print(json.dumps(models_schema(), indent=2))

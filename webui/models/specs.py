"""The models file: YAML in, validated `ModelSpec`s out.

Every mistake is a `ConfigError` naming the file, the entry and the key, because a models file is
edited by hand and a typo must not silently change behaviour (unknown keys are errors).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webui.errors import ConfigError, ParamError
from webui.types import SamplingParams

# The backends, each with its registry loader (imported on first use, so that a remote-only setup
# needs no torch). Adding a backend: one engine module, one line here, its keys below.
LOADERS = {
    "transformers": "webui.engine.transformers:load_transformers",
    "openai": "webui.engine.openai_remote:load_openai",
}
BACKENDS = tuple(LOADERS)
DTYPES = ("auto", "bf16", "fp16", "fp32")
_COMMON_KEYS = {
    "name", "backend", "template", "system_prompt", "sampling", "context_length", "stop",
    "weight", "max_concurrency", "description",
}
_BACKEND_KEYS = {
    "transformers": {"source", "dtype", "device"},
    "openai": {"base_url", "remote_model", "api_key_env", "timeout_s", "connect_timeout_s"},
}
_REQUIRED = {"transformers": ("source",), "openai": ("base_url", "remote_model")}
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?|mps)$")
_MEMORY_RE = re.compile(r"^\d+(\.\d+)?\s*(GiB|MiB|GB|MB)$")


@dataclass(frozen=True)
class DeviceSpec:
    """Where weights go: 'auto' (GPUs by free memory, else CPU), 'cpu', 'cuda:N', or 'auto'
    limited by `max_memory` per device (accelerate's notation: {0: "20GiB", "cpu": "30GiB"})."""

    kind: str = "auto"
    max_memory: Mapping[str, str] | None = None

    def key(self) -> str:
        limits = ",".join(f"{k}={v}" for k, v in sorted((self.max_memory or {}).items()))
        return f"{self.kind}[{limits}]"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    backend: str = "transformers"
    source: str = ""
    dtype: str = "auto"
    device: DeviceSpec = field(default_factory=DeviceSpec)
    template: str = "auto"
    system_prompt: str | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    context_length: int | None = None
    weight: float = 1.0
    max_concurrency: int | None = None
    description: str = ""
    base_url: str = ""
    remote_model: str = ""
    api_key_env: str | None = None
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    origin: str = ""  # "file: models[i]", for messages

    @property
    def weights_key(self) -> tuple[str, ...]:
        """Entries with the same key share one copy of the weights (variants)."""
        if self.backend == "openai":
            return ("openai", self.name)
        return (self.backend, self.source, self.dtype, self.device.key())


def loader_for(backend: str) -> Any:
    """The registry loader of a backend: `(spec, settings) -> Weights`."""
    if backend not in LOADERS:
        raise ConfigError(f"no loader for backend {backend!r}; known: {', '.join(LOADERS)}")
    module, _, function = LOADERS[backend].partition(":")
    return getattr(importlib.import_module(module), function)


def load_specs(path: str | Path) -> list[ModelSpec]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the models file ({exc.strerror or exc})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    return parse_specs(data, origin=str(path), base_dir=path.parent)


def parse_specs(data: Any, *, origin: str = "<models>", base_dir: Path | None = None) -> list[ModelSpec]:
    if not isinstance(data, dict) or set(data) - {"models"} or not isinstance(data.get("models"), list):
        raise ConfigError(f"{origin}: expected a mapping with one key, 'models', holding a list of entries")
    if not data["models"]:
        raise ConfigError(f"{origin}: 'models' is empty; list at least one model")
    specs = [_parse_entry(entry, f"{origin}: models[{i}]", base_dir) for i, entry in enumerate(data["models"])]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ConfigError(f"{spec.origin} ({spec.name}): key 'name': duplicate name {spec.name!r}")
        seen.add(spec.name)
    return specs


def _parse_entry(entry: Any, where: str, base_dir: Path | None) -> ModelSpec:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: each entry must be a mapping with at least 'name' and 'source'")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: key 'name': required, a non-empty string")
    where = f"{where} ({name})"

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{where}: key '{key}': {message}")

    backend = entry.get("backend", "transformers")
    if backend not in BACKENDS:
        raise fail("backend", f"must be one of {', '.join(BACKENDS)}, got {backend!r}")
    allowed = _COMMON_KEYS | _BACKEND_KEYS[backend]
    for key in entry:
        if key not in allowed:
            raise fail(key, f"unknown key for backend {backend}; known keys: {', '.join(sorted(allowed))}")
    for key in _REQUIRED[backend]:
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise fail(key, "required, a non-empty string")

    kwargs: dict[str, Any] = {"name": name.strip(), "backend": backend, "origin": where}
    if backend == "transformers":
        kwargs["source"] = _resolve_relative(entry["source"].strip(), base_dir)
        dtype = entry.get("dtype", "auto")
        if dtype not in DTYPES:
            raise fail("dtype", f"must be one of {', '.join(DTYPES)}, got {dtype!r}")
        kwargs["dtype"] = dtype
        kwargs["device"] = _parse_device(entry.get("device", "auto"), fail)
    else:
        kwargs["base_url"] = entry["base_url"].rstrip("/")
        kwargs["remote_model"] = entry["remote_model"]
        for key in ("api_key_env",):
            if key in entry:
                kwargs[key] = _string(entry[key], key, fail)
        for key in ("timeout_s", "connect_timeout_s"):
            if key in entry:
                kwargs[key] = _positive(entry[key], key, fail)

    kwargs["template"] = _parse_template(entry.get("template", "auto"), base_dir, fail)
    if entry.get("system_prompt") is not None:
        kwargs["system_prompt"] = _string(entry["system_prompt"], "system_prompt", fail)
    if "description" in entry:
        kwargs["description"] = _string(entry["description"], "description", fail)
    if "context_length" in entry:
        value = entry["context_length"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 16:
            raise fail("context_length", f"must be a whole number of tokens, at least 16, got {value!r}")
        kwargs["context_length"] = value
    if "weight" in entry:
        value = entry["weight"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise fail("weight", f"must be a number >= 0 (0 keeps the model out of battles), got {value!r}")
        kwargs["weight"] = float(value)
    if "max_concurrency" in entry:
        value = entry["max_concurrency"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise fail("max_concurrency", f"must be a whole number >= 1, got {value!r}")
        kwargs["max_concurrency"] = value
    kwargs["sampling"] = _parse_sampling(entry, kwargs.get("context_length"), fail)
    return ModelSpec(**kwargs)


def _parse_sampling(entry: Mapping[str, Any], context_length: int | None, fail: Any) -> SamplingParams:
    raw = entry.get("sampling") or {}
    if not isinstance(raw, dict):
        raise fail("sampling", "must be a mapping such as {temperature: 0.7, max_new_tokens: 256}")
    allowed = set(SamplingParams.field_names()) - {"stop"}
    for key in raw:
        if key not in allowed:
            raise fail(f"sampling.{key}", f"unknown sampling parameter; known: {', '.join(sorted(allowed))}")
    stop = entry.get("stop", [])
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise fail("stop", "must be a list of non-empty strings")
    try:
        return SamplingParams().replace(**raw, stop=tuple(stop)).validate(context_length)
    except ParamError as exc:
        raise fail(f"sampling.{exc.param}" if exc.param != "stop" else "stop", str(exc).split(": ", 1)[-1]) from exc


def _parse_device(value: Any, fail: Any) -> DeviceSpec:
    if isinstance(value, str):
        if not _DEVICE_RE.match(value):
            raise fail("device", f"must be auto, cpu, cuda, cuda:N or a mapping with max_memory; got {value!r}")
        return DeviceSpec(kind=value)
    if isinstance(value, dict) and set(value) == {"max_memory"} and isinstance(value["max_memory"], dict):
        limits: dict[str, str] = {}
        for dev, amount in value["max_memory"].items():
            dev_key = str(dev)
            if not (dev_key.isdigit() or dev_key == "cpu" or re.match(r"^cuda:\d+$", dev_key)):
                raise fail("device.max_memory", f"device {dev!r} must be a GPU index, cuda:N or cpu")
            if not isinstance(amount, str) or not _MEMORY_RE.match(amount):
                raise fail("device.max_memory", f"{dev}: amount must look like '20GiB' or '512MiB', got {amount!r}")
            limits[dev_key.removeprefix("cuda:")] = amount.replace(" ", "")
        return DeviceSpec(kind="auto", max_memory=limits)
    raise fail("device", "must be a string (auto, cpu, cuda:N) or {max_memory: {0: '20GiB', ...}}")


def _parse_template(value: Any, base_dir: Path | None, fail: Any) -> str:
    if not isinstance(value, str):
        raise fail("template", "must be a string")
    if value in ("auto", "chat_template"):
        return value
    if value.startswith("fschat:") and len(value) > len("fschat:"):
        return value
    if value.startswith("jinja:") and len(value) > len("jinja:"):
        path = Path(_resolve_relative(value[len("jinja:"):], base_dir))
        if not path.is_file():
            raise fail("template", f"Jinja template file not found: {path}")
        return f"jinja:{path}"
    raise fail("template", f"must be auto, chat_template, fschat:NAME or jinja:PATH, got {value!r}")


def _resolve_relative(value: str, base_dir: Path | None) -> str:
    """Paths in a models file are relative to the file, like includes in most config formats."""
    if base_dir is None or ":" in value.split("/", 1)[0] or value.startswith(("/", "~")):
        return value
    if value.startswith(("./", "../")):
        return str((base_dir / value).resolve())
    return value


def _string(value: Any, key: str, fail: Any) -> str:
    if not isinstance(value, str):
        raise fail(key, f"must be a string, got {type(value).__name__}")
    return value


def _positive(value: Any, key: str, fail: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise fail(key, f"must be a positive number of seconds, got {value!r}")
    return float(value)

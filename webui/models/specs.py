"""The models file: YAML in, validated `ModelSpec`s out.

Every mistake is a `ConfigError` naming the file, the entry and the key, because a models file is
edited by hand and a typo must not silently change behaviour (unknown keys are errors).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ValidationError

from webui.errors import ConfigError, ParamError
from webui.models.entries import (
    BACKENDS,
    DEFAULT_BACKEND,
    Entry,
    JudgeBlock,
    LocalEntry,
    MaxMemory,
    Sampling,
    resolve_relative,
)
from webui.types import SamplingParams

if TYPE_CHECKING:
    from webui.config import Settings


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
    """One checked models-file entry, in the form the rest of the code uses."""

    name: str
    backend: str = DEFAULT_BACKEND
    source: str = ""
    dtype: str = "auto"
    device: DeviceSpec = field(default_factory=DeviceSpec)
    template: str = "auto"
    system_prompt: str | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    context_length: int | None = None
    weight: float = 1.0
    max_concurrency: int | None = None
    family: str | None = None  # a family of variants (webui.leaderboard.stats.families)
    description: str = ""
    base_url: str = ""  # the first replica when the entry lists several (the engine reads them from `entry`)
    remote_model: str = ""
    api_key_env: str | None = None
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    # the engine's own options as given (its row's `options` block), with what `place` shares out added
    engine_options: Mapping[str, Any] = field(default_factory=dict)
    origin: str = ""  # "file: models[i] (name)", for messages
    entry: Entry | None = field(default=None, compare=False, repr=False)  # as checked: a backend's own keys

    @property
    def weights_key(self) -> tuple[str, ...]:
        """Entries with the same key share one copy of the weights (variants)."""
        if BACKENDS[self.backend].own_weights:
            return (self.backend, self.name)
        options = ",".join(f"{k}={v}" for k, v in sorted(self.engine_options.items()))
        return (self.backend, self.source, self.dtype, self.device.key(), options)


def loader_for(backend: str) -> Any:
    """The registry loader of a backend: `(spec, settings) -> Weights`."""
    if backend not in BACKENDS:
        raise ConfigError(f"no loader for backend {backend!r}; known: {', '.join(BACKENDS)}")
    return engine_function(BACKENDS[backend].load)


def engine_function(name: str) -> Any:
    """A backend's "module:function", imported now."""
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def default_concurrency(spec: ModelSpec, settings: Settings) -> int:
    """Generations one copy of `spec`'s weights runs at once unless the models file says: the
    engine's own figure, or settings.max_concurrency where it has none."""
    hook = BACKENDS[spec.backend].concurrency
    value = engine_function(hook)(settings) if hook else None
    return int(value) if value is not None else settings.max_concurrency


def place(specs: Sequence[ModelSpec], cores: int) -> list[ModelSpec]:
    """Each engine shares devices out among its own entries (`Backend.place`); order is kept."""
    placed = {spec.name: spec for spec in specs}
    hooks = {hook: None for s in specs if (hook := BACKENDS[s.backend].place)}
    for hook in hooks:
        own = [s for s in specs if BACKENDS[s.backend].place == hook]
        placed.update((s.name, s) for s in engine_function(hook)(own, cores))
    return [placed[spec.name] for spec in specs]


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
    if not isinstance(data, dict) or set(data) - {"models", "judge"} or not isinstance(data.get("models"), list):
        raise ConfigError(
            f"{origin}: expected a mapping with the key 'models', holding a list of entries (and optionally 'judge')"
        )
    if not data["models"]:
        raise ConfigError(f"{origin}: 'models' is empty; list at least one model")
    specs = [_parse_entry(entry, f"{origin}: models[{i}]", base_dir) for i, entry in enumerate(data["models"])]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ConfigError(f"{spec.origin}: key 'name': duplicate name {spec.name!r}")
        seen.add(spec.name)
    if data.get("judge") is not None:
        parse_judge(data, seen, origin=origin, base_dir=base_dir)  # a broken judge block fails at start
    return specs


def load_judge(path: str | Path) -> JudgeBlock | None:
    """The models file's `judge:` block (None: it has none), its prompt path made absolute."""
    path = Path(path)
    specs = load_specs(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return parse_judge(data, {s.name for s in specs}, origin=str(path), base_dir=path.parent)


def parse_judge(data: dict[str, Any], names: set[str], *, origin: str, base_dir: Path | None) -> JudgeBlock | None:
    raw = data.get("judge")
    if raw is None:
        return None
    where = f"{origin}: judge"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a mapping with 'model' (and optionally 'prompt', 'weight')")
    try:
        block = JudgeBlock.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(p) for p in error.get("loc", ()) if not _is_union_branch(p)) or "?"
        if error.get("type") == "extra_forbidden":
            raise ConfigError(f"{where}: key '{key}': unknown; known: {', '.join(JudgeBlock.model_fields)}") from None
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        raise ConfigError(f"{where}: key '{key}': {message}") from None
    if block.model not in names:
        raise ConfigError(f"{where}: key 'model': no entry named {block.model!r}; entries: {', '.join(sorted(names))}")
    if block.prompt is not None:
        prompt = Path(block.prompt).expanduser()
        if not prompt.is_absolute() and base_dir is not None:
            prompt = base_dir / prompt
        block = block.model_copy(update={"prompt": str(prompt)})
    return block


def _parse_entry(raw: Any, where: str, base_dir: Path | None) -> ModelSpec:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: each entry must be a mapping with at least 'name' and 'source'")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: key 'name': required, a non-empty string")
    where = f"{where} ({name.strip()})"
    backend = raw.get("backend", DEFAULT_BACKEND)
    if backend not in BACKENDS:
        raise ConfigError(f"{where}: key 'backend': must be one of {', '.join(BACKENDS)}, got {backend!r}")
    entry_class = BACKENDS[backend].entry
    try:
        entry = entry_class.model_validate({**raw, "name": name.strip()})
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_first_problem(exc, entry_class, backend)}") from None
    try:
        return _to_spec(entry, backend, where, base_dir)
    except _KeyProblem as problem:
        raise ConfigError(f"{where}: key '{problem.key}': {problem.message}") from None


class _KeyProblem(Exception):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key, self.message = key, message


def _first_problem(exc: ValidationError, entry_class: type[Entry], backend: str) -> str:
    """pydantic's first complaint, as "key 'a.b': what is wrong"."""
    error = exc.errors()[0]
    loc = [str(part) for part in error.get("loc", ()) if not _is_union_branch(part)]
    key = ".".join(loc) or "?"
    kind = error.get("type")
    if kind == "extra_forbidden":
        block = (
            entry_class.model_fields[loc[0]].annotation if len(loc) > 1 and loc[0] in entry_class.model_fields else None
        )
        nested = isinstance(block, type) and issubclass(block, BaseModel)
        # a typo inside a block (`sampling:`, `llamacpp:`) lists that block's keys, not the entry's
        fields = block.model_fields if nested else entry_class.model_fields  # type: ignore[union-attr]
        scope = (
            "sampling parameter"
            if block is Sampling
            else f"key in '{loc[0]}'"
            if nested
            else f"key for backend {backend}"
        )
        return f"key '{key}': unknown {scope}; known: {', '.join(sorted(fields))}"
    if kind == "missing":
        return f"key '{key}': required"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"key '{key}': must be a mapping, got {error.get('input')!r}"
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    return f"key '{key}': {message}" + ("" if "got " in message else f", got {error.get('input')!r}")


def _is_union_branch(part: Any) -> bool:
    """pydantic names the member of a union it tried (`str`, `MaxMemory`, `int`); not a key."""
    return isinstance(part, str) and (
        part[:1].isupper()
        or part in ("str", "int", "float", "bool", "list[str]")
        or part.startswith(("function-", "literal["))
    )


def _to_spec(entry: Entry, backend: str, where: str, base_dir: Path | None) -> ModelSpec:
    common: dict[str, Any] = {
        "name": entry.name,
        "backend": backend,
        "origin": where,
        "description": entry.description,
        "system_prompt": entry.system_prompt,
        "context_length": entry.context_length,
        "weight": float(entry.weight),
        "max_concurrency": entry.max_concurrency,
        "family": entry.family,
        "sampling": _sampling(entry),
        "template": "auto",
        "entry": entry,
    }
    if isinstance(entry, LocalEntry):
        common.update(
            source=resolve_relative(entry.source.strip(), base_dir),
            dtype=entry.dtype,
            device=_device(entry.device),
            template=_template(entry.template, base_dir),
        )
    for block in BACKENDS[backend].options:
        common["engine_options"] = {
            **common.get("engine_options", {}),
            **getattr(entry, block).model_dump(exclude_defaults=True),
        }
    common.update(entry.spec_fields())
    return ModelSpec(**common)


def _sampling(entry: Entry) -> SamplingParams:
    try:
        return SamplingParams().replace(**entry.sampling.given(), stop=tuple(entry.stop)).validate(entry.context_length)
    except ParamError as exc:
        key = "stop" if exc.param == "stop" else f"sampling.{exc.param}"
        raise _KeyProblem(key, str(exc).split(": ", 1)[-1]) from exc


def _device(value: MaxMemory | str) -> DeviceSpec:
    if isinstance(value, str):
        return DeviceSpec(kind=value)
    limits = {device.removeprefix("cuda:"): amount.replace(" ", "") for device, amount in value.max_memory.items()}
    return DeviceSpec(kind="auto", max_memory=limits)


def _template(value: str, base_dir: Path | None) -> str:
    if value.startswith("jinja:"):
        path = Path(resolve_relative(value[len("jinja:") :], base_dir))
        if not path.is_file():
            raise _KeyProblem("template", f"Jinja template file not found: {path}")
        return f"jinja:{path}"
    return value

"""The model registry: entries from the models file, loaded in the background, with a status that
tells the truth (queued, loading, ready, failed: reason, unloaded).

Entries that share a source, dtype and device ("variants": another system prompt, template or
sampling defaults) share one copy of the weights. A per-weights lock makes sure two requests never
load the same weights twice, and one model failing never stops the others.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webui.config import Settings
from webui.engine.base import Backend, Slots, Weights
from webui.errors import ModelNotFound, ModelNotReady
from webui.models.specs import ModelSpec

log = logging.getLogger(__name__)


class ModelState(str, enum.Enum):
    QUEUED = "queued"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"
    UNLOADED = "unloaded"


@dataclass(frozen=True)
class ModelStatus:
    name: str
    state: ModelState
    reason: str = ""  # why it failed
    device: str = ""
    load_s: float | None = None
    from_cache: bool = False
    problem: str | None = None  # a ready model that has since become unusable (a remote server down)

    @property
    def usable(self) -> bool:
        return self.state is ModelState.READY and not self.problem

    def describe(self) -> str:
        if self.state is ModelState.FAILED:
            return f"failed: {self.reason}"
        if self.problem:
            return f"unhealthy: {self.problem}"
        if self.state is ModelState.READY and self.load_s is not None:
            where = f" on {self.device}" if self.device else ""
            return f"ready{where} (loaded in {self.load_s:.1f} s{', cached' if self.from_cache else ''})"
        return self.state.value


Loader = Callable[[ModelSpec, Settings], Weights]


class _Slot:
    """One set of weights and its lifecycle."""

    def __init__(self, key: tuple[str, ...], concurrency: int) -> None:
        self.key = key
        self.lock = threading.Lock()  # held while loading: a second caller waits instead of loading again
        self.state = ModelState.UNLOADED
        self.reason = ""
        self.load_s: float | None = None
        self.weights: Weights | None = None
        self.slots = Slots(concurrency)
        self.ready = threading.Event()


class Registry:
    def __init__(self, specs: Iterable[ModelSpec], settings: Settings,
                 loaders: Mapping[str, Loader] | None = None) -> None:
        self.settings = settings
        self._specs: dict[str, ModelSpec] = {}
        self._slots: dict[tuple[str, ...], _Slot] = {}
        self._backends: dict[str, Backend] = {}
        self._loaders = dict(loaders or {})
        self._guard = threading.Lock()  # protects the dicts and states (not held while loading)
        self._background: threading.Thread | None = None
        self._listeners: list[Callable[[ModelStatus], None]] = []
        for spec in specs:
            self._specs[spec.name] = spec
        for key in dict.fromkeys(spec.weights_key for spec in self._specs.values()):
            self._slots[key] = _Slot(key, self._concurrency(key))

    def _concurrency(self, key: tuple[str, ...]) -> int:
        """The limit belongs to the weights (one device), so variants share it; when variants set
        different values the smallest wins, because the device is the same."""
        explicit = [s.max_concurrency for s in self._specs.values() if s.weights_key == key and s.max_concurrency]
        return min(explicit) if explicit else self.settings.max_concurrency

    # ---- what is there -------------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self._specs)

    def spec(self, name: str) -> ModelSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise ModelNotFound(f"no model named {name!r}; known: {', '.join(self._specs)}") from None

    def status(self, name: str) -> ModelStatus:
        spec = self.spec(name)
        slot = self._slots[spec.weights_key]
        with self._guard:
            weights = slot.weights
            backend = self._backends.get(name)
            status = ModelStatus(name, slot.state, slot.reason, weights.device if weights else "", slot.load_s,
                                 weights.from_cache if weights else False)
        problem = _health(backend) if status.state is ModelState.READY else None
        return dataclasses.replace(status, problem=problem) if problem else status

    def statuses(self) -> list[ModelStatus]:
        return [self.status(name) for name in self._specs]

    def ready_names(self) -> list[str]:
        """Models that can take a request now (ready, and healthy if they can tell)."""
        return [s.name for s in self.statuses() if s.usable]

    def on_change(self, listener: Callable[[ModelStatus], None]) -> None:
        """Called (from the loading thread) whenever a model's state changes."""
        self._listeners.append(listener)

    # ---- loading -------------------------------------------------------------------------
    def start(self, names: Iterable[str] | None = None) -> None:
        """Queue models for loading in one background thread (loading two at once on a small
        machine only makes both slower). Returns at once."""
        wanted = list(names) if names is not None else self.names()
        keys = list(dict.fromkeys(self.spec(n).weights_key for n in wanted))
        with self._guard:
            for key in keys:
                if self._slots[key].state in (ModelState.UNLOADED, ModelState.FAILED):
                    self._slots[key].state = ModelState.QUEUED
                    self._slots[key].reason = ""
        self._notify(keys)
        thread = threading.Thread(target=self._load_all, args=(keys,), name="registry-loader", daemon=True)
        self._background = thread
        thread.start()

    def _load_all(self, keys: list[tuple[str, ...]]) -> None:
        for key in keys:
            self._ensure_loaded(self._slots[key])

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait for the background loading started by `start` to finish (tests, the CLI)."""
        if self._background is not None:
            self._background.join(timeout)
            return not self._background.is_alive()
        return True

    def load(self, name: str) -> Backend:
        """Load now (blocking) if needed and return the backend; raises ModelNotReady on failure."""
        spec = self.spec(name)
        self._ensure_loaded(self._slots[spec.weights_key])
        return self.get(name)

    def get(self, name: str, wait_s: float = 0.0) -> Backend:
        """The backend of a ready model. Waits up to `wait_s` for one that is loading."""
        spec = self.spec(name)
        slot = self._slots[spec.weights_key]
        if wait_s > 0:
            slot.ready.wait(wait_s)
        with self._guard:
            if slot.state is not ModelState.READY or slot.weights is None:
                detail = f": {slot.reason}" if slot.reason else ""
                raise ModelNotReady(f"{name} is not ready ({slot.state.value}{detail})")
            backend = self._backends.get(name)
            if backend is None:
                backend = slot.weights.make_backend(spec, slot.slots)
                self._backends[name] = backend
            return backend

    def _ensure_loaded(self, slot: _Slot) -> None:
        with slot.lock:
            if slot.state is ModelState.READY:
                return
            spec = next(s for s in self._specs.values() if s.weights_key == slot.key)
            self._set(slot, ModelState.LOADING, "")
            started = time.perf_counter()
            try:
                weights = self._loader_for(spec.backend)(spec, self.settings)
                # Build every variant's backend now, so that template errors show up as a failure.
                backends = {s.name: weights.make_backend(s, slot.slots) for s in self._specs.values() if s.weights_key == slot.key}
            except Exception as exc:  # noqa: BLE001 - any failure becomes the model's status
                log.exception("loading %s failed", spec.name)
                self._set(slot, ModelState.FAILED, _short_reason(exc))
                return
            with self._guard:
                slot.weights, slot.load_s = weights, time.perf_counter() - started
                self._backends.update(backends)
            self._set(slot, ModelState.READY, "")
            log.info("%s ready on %s in %.1f s", spec.name, weights.device, slot.load_s)

    def _loader_for(self, backend: str) -> Loader:
        if backend not in self._loaders:
            self._loaders[backend] = default_loader(backend)
        return self._loaders[backend]

    # ---- unloading -----------------------------------------------------------------------
    def unload(self, name: str) -> None:
        """Free the weights behind `name` (and its variants). Requests already streaming finish."""
        slot = self._slots[self.spec(name).weights_key]
        with slot.lock:
            with self._guard:
                weights, slot.weights, slot.load_s = slot.weights, None, None
                for other in self._specs.values():
                    if other.weights_key == slot.key:
                        self._backends.pop(other.name, None)
            self._set(slot, ModelState.UNLOADED, "")
        if weights is not None:
            weights.close()

    def close(self) -> None:
        for name in {self._slot_owner(key) for key in self._slots}:
            self.unload(name)

    def _slot_owner(self, key: tuple[str, ...]) -> str:
        return next(s.name for s in self._specs.values() if s.weights_key == key)

    # ---- state changes -------------------------------------------------------------------
    def _set(self, slot: _Slot, state: ModelState, reason: str) -> None:
        with self._guard:
            slot.state, slot.reason = state, reason
        if state is ModelState.READY:
            slot.ready.set()
        else:
            slot.ready.clear()
        self._notify([slot.key])

    def _notify(self, keys: Iterable[tuple[str, ...]]) -> None:
        for key in keys:
            for spec in self._specs.values():
                if spec.weights_key == key:
                    status = self.status(spec.name)
                    for listener in self._listeners:
                        try:
                            listener(status)
                        except Exception:  # noqa: BLE001 - a broken listener must not break loading
                            log.exception("status listener failed")


def _health(backend: Any) -> str | None:
    """A backend's own word on whether it still works (fakes in tests may not say)."""
    check = getattr(backend, "health", None)
    if not callable(check):
        return None
    try:
        return check()
    except Exception as exc:  # noqa: BLE001 - a failing health check is itself a problem
        return _short_reason(exc)


def _short_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def default_loader(backend: str) -> Loader:
    """The loader for a backend name; imported lazily so that a remote-only setup needs no torch."""
    if backend == "transformers":
        from webui.engine.transformers import load_transformers

        return load_transformers
    if backend == "openai":
        from webui.engine.openai_remote import load_openai  # type: ignore[import-not-found]

        return load_openai
    raise ModelNotReady(f"no loader for backend {backend!r}")


def build_registry(settings: Settings, specs: list[ModelSpec] | None = None, **kwargs: Any) -> Registry:
    from webui.models.specs import load_specs

    return Registry(specs if specs is not None else load_specs(settings.models_file), settings, **kwargs)

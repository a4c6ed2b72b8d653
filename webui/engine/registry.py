"""The model registry: entries from the models file, loaded in the background, with a status that
tells the truth (queued, loading, ready, failed: reason and when it is retried, unloaded).

Entries that share a source, dtype and device ("variants": another system prompt, template or
sampling defaults) share one copy of the weights and one set of generation slots. A per-weights
lock makes sure two requests never load the same weights twice, and one model failing never stops
the others.

One background thread (the keeper) schedules the slow work: it hands what is queued to loader
threads (`--load-parallel`, 2 by default: a vLLM server spends its start mostly in single-threaded
imports, so two starts overlap well even on 2 cores), retries a failed load with a growing pause,
and notices weights that die while the app runs (an engine process that exits), which it marks
failed and reloads the same way. A model nobody asked for at start (with
`--no-preload`) loads on first use: `get(name, wait_s)` queues it and waits.

Every visitor sees the statuses (the UI, /healthz, /v1/models), so a status says why in a few
generic words ("upstream unreachable", "engine exited"); the whole story (an address, a port, the
upstream's or the engine's own words) is the status's `detail`, which stays in the process and
goes to the server log with the model's name.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webui.config import Settings
from webui.engine.base import ENGINE_EXITED, Backend, Slots, Weights
from webui.errors import ConfigError, ModelNotFound, ModelNotReady, clipped
from webui.models.fingerprint import Fingerprint, variant_fingerprint
from webui.models.specs import ModelSpec

log = logging.getLogger(__name__)
RETRY_FIRST_S = 5.0  # the first retry of a failed load comes this long after the failure
RETRY_MAX_S = 300.0  # the pause doubles up to this
WATCH_EVERY_S = 1.0  # how often the keeper asks ready weights whether they still live
LOAD_FAILED = "load failed"  # the public reason of a failure that does not say one of its own
CONFIG_ERROR = "error in the models file"


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
    reason: str = ""  # why it failed, in a few words any visitor may read
    device: str = ""
    load_s: float | None = None
    from_cache: bool = False
    problem: str | None = None  # a ready model that has since become unusable (a remote server down)
    retry_at: float | None = None  # time.time() of the next automatic load attempt after a failure
    engine: str = ""  # which engine serves it, and for a fallback why (from the loader)
    detail: str = ""  # the whole story behind `reason`, for the log and the operator: never shown to visitors
    fingerprint: str = ""  # what is served under the name (webui.models.fingerprint), once loaded

    @property
    def usable(self) -> bool:
        return self.state is ModelState.READY and not self.problem

    def describe(self) -> str:
        if self.state is ModelState.FAILED:
            when = f" (retrying at {time.strftime('%H:%M:%S', time.localtime(self.retry_at))})" if self.retry_at else ""
            return f"failed: {self.reason}{when}"
        if self.problem:
            return f"unhealthy: {self.problem}"
        if self.state is ModelState.READY and self.load_s is not None:
            where = f" on {self.device}" if self.device else ""
            engine = f"; {self.engine}" if self.engine else ""
            served = f"; fingerprint {self.fingerprint}" if self.fingerprint else ""
            return (
                f"ready{where} (loaded in {self.load_s:.1f} s{', cached' if self.from_cache else ''}{engine}{served})"
            )
        return self.state.value


Loader = Callable[[ModelSpec, Settings], Weights]


class _Slot:
    """One set of weights and its lifecycle."""

    def __init__(self, key: tuple[str, ...], slots: Slots) -> None:
        self.key = key
        self.lock = threading.Lock()  # held while loading: a second caller waits instead of loading again
        self.state = ModelState.UNLOADED
        self.reason = ""
        self.detail = ""
        self.load_s: float | None = None
        self.weights: Weights | None = None
        self.slots = slots
        self.failures = 0  # consecutive failed loads, for the pause before the next one
        self.retry_at: float | None = None  # time.time() of the next attempt


class Registry:
    def __init__(
        self,
        specs: Iterable[ModelSpec],
        settings: Settings,
        loaders: Mapping[str, Loader] | None = None,
        *,
        retry_first_s: float = RETRY_FIRST_S,
        retry_max_s: float = RETRY_MAX_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._clock = clock  # wall time of retries (an injected one in tests)
        import os

        from webui.models.specs import place

        placed = place(list(specs), os.cpu_count() or 1)
        self._specs: dict[str, ModelSpec] = {spec.name: spec for spec in placed}
        self._loaders = dict(loaders or {})
        self._retry = (retry_first_s, retry_max_s)
        self._guard = threading.Condition()  # protects the dicts and states; notified on every change
        self._slots: dict[tuple[str, ...], _Slot] = {}
        for key in dict.fromkeys(spec.weights_key for spec in self._specs.values()):
            size = self.concurrency(key)
            self._slots[key] = _Slot(key, Slots(size, max_waiting=size * settings.queue_per_slot))
        self._backends: dict[str, Backend] = {}
        self._fingerprints: dict[str, Fingerprint] = {}  # of the loaded variants, computed once per load
        self._listeners: list[Callable[[ModelStatus], None]] = []
        self._wanted: list[tuple[str, ...]] = []  # queued for the keeper, in order
        self._keeper: threading.Thread | None = None
        self._loads: queue.SimpleQueue[tuple[str, ...] | None] = queue.SimpleQueue()
        self._loaders_running: list[threading.Thread] = []
        self._look_now = False  # an engine said it died: the keeper looks before its next pause
        self._closed = False

    def concurrency(self, key: tuple[str, ...]) -> int:
        """Simultaneous generations for one set of weights. The limit belongs to the weights (one
        device), so variants share it; when variants set different values the smallest wins."""
        explicit = [s.max_concurrency for s in self._variants(key) if s.max_concurrency]
        if explicit:
            return min(explicit)
        return self._engine_concurrency(self._owner(key))

    def _engine_concurrency(self, spec: ModelSpec) -> int:
        """The default for an entry without max_concurrency: the engine's own (vLLM batches)."""
        from webui.models.specs import default_concurrency

        return default_concurrency(spec, self.settings)

    def generation_slots(self) -> int:
        """Generations all the models can run at once (what the UI's queue is sized to)."""
        return sum(slot.slots.size for slot in self._slots.values())

    # ---- what is there -------------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self._specs)

    def spec(self, name: str) -> ModelSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise ModelNotFound(f"no model named {clipped(name)!r}; known: {', '.join(self._specs)}") from None

    def status(self, name: str) -> ModelStatus:
        spec = self.spec(name)
        slot = self._slots[spec.weights_key]
        with self._guard:
            weights = slot.weights
            backend = self._backends.get(name)
            found = self._fingerprints.get(name) if weights else None
            status = ModelStatus(
                name,
                slot.state,
                slot.reason,
                weights.device if weights else "",
                slot.load_s,
                weights.from_cache if weights else False,
                retry_at=slot.retry_at,
                engine=weights.engine if weights else "",
                detail=slot.detail,
                fingerprint=found.id if found else "",
            )
        problem = None
        if status.state is ModelState.READY:  # dead weights are unusable before the keeper has failed them
            problem = ENGINE_EXITED if weights is not None and weights.failure() else _health(backend)
        return dataclasses.replace(status, problem=problem) if problem else status

    def fingerprint(self, name: str) -> Fingerprint | None:
        """What `name` serves now (None: not loaded, or weights that cannot say what they are)."""
        with self._guard:
            return self._fingerprints.get(name)

    def statuses(self) -> list[ModelStatus]:
        return [self.status(name) for name in self._specs]

    def ready_names(self) -> list[str]:
        """Models that can take a request now (ready, and healthy if they can tell)."""
        return [s.name for s in self.statuses() if s.usable]

    def on_change(self, listener: Callable[[ModelStatus], None]) -> None:
        """Called (from the keeper thread, or a caller's) whenever a model's state changes."""
        self._listeners.append(listener)

    # ---- loading -------------------------------------------------------------------------
    def start(self, names: Iterable[str] | None = None) -> None:
        """Queue models for loading in the background. Returns at once."""
        wanted = list(names) if names is not None else self.names()
        keys = list(dict.fromkeys(self.spec(n).weights_key for n in wanted))
        queued = []
        with self._guard:
            for key in keys:
                slot = self._slots[key]
                if slot.state in (ModelState.UNLOADED, ModelState.FAILED) and key not in self._wanted:
                    slot.state, slot.reason, slot.detail, slot.retry_at = ModelState.QUEUED, "", "", None
                    self._wanted.append(key)
                    queued.append(key)
            self._ensure_keeper()
            self._guard.notify_all()
        self._notify(queued)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no model is queued or loading (tests, the CLI, ZeroGPU start-up)."""
        busy = (ModelState.QUEUED, ModelState.LOADING)
        with self._guard:
            return self._guard.wait_for(lambda: all(s.state not in busy for s in self._slots.values()), timeout)

    def load(self, name: str) -> Backend:
        """Load now, in this thread, if needed and return the backend; ModelNotReady on failure."""
        spec = self.spec(name)
        self._ensure_loaded(self._slots[spec.weights_key])
        return self.get(name)

    def get(self, name: str, wait_s: float = 0.0, cancel: threading.Event | None = None) -> Backend:
        """The backend of a ready model. A model that is not loaded is queued (load on first use);
        one that is queued or loading is waited for, up to `wait_s` seconds or until `cancel` is set
        (the caller gave up)."""
        spec = self.spec(name)
        slot = self._slots[spec.weights_key]
        if slot.state is ModelState.UNLOADED and not self._closed:
            self.start([name])
        settled = (ModelState.READY, ModelState.FAILED, ModelState.UNLOADED)
        deadline = time.monotonic() + wait_s
        with self._guard:
            while slot.state not in settled and time.monotonic() < deadline and not (cancel and cancel.is_set()):
                self._guard.wait(min(0.25, max(0.0, deadline - time.monotonic())))
            if slot.state is not ModelState.READY or slot.weights is None:
                raise ModelNotReady(f"{name} is not ready ({self.status_text(slot)})")
            if slot.weights.failure() is not None:  # dead, and the keeper is about to say so
                raise ModelNotReady(f"{name} is not ready ({ENGINE_EXITED})")
            backend = self._backends.get(name)
            if backend is None:
                backend = slot.weights.make_backend(spec, slot.slots)
                self._backends[name] = backend
            return backend

    def status_text(self, slot: _Slot) -> str:
        detail = f": {slot.reason}" if slot.reason else ""
        return f"{slot.state.value}{detail}"

    def _ensure_loaded(self, slot: _Slot) -> None:
        with slot.lock:
            if slot.state is ModelState.READY:
                return
            spec = self._owner(slot.key)
            self._set(slot, ModelState.LOADING, "")
            started = time.perf_counter()
            try:
                weights = self._loader_for(spec.backend)(spec, self.settings)
                # Build every variant's backend now, so that template errors show up as a failure.
                backends = {s.name: weights.make_backend(s, slot.slots) for s in self._variants(slot.key)}
                prints = (
                    {
                        name: variant_fingerprint(weights.identity, b.template_source(), b.spec.system_prompt)
                        for name, b in backends.items()
                    }
                    if weights.identity
                    else {}
                )
            except Exception as exc:  # any failure becomes the model's status
                log.exception("loading %s failed", spec.name)
                self._failed(slot, _public_reason(exc), _short_reason(exc), retry=not isinstance(exc, ConfigError))
                return
            with self._guard:
                slot.weights, slot.load_s, slot.failures = weights, time.perf_counter() - started, 0
                self._backends.update(backends)
                self._fingerprints.update(prints)
            weights.on_failure(self._look)
            if weights.concurrency and not any(s.max_concurrency for s in self._variants(slot.key)):
                slot.slots.resize(weights.concurrency)  # e.g. `auto` served by transformers after all
            self._set(slot, ModelState.READY, "")
            log.info("%s ready on %s in %.1f s", spec.name, weights.device, slot.load_s)

    def _loader_for(self, backend: str) -> Loader:
        if backend not in self._loaders:
            from webui.models.specs import loader_for

            self._loaders[backend] = loader_for(backend)
        return self._loaders[backend]

    def _failed(self, slot: _Slot, reason: str, detail: str, *, retry: bool) -> None:
        """Mark failed (`reason` public, `detail` not); unless the models file itself is wrong, try
        again after a growing pause."""
        first, most = self._retry
        with self._guard:
            slot.failures += 1
            slot.retry_at = self._clock() + min(most, first * 2 ** (slot.failures - 1)) if retry else None
        self._set(slot, ModelState.FAILED, reason, detail)

    # ---- the keeper thread ----------------------------------------------------------------
    def _ensure_keeper(self) -> None:
        """Start the background thread once (called with the guard held)."""
        if self._keeper is None or not self._keeper.is_alive():
            self._keeper = threading.Thread(target=self._keep, name="registry-keeper", daemon=True)
            self._keeper.start()

    def _keep(self) -> None:
        while True:
            key = self._next_job()
            if key is None:
                for _ in self._loaders_running:
                    self._loads.put(None)
                return
            if key == ("watch",):
                self._watch()
            else:
                self._dispatch(key)

    def _dispatch(self, key: tuple[str, ...]) -> None:
        """Hand a load to one of `settings.load_parallel` loader threads (started on first use).
        They live as long as the registry: a vLLM server dies with the thread that started it."""
        if len(self._loaders_running) < self.settings.load_parallel:
            thread = threading.Thread(
                target=self._load_worker, name=f"registry-loader-{len(self._loaders_running)}", daemon=True
            )
            self._loaders_running.append(thread)
            thread.start()
        self._loads.put(key)

    def _load_worker(self) -> None:
        while (key := self._loads.get()) is not None:
            self._ensure_loaded(self._slots[key])

    def _next_job(self) -> tuple[str, ...] | None:
        """The next set of weights to load, ("watch",) when it is time to check ready weights, or
        None once the registry is closed. Due retries are queued here."""
        with self._guard:
            while not self._closed:
                now = self._clock()
                for slot in self._slots.values():
                    if slot.state is ModelState.FAILED and slot.retry_at is not None and slot.retry_at <= now:
                        slot.state, slot.retry_at = ModelState.QUEUED, None
                        self._wanted.append(slot.key)
                if self._wanted:
                    return self._wanted.pop(0)
                if self._look_now or any(s.weights is not None and s.weights.watched for s in self._slots.values()):
                    if not self._look_now:
                        self._guard.wait(WATCH_EVERY_S)  # ends early when an engine reports its death
                    self._look_now = False
                    return ("watch",)
                retries = [s.retry_at for s in self._slots.values() if s.retry_at is not None]
                self._guard.wait(max(0.01, min(retries) - now) if retries else None)
            return None

    def _look(self) -> None:
        """An engine's word that it died (from its own thread): the keeper looks now."""
        with self._guard:
            self._look_now = True
            self._guard.notify_all()

    def _watch(self) -> None:
        """Weights that died (an engine process exited) are failed and reloaded with a pause."""
        for slot in self._slots.values():
            weights = slot.weights
            problem = weights.failure() if weights is not None and slot.state is ModelState.READY else None
            if problem is None:
                continue
            log.error("%s stopped working: %s", self._owner(slot.key).name, problem)
            with slot.lock:
                # failed first: stopping what is left of the engine can take its grace period
                self._failed(slot, ENGINE_EXITED, problem, retry=True)
                self._drop(slot)

    # ---- unloading -----------------------------------------------------------------------
    def unload(self, name: str) -> None:
        """Free the weights behind `name` (and its variants). Requests already streaming finish."""
        slot = self._slots[self.spec(name).weights_key]
        with slot.lock:
            self._drop(slot)
            with self._guard:
                slot.retry_at, slot.failures = None, 0
                if slot.key in self._wanted:
                    self._wanted.remove(slot.key)
            self._set(slot, ModelState.UNLOADED, "")

    def close(self, wait_s: float | None = None) -> None:
        """Unload everything and stop the keeper (the server calls this on exit). The weights are
        freed side by side: each engine's stop can take its grace period, and one after another
        they would add up. With `wait_s`, returns after that long even if some are still loading
        (their unload waits for the load) or stopping: the process is exiting, and what it leaves
        is ended by the atexit hook and the engines' supervisors (webui.engine.process)."""
        with self._guard:
            self._closed = True
            self._wanted.clear()
            self._guard.notify_all()
        names = [self._owner(key).name for key in self._slots]
        threads = [threading.Thread(target=self.unload, args=(n,), name=f"unload:{n}", daemon=True) for n in names]
        for thread in threads:
            thread.start()
        deadline = None if wait_s is None else time.monotonic() + wait_s
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        left = [thread.name.removeprefix("unload:") for thread in threads if thread.is_alive()]
        if left:
            log.warning("still loading or stopping after %.1f s, left to the exit: %s", wait_s, ", ".join(left))

    def _drop(self, slot: _Slot) -> None:
        """Forget the weights and their backends, and free them (called with the slot lock held)."""
        with self._guard:
            weights, slot.weights, slot.load_s = slot.weights, None, None
            for variant in self._variants(slot.key):
                self._backends.pop(variant.name, None)
                self._fingerprints.pop(variant.name, None)
        if weights is not None:
            try:
                weights.close()
            except Exception:  # freeing must not stop the others from being freed
                log.exception("closing %s failed", self._owner(slot.key).name)

    def _owner(self, key: tuple[str, ...]) -> ModelSpec:
        return next(s for s in self._specs.values() if s.weights_key == key)

    def _variants(self, key: tuple[str, ...]) -> list[ModelSpec]:
        return [s for s in self._specs.values() if s.weights_key == key]

    # ---- state changes -------------------------------------------------------------------
    def _set(self, slot: _Slot, state: ModelState, reason: str, detail: str = "") -> None:
        with self._guard:
            slot.state, slot.reason, slot.detail = state, reason, detail
            if state is not ModelState.FAILED:
                slot.retry_at = None
            self._guard.notify_all()
        self._notify([slot.key])

    def _notify(self, keys: Iterable[tuple[str, ...]]) -> None:
        for key in keys:
            for spec in self._variants(key):
                status = self.status(spec.name)
                for listener in self._listeners:
                    try:
                        listener(status)
                    except Exception:  # a broken listener must not break loading
                        log.exception("status listener failed")


def _health(backend: Any) -> str | None:
    """A backend's own word on whether it still works (fakes in tests may not say)."""
    check = getattr(backend, "health", None)
    if not callable(check):
        return None
    try:
        return check()
    except Exception:  # a failing health check is itself a problem
        log.exception("the health check of %s failed", getattr(backend, "name", "?"))
        return "health check failed"


def _public_reason(exc: BaseException) -> str:
    """What a visitor may read about a failed load: the engine's own generic reason when it gives
    one (EngineFailure.public), else the kind of failure; never the exception's text."""
    public = getattr(exc, "public", None)
    if isinstance(public, str) and public:
        return public
    return CONFIG_ERROR if isinstance(exc, ConfigError) else LOAD_FAILED


def _short_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def build_registry(settings: Settings, specs: list[ModelSpec] | None = None, **kwargs: Any) -> Registry:
    from webui.models.specs import load_specs

    return Registry(specs if specs is not None else load_specs(settings.models_file), settings, **kwargs)

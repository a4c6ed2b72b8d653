"""The model registry: entries from the models file, loaded in the background, with a status that
tells the truth (queued, loading, ready, failed: reason and when it is retried, unloaded).

Entries that share a source, dtype and device ("variants": another system prompt, template or
sampling defaults) share one copy of the weights and one set of generation slots. A per-weights
lock makes sure two requests never load the same weights twice, and one model failing never stops
the others.

The registry is the one door (what callers use) to three parts with one job each:
`webui.engine.model_state` holds the states and reports the statuses, `webui.engine.keeper` runs
the background thread (queued loads, retries with a growing pause, weights that die while the app
runs), and this module loads and frees one set of weights. A model nobody asked for at start (with
`--no-preload`) loads on first use: `get(name, wait_s)` queues it and waits.

Every visitor sees the statuses (the UI, /healthz, /v1/models), so a status says why in a few
generic words ("upstream unreachable", "engine exited"); the whole story (an address, a port, the
upstream's or the engine's own words) is the status's `detail`, which stays in the process and
goes to the server log with the model's name.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from webui.config import Settings
from webui.engine.base import ENGINE_EXITED, Backend, Slots, Weights
from webui.engine.keeper import Keeper
from webui.engine.model_state import ModelState, ModelStates, ModelStatus, Slot, WeightsKey
from webui.errors import ConfigError, ModelNotReady
from webui.models.fingerprint import Fingerprint, variant_fingerprint
from webui.models.specs import ModelSpec

__all__ = ["Loader", "ModelState", "ModelStatus", "Registry", "build_registry"]

log = logging.getLogger(__name__)
RETRY_FIRST_S = 5.0  # the first retry of a failed load comes this long after the failure
RETRY_MAX_S = 300.0  # the pause doubles up to this
WATCH_EVERY_S = 1.0  # how often the keeper asks ready weights whether they still live
LOAD_FAILED = "load failed"  # the public reason of a failure that does not say one of its own
CONFIG_ERROR = "error in the models file"

Loader = Callable[[ModelSpec, Settings], Weights]


class Registry:
    """The models of the models file: look-up, loading (now or in the background), statuses and
    unloading, for every caller (the UI, the API, the judge, the CLI)."""

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
        import os

        from webui.models.specs import place

        placed = {spec.name: spec for spec in place(list(specs), os.cpu_count() or 1)}
        self._loaders = dict(loaders or {})
        self._states = ModelStates(placed, {})
        for key in dict.fromkeys(spec.weights_key for spec in placed.values()):
            size = self.concurrency(key)
            self._states.slots[key] = Slot(key, Slots(size, max_waiting=size * settings.queue_per_slot))
        self._keeper = Keeper(
            self._states,
            self._ensure_loaded,
            self._drop,
            parallel=settings.load_parallel,
            retry_first_s=retry_first_s,
            retry_max_s=retry_max_s,
            watch_every_s=WATCH_EVERY_S,  # read now, so that a test may change it first
            clock=clock,
        )

    def concurrency(self, key: WeightsKey) -> int:
        """Simultaneous generations for one set of weights. The limit belongs to the weights (one
        device), so variants share it; when variants set different values the smallest wins."""
        explicit = [s.max_concurrency for s in self._states.variants(key) if s.max_concurrency]
        if explicit:
            return min(explicit)
        return self._engine_concurrency(self._states.owner(key))

    def _engine_concurrency(self, spec: ModelSpec) -> int:
        """The default for an entry without max_concurrency: the engine's own (vLLM batches)."""
        from webui.models.specs import default_concurrency

        return default_concurrency(spec, self.settings)

    def generation_slots(self) -> int:
        """Generations all the models can run at once (what the UI's queue is sized to)."""
        return sum(slot.slots.size for slot in self._states.slots.values())

    # ---- what is there -------------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self._states.specs)

    def spec(self, name: str) -> ModelSpec:
        return self._states.spec(name)

    def status(self, name: str) -> ModelStatus:
        return self._states.status(name)

    def fingerprint(self, name: str) -> Fingerprint | None:
        """What `name` serves now (None: not loaded, or weights that cannot say what they are)."""
        return self._states.fingerprint(name)

    def statuses(self) -> list[ModelStatus]:
        return [self.status(name) for name in self._states.specs]

    def ready_names(self) -> list[str]:
        """Models that can take a request now (ready, and healthy if they can tell)."""
        return [s.name for s in self.statuses() if s.usable]

    def on_change(self, listener: Callable[[ModelStatus], None]) -> None:
        """Called (from the keeper thread, or a caller's) whenever a model's state changes."""
        self._states.on_change(listener)

    # ---- loading -------------------------------------------------------------------------
    def start(self, names: Iterable[str] | None = None) -> None:
        """Queue models for loading in the background. Returns at once."""
        wanted = list(names) if names is not None else self.names()
        self._states.notify(self._keeper.queue(list(dict.fromkeys(self.spec(n).weights_key for n in wanted))))

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no model is queued or loading (tests, the CLI, ZeroGPU start-up)."""
        return self._states.wait_idle(timeout)

    def load(self, name: str) -> Backend:
        """Load now, in this thread, if needed and return the backend; ModelNotReady on failure."""
        self._ensure_loaded(self._states.slot(name))
        return self.get(name)

    def get(self, name: str, wait_s: float = 0.0, cancel: threading.Event | None = None) -> Backend:
        """The backend of a ready model. A model that is not loaded is queued (load on first use);
        one that is queued or loading is waited for, up to `wait_s` seconds or until `cancel` is set
        (the caller gave up)."""
        spec, slot, guard = self.spec(name), self._states.slot(name), self._states.guard
        if slot.state is ModelState.UNLOADED and not self._keeper.closed:
            self.start([name])
        settled = (ModelState.READY, ModelState.FAILED, ModelState.UNLOADED)
        deadline = time.monotonic() + wait_s
        with guard:
            while slot.state not in settled and time.monotonic() < deadline and not (cancel and cancel.is_set()):
                guard.wait(min(0.25, max(0.0, deadline - time.monotonic())))
            if slot.state is not ModelState.READY or slot.weights is None:
                raise ModelNotReady(f"{name} is not ready ({slot.text()})")
            if slot.weights.failure() is not None:  # dead, and the keeper is about to say so
                raise ModelNotReady(f"{name} is not ready ({ENGINE_EXITED})")
            backend = self._states.backends.get(name)
            if backend is None:
                backend = slot.weights.make_backend(spec, slot.slots)
                self._states.backends[name] = backend
            return backend

    def status_text(self, slot: Slot) -> str:
        return slot.text()

    def _ensure_loaded(self, slot: Slot) -> None:
        """Load `slot`'s weights and every variant's backend, unless ready (the slot lock makes a
        second caller wait for the first load); a failure becomes the model's status."""
        states = self._states
        with slot.lock:
            if slot.state is ModelState.READY:
                return
            spec = states.owner(slot.key)
            states.set(slot, ModelState.LOADING, "")
            started = time.perf_counter()
            try:
                weights = self._loader_for(spec.backend)(spec, self.settings)
                # Build every variant's backend now, so that template errors show up as a failure.
                backends = {s.name: weights.make_backend(s, slot.slots) for s in states.variants(slot.key)}
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
                retry = not isinstance(exc, ConfigError)
                self._keeper.failed(slot, _public_reason(exc), _short_reason(exc), retry=retry)
                return
            with states.guard:
                slot.weights, slot.load_s, slot.failures = weights, time.perf_counter() - started, 0
                states.backends.update(backends)
                states.fingerprints.update(prints)
            weights.on_failure(self._keeper.look)
            if weights.concurrency and not any(s.max_concurrency for s in states.variants(slot.key)):
                slot.slots.resize(weights.concurrency)  # e.g. `auto` served by transformers after all
            states.set(slot, ModelState.READY, "")
            log.info("%s ready on %s in %.1f s", spec.name, weights.device, slot.load_s)

    def _loader_for(self, backend: str) -> Loader:
        if backend not in self._loaders:
            from webui.models.specs import loader_for

            self._loaders[backend] = loader_for(backend)
        return self._loaders[backend]

    # ---- unloading -----------------------------------------------------------------------
    def unload(self, name: str) -> None:
        """Free the weights behind `name` (and its variants). Requests already streaming finish."""
        slot = self._states.slot(name)
        with slot.lock:
            self._drop(slot)
            self._keeper.forget(slot)
            self._states.set(slot, ModelState.UNLOADED, "")

    def close(self, wait_s: float | None = None) -> None:
        """Unload everything and stop the keeper (the server calls this on exit), with
        `unload_side_by_side`'s guarantees."""
        self._keeper.close()
        names = [self._states.owner(key).name for key in self._states.slots]
        left = unload_side_by_side(names, self.unload, wait_s)
        if left:
            log.warning("still loading or stopping after %.1f s, left to the exit: %s", wait_s, ", ".join(left))

    def _drop(self, slot: Slot) -> None:
        """Forget the weights and their backends, and free them (called with the slot lock held)."""
        with self._states.guard:
            weights, slot.weights, slot.load_s = slot.weights, None, None
            for variant in self._states.variants(slot.key):
                self._states.backends.pop(variant.name, None)
                self._states.fingerprints.pop(variant.name, None)
        if weights is not None:
            try:
                weights.close()
            except Exception:  # freeing must not stop the others from being freed
                log.exception("closing %s failed", self._states.owner(slot.key).name)


def unload_side_by_side(names: list[str], unload: Callable[[str], None], wait_s: float | None) -> list[str]:
    """Run `unload` for every name at once, one thread each ("unload:NAME"), and return the names
    still unloading after `wait_s` (None: wait for all). Side by side, because each engine's stop
    can take its grace period and one after another they would add up; a time limit, because the
    process is exiting, and what it leaves (a load the unload waits for, a slow stop) is ended by
    the atexit hook and the engines' supervisors (webui.engine.process)."""
    threads = [threading.Thread(target=unload, args=(n,), name=f"unload:{n}", daemon=True) for n in names]
    for thread in threads:
        thread.start()
    deadline = None if wait_s is None else time.monotonic() + wait_s
    for thread in threads:
        thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return [thread.name.removeprefix("unload:") for thread in threads if thread.is_alive()]


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

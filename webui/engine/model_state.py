"""What the registry knows about each model, under one lock, and the statuses it reports.

Every set of weights (one `Slot`, shared by the entries that differ only in prompt, template or
sampling: the "variants") has a state: queued, loading, ready, failed or unloaded. `ModelStates`
holds them all, with the loaded variants' backends and fingerprints, behind one condition, so that:

* a status is read whole: state, reason and weights come from one moment, never half a change;
* every change goes through `set`, which wakes whoever waits on the condition (a request waiting
  for its model, `wait_idle`, the keeper) and then tells the listeners, outside the lock, so a slow
  or broken listener never holds up loading;
* a ready model whose engine died, or whose backend says it is unwell, is reported with a
  `problem` at once, before the keeper has looked.

It loads nothing and starts no thread: `webui.engine.registry` and `webui.engine.keeper` do.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from webui.engine.base import ENGINE_EXITED, Backend, Slots, Weights
from webui.errors import ModelNotFound, clipped
from webui.models.fingerprint import Fingerprint
from webui.models.specs import ModelSpec

log = logging.getLogger(__name__)
WeightsKey = tuple[str, ...]  # ModelSpec.weights_key: what variants share


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


class Slot:
    """One set of weights and its lifecycle (its fields change under `ModelStates.guard`)."""

    def __init__(self, key: WeightsKey, slots: Slots) -> None:
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

    def text(self) -> str:
        """The state and its public reason, for a "not ready" error."""
        detail = f": {self.reason}" if self.reason else ""
        return f"{self.state.value}{detail}"


class ModelStates:
    """The entries, their weights' states and the loaded backends, behind one condition."""

    def __init__(self, specs: dict[str, ModelSpec], slots: dict[WeightsKey, Slot]) -> None:
        self.specs = specs
        self.slots = slots
        self.guard = threading.Condition()  # protects the dicts and states; notified on every change
        self.backends: dict[str, Backend] = {}
        self.fingerprints: dict[str, Fingerprint] = {}  # of the loaded variants, computed once per load
        self._listeners: list[Callable[[ModelStatus], None]] = []

    # ---- the entries ---------------------------------------------------------------------
    def spec(self, name: str) -> ModelSpec:
        try:
            return self.specs[name]
        except KeyError:
            raise ModelNotFound(f"no model named {clipped(name)!r}; known: {', '.join(self.specs)}") from None

    def slot(self, name: str) -> Slot:
        return self.slots[self.spec(name).weights_key]

    def owner(self, key: WeightsKey) -> ModelSpec:
        """The first entry on these weights: the one whose settings load them."""
        return next(s for s in self.specs.values() if s.weights_key == key)

    def variants(self, key: WeightsKey) -> list[ModelSpec]:
        return [s for s in self.specs.values() if s.weights_key == key]

    # ---- reporting -----------------------------------------------------------------------
    def status(self, name: str) -> ModelStatus:
        slot = self.slot(name)
        with self.guard:
            weights = slot.weights
            backend = self.backends.get(name)
            found = self.fingerprints.get(name) if weights else None
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
        with self.guard:
            return self.fingerprints.get(name)

    def wait_idle(self, timeout: float | None) -> bool:
        busy = (ModelState.QUEUED, ModelState.LOADING)
        with self.guard:
            return self.guard.wait_for(lambda: all(s.state not in busy for s in self.slots.values()), timeout)

    # ---- changes -------------------------------------------------------------------------
    def on_change(self, listener: Callable[[ModelStatus], None]) -> None:
        self._listeners.append(listener)

    def set(self, slot: Slot, state: ModelState, reason: str, detail: str = "") -> None:
        """Change `slot`'s state, wake the waiters, tell the listeners about each variant."""
        with self.guard:
            slot.state, slot.reason, slot.detail = state, reason, detail
            if state is not ModelState.FAILED:
                slot.retry_at = None
            self.guard.notify_all()
        self.notify([slot.key])

    def notify(self, keys: Iterable[WeightsKey]) -> None:
        """Tell the listeners the statuses of `keys`' variants (called without the guard held)."""
        for key in keys:
            for spec in self.variants(key):
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

"""The keeper: one background thread that schedules the registry's slow work.

It hands queued weights to loader threads (`--load-parallel`, 2 by default: a vLLM server spends
its start mostly in single-threaded imports, so two starts overlap well even on 2 cores), retries a
failed load after a pause that doubles from `retry_first_s` up to `retry_max_s`, and notices ready
weights that die while the app runs (an engine process that exits): it marks them failed, frees
what is left of them and reloads them on the same schedule. Guarantees:

* one thread, "registry-keeper", started on the first `queue` and ended by `close`; the loader
  threads ("registry-loader-N") live as long as the registry, since a vLLM server dies with the
  thread that started it;
* an engine's word that it died (`look`, from the engine's own thread) wakes the keeper at once,
  without waiting for its next look every `watch_every_s`;
* a failure caused by the models file itself is never retried: the same file fails the same way.

The loading and freeing of one set of weights are the registry's (`load`, `drop`); the keeper only
says when.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from webui.engine.base import ENGINE_EXITED
from webui.engine.model_state import ModelState, ModelStates, Slot, WeightsKey

log = logging.getLogger(__name__)
_WATCH: WeightsKey = ("watch",)  # the job "look at the ready weights", among the keys to load


def retry_pause(failures: int, first_s: float, most_s: float) -> float:
    """Seconds from the `failures`-th consecutive failure to the next attempt: doubling, capped."""
    return min(most_s, first_s * 2 ** (failures - 1))


class Keeper:
    """Queued loads, due retries and dead weights, worked off by one background thread."""

    def __init__(
        self,
        states: ModelStates,
        load: Callable[[Slot], None],
        drop: Callable[[Slot], None],
        *,
        parallel: int,
        retry_first_s: float,
        retry_max_s: float,
        watch_every_s: float,
        clock: Callable[[], float],
    ) -> None:
        self._states = states
        self._load, self._drop = load, drop  # called with nothing held; `drop` with the slot lock
        self._parallel = parallel
        self._retry = (retry_first_s, retry_max_s)
        self._watch_every_s = watch_every_s
        self._clock = clock  # wall time of retries (an injected one in tests)
        self._wanted: list[WeightsKey] = []  # queued, in order (under the states' guard)
        self._thread: threading.Thread | None = None
        self._loads: queue.SimpleQueue[WeightsKey | None] = queue.SimpleQueue()
        self._loaders: list[threading.Thread] = []
        self._look_now = False  # an engine said it died: the keeper looks before its next pause
        self.closed = False

    # ---- what callers ask ----------------------------------------------------------------
    def queue(self, keys: list[WeightsKey]) -> list[WeightsKey]:
        """Queue the unloaded or failed among `keys` and make sure the thread runs; returns those
        queued (their listeners are the caller's to tell, outside the guard)."""
        guard, queued = self._states.guard, []
        with guard:
            for key in keys:
                slot = self._states.slots[key]
                if slot.state in (ModelState.UNLOADED, ModelState.FAILED) and key not in self._wanted:
                    slot.state, slot.reason, slot.detail, slot.retry_at = ModelState.QUEUED, "", "", None
                    self._wanted.append(key)
                    queued.append(key)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._keep, name="registry-keeper", daemon=True)
                self._thread.start()
            guard.notify_all()
        return queued

    def forget(self, slot: Slot) -> None:
        """An unload: no retry and no queued load is left for `slot`."""
        with self._states.guard:
            slot.retry_at, slot.failures = None, 0
            if slot.key in self._wanted:
                self._wanted.remove(slot.key)

    def close(self) -> None:
        """Nothing more is loaded; the thread ends, and with it the loader threads."""
        with self._states.guard:
            self.closed = True
            self._wanted.clear()
            self._states.guard.notify_all()

    def failed(self, slot: Slot, reason: str, detail: str, *, retry: bool) -> None:
        """Mark failed (`reason` public, `detail` not); unless the models file itself is wrong, try
        again after a growing pause."""
        with self._states.guard:
            slot.failures += 1
            slot.retry_at = self._clock() + retry_pause(slot.failures, *self._retry) if retry else None
        self._states.set(slot, ModelState.FAILED, reason, detail)

    def look(self) -> None:
        """An engine's word that it died (from its own thread): the keeper looks now."""
        with self._states.guard:
            self._look_now = True
            self._states.guard.notify_all()

    # ---- the thread ----------------------------------------------------------------------
    def _keep(self) -> None:
        while True:
            key = self._next_job()
            if key is None:
                for _ in self._loaders:
                    self._loads.put(None)
                return
            if key == _WATCH:
                self._watch()
            else:
                self._dispatch(key)

    def _dispatch(self, key: WeightsKey) -> None:
        """Hand a load to one of `parallel` loader threads (started on first use)."""
        if len(self._loaders) < self._parallel:
            thread = threading.Thread(
                target=self._load_worker, name=f"registry-loader-{len(self._loaders)}", daemon=True
            )
            self._loaders.append(thread)
            thread.start()
        self._loads.put(key)

    def _load_worker(self) -> None:
        while (key := self._loads.get()) is not None:
            self._load(self._states.slots[key])

    def _next_job(self) -> WeightsKey | None:
        """The next set of weights to load, _WATCH when it is time to check ready weights, or None
        once closed. Due retries are queued here."""
        guard, slots = self._states.guard, self._states.slots.values()
        with guard:
            while not self.closed:
                now = self._clock()
                for slot in slots:
                    if slot.state is ModelState.FAILED and slot.retry_at is not None and slot.retry_at <= now:
                        slot.state, slot.retry_at = ModelState.QUEUED, None
                        self._wanted.append(slot.key)
                if self._wanted:
                    return self._wanted.pop(0)
                if self._look_now or any(s.weights is not None and s.weights.watched for s in slots):
                    if not self._look_now:
                        guard.wait(self._watch_every_s)  # ends early when an engine reports its death
                    self._look_now = False
                    return _WATCH
                retries = [s.retry_at for s in slots if s.retry_at is not None]
                guard.wait(max(0.01, min(retries) - now) if retries else None)
            return None

    def _watch(self) -> None:
        """Weights that died (an engine process exited) are failed and reloaded with a pause."""
        for slot in self._states.slots.values():
            weights = slot.weights
            problem = weights.failure() if weights is not None and slot.state is ModelState.READY else None
            if problem is None:
                continue
            log.error("%s stopped working: %s", self._states.owner(slot.key).name, problem)
            with slot.lock:
                # failed first: stopping what is left of the engine can take its grace period
                self.failed(slot, ENGINE_EXITED, problem, retry=True)
                self._drop(slot)

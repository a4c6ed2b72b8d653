"""The backend interface: one streaming method that honours a cancel event.

Every backend (local transformers weights, a remote OpenAI-compatible server, a test fake) yields
`TextDelta`s and then exactly one `Finished`. Closing the iterator early must stop the work it
started: callers rely on `contextlib.closing` / generator close to cancel.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Iterator, Sequence

from webui.errors import Overloaded
from webui.types import Finished, Message, SamplingParams, StreamEvent, TextDelta

if TYPE_CHECKING:
    from webui.specs import ModelSpec


class Backend(ABC):
    spec: "ModelSpec"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def context_length(self) -> int | None:
        return self.spec.context_length

    def default_params(self) -> SamplingParams:
        return self.spec.sampling

    @abstractmethod
    def stream(
        self, messages: Sequence[Message], params: SamplingParams, cancel: threading.Event | None = None
    ) -> Iterator[StreamEvent]:
        """Yield TextDelta events, then one Finished. Validation errors (bad parameters, a prompt
        too long, a full queue) are raised before the first event; failures of the model itself
        arrive as Finished(reason=ERROR)."""

    def render_prompt(self, messages: Sequence[Message]) -> str | None:
        """The exact prompt text this backend would send, when it can know it."""
        return None


class Slots:
    """A limit on simultaneous generations for one set of weights. Waiting requests queue with a
    timeout instead of oversubscribing the device."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._semaphore = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self.busy = 0

    def acquire(self, model: str, timeout: float) -> None:
        start = time.monotonic()
        if not self._semaphore.acquire(timeout=timeout):
            raise Overloaded(model, time.monotonic() - start)
        with self._lock:
            self.busy += 1

    def release(self) -> None:
        with self._lock:
            self.busy -= 1
        self._semaphore.release()


def collect(events: Iterator[StreamEvent]) -> tuple[str, Finished]:
    """Drain a stream into (text, final event): handy for tests, the CLI and non-streaming APIs."""
    parts: list[str] = []
    final: Finished | None = None
    for event in events:
        if isinstance(event, TextDelta):
            parts.append(event.text)
        else:
            final = event
    if final is None:
        raise RuntimeError("stream ended without a Finished event")
    return "".join(parts), final

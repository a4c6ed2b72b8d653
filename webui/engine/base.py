"""The backend interface: one streaming method that honours a cancel event.

Every backend (local transformers weights, a remote OpenAI-compatible server, a test fake) yields
`TextDelta`s and then exactly one `Finished`. Closing the iterator early must stop the work it
started: callers rely on `contextlib.closing` / generator close to cancel.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from webui.errors import Overloaded, ParamError
from webui.types import Finished, Message, SamplingParams, StreamEvent, TextDelta

if TYPE_CHECKING:
    from webui.models.specs import ModelSpec


class Backend(ABC):
    spec: ModelSpec

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

    def complete(
        self, prompt: str, params: SamplingParams, cancel: threading.Event | None = None
    ) -> Iterator[StreamEvent]:
        """Raw text completion: `prompt` goes to the model as is, with no chat template (the
        /v1/completions route). Same contract as `stream`. Backends that cannot do it refuse
        eagerly, so that the API answers 400 instead of failing mid-stream."""
        raise ParamError("prompt", f"{self.name} does not support raw text completion; use chat completions")

    def prompt_tokens(self, prompt: Sequence[Message] | str) -> int | None:
        """Tokens the prompt takes (messages rendered with this entry's template and system
        prompt, or raw text), when the backend can count them; None otherwise. Lets the HTTP API
        refuse a conversation that does not fit instead of silently dropping old turns."""
        return None

    def health(self) -> str | None:
        """None while the backend works; a short reason when a model that loaded fine has since
        become unusable (a remote server that stopped answering). Shown in the model status."""
        return None


class ClosingStream(Iterator[StreamEvent]):
    """The events of one request, with a handle on the work behind them. Closing it (or an error
    while reading it) calls `stop` and then `wait`, even if it was never iterated: a plain generator
    that was never started runs no `finally`, and a request would keep its thread and slot."""

    def __init__(self, events: Iterator[StreamEvent], stop: Callable[[], None],
                 wait: Callable[[], None] = lambda: None) -> None:
        self._events = events
        self._stop = stop
        self._wait = wait

    def __next__(self) -> StreamEvent:
        try:
            return next(self._events)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._stop()
        self._events.close()
        self._wait()

    def __del__(self) -> None:
        self._stop()


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


class Weights:
    """What a loader returns: shared by the variants of one set of weights."""

    def __init__(self, make_backend: Callable[[ModelSpec, Slots], Backend], *, device: str = "",
                 from_cache: bool = False, close: Callable[[], None] | None = None) -> None:
        self.make_backend = make_backend
        self.device = device
        self.from_cache = from_cache
        self._close = close

    def close(self) -> None:
        if self._close is not None:
            self._close()


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

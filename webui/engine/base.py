"""The backend interface: one streaming method that honours a cancel event.

Every backend (local transformers weights, a remote OpenAI-compatible server, a test fake) yields
`TextDelta`s and then exactly one `Finished`. Closing the iterator early must stop the work it
started: callers rely on `contextlib.closing` / generator close to cancel.
"""

from __future__ import annotations

import collections
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from webui.errors import ConfigError, Overloaded, ParamError
from webui.types import Finished, FinishReason, Message, Route, SamplingParams, StreamEvent, TextDelta

if TYPE_CHECKING:
    from webui.models.specs import ModelSpec


Worker = TypeVar("Worker")
ENGINE_EXITED = "engine exited"  # the public reason of weights whose engine process died


class EngineFailure(RuntimeError):
    """An engine, or the server behind a model, failed. The message is the whole story, for the
    server log: addresses, ports, the upstream's or the engine's own words. `public` is what any
    visitor may read in the model's status: a short generic reason ("upstream unreachable")."""

    def __init__(self, message: str, public: str) -> None:
        super().__init__(message)
        self.public = public


class EngineUnavailable(ConfigError):
    """An engine cannot serve this entry on this machine; the message says why (shown with the
    fallback, or as the failure of an entry that insists on the engine, which is not retried: the
    machine will not change). `public`, what every visitor reads in the status, is the message itself
    unless it names a path."""

    def __init__(self, message: str, public: str | None = None) -> None:
        super().__init__(message)
        self.public = public or message


class Backend(ABC):
    spec: ModelSpec

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def context_length(self) -> int | None:
        return self.spec.context_length

    @property
    def context_name(self) -> str:
        """What a prompt and its reply must fit in, as error messages name it: the model's context,
        or an engine's own smaller limit (transformers' paged KV cache) when that is what binds."""
        return "this model's context"

    def default_params(self) -> SamplingParams:
        return self.spec.sampling

    @abstractmethod
    def stream(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        cancel: threading.Event | None = None,
        *,
        route: Route | None = None,
    ) -> Iterator[StreamEvent]:
        """Yield TextDelta events, then one Finished. Validation errors (bad parameters, a prompt
        too long, a full queue) are raised before the first event; failures of the model itself
        arrive as Finished(reason=ERROR). `route` names the conversation and its user for a
        router in front of a remote server; an engine of our own has no use for it."""

    def render_prompt(self, messages: Sequence[Message]) -> str | None:
        """The exact prompt text this backend would send, when it can know it."""
        return None

    def complete(
        self,
        prompt: str,
        params: SamplingParams,
        cancel: threading.Event | None = None,
        *,
        route: Route | None = None,
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

    def template_source(self) -> str | None:
        """The text of the template this entry renders prompts with (for its fingerprint); None where
        the prompt is rendered elsewhere (a remote server)."""
        return None

    def health(self) -> str | None:
        """None while the backend works; a short generic reason when a model that loaded fine has
        since become unusable ("upstream unreachable"). Shown to every visitor in the model status,
        so never an address or an upstream's own words: those go to the server log."""
        return None


class ClosingStream(Iterator[StreamEvent]):
    """The events of one request, with a handle on the work behind them. Closing it (or an error
    while reading it) calls `stop` and then `wait`, even if it was never iterated: a plain generator
    that was never started runs no `finally`, and a request would keep its thread and slot."""

    def __init__(
        self,
        events: Generator[StreamEvent, None, None],
        stop: Callable[[], None],
        wait: Callable[[], None] = lambda: None,
    ) -> None:
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
    """A limit on simultaneous generations for one set of weights, with a bounded first-come,
    first-served line of waiting requests in front of it. A request that finds the line full is
    refused at once (`Overloaded`) rather than after a timeout; a waiting request whose caller gave
    up (its cancel event is set: Stop, a closed tab, a dropped API client) leaves the line without
    ever running. A freed slot goes straight to the first request in line."""

    _WAIT_SLICE_S = 0.05  # how often a waiting request looks at its cancel event

    def __init__(self, size: int, max_waiting: int | None = None) -> None:
        self.size = size
        self.max_waiting = size * 4 if max_waiting is None else max_waiting
        self._lock = threading.Lock()
        self._free = size
        self._line: collections.deque[threading.Event] = collections.deque()

    @property
    def busy(self) -> int:
        return self.size - self._free

    @property
    def waiting(self) -> int:
        return len(self._line)

    def acquire(self, model: str, timeout: float, cancel: threading.Event | None = None) -> bool:
        """Take a slot: True when taken, False when `cancel` was set while waiting. Raises
        Overloaded when the line is full, or when no slot came free within `timeout` seconds."""
        with self._lock:
            if self._free and not self._line:
                self._free -= 1
                return True
            if len(self._line) >= self.max_waiting:
                raise Overloaded(model, 0.0, waiting=len(self._line))
            ticket = threading.Event()
            self._line.append(ticket)
        start = time.monotonic()
        while True:
            remaining = start + timeout - time.monotonic()
            if ticket.wait(min(remaining, self._WAIT_SLICE_S) if cancel is not None else max(remaining, 0.0)):
                return True
            gave_up = cancel is not None and cancel.is_set()
            if gave_up or time.monotonic() >= start + timeout:
                with self._lock:
                    if not ticket.is_set():
                        self._line.remove(ticket)
                    elif not gave_up:
                        return True  # the slot arrived just in time
                    else:
                        self._release_locked()  # it arrived as the caller gave up: pass it on
                if gave_up:
                    return False
                raise Overloaded(model, time.monotonic() - start)

    def release(self) -> None:
        with self._lock:
            self._release_locked()

    def resize(self, size: int) -> None:
        """Change the number of slots (an engine that turned out to batch more, or less); requests
        running now finish, and new slots go to the line first."""
        with self._lock:
            grow, self.size = size - self.size, size
            self._free += grow
            while self._free > 0 and self._line:
                self._free -= 1
                self._line.popleft().set()

    def _release_locked(self) -> None:
        if self._line:
            self._line.popleft().set()  # the slot passes to the first in line; busy stays the same
        else:
            self._free += 1


class Weights:
    """What a loader returns: shared by the variants of one set of weights.

    `engine` says which engine serves them (shown in the model status, with the reason for a
    fallback); `concurrency`, how many generations it runs well at once (used unless the models
    file says). `failure`, when given, is asked every second by the registry whether the weights
    still live (an engine process may exit): a reason (the detail, for the server log) means they
    died, and the registry then closes them and loads them again after a pause. `on_failure`, when
    given, takes a callback that the engine calls the moment it dies, so that the registry fails
    the model at once instead of at its next look."""

    def __init__(
        self,
        make_backend: Callable[[ModelSpec, Slots], Backend],
        *,
        device: str = "",
        from_cache: bool = False,
        close: Callable[[], None] | None = None,
        failure: Callable[[], str | None] | None = None,
        engine: str = "",
        concurrency: int | None = None,
        on_failure: Callable[[Callable[[], None]], None] | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> None:
        self.make_backend = make_backend
        # What these weights are, for the variants' fingerprints (webui.models.fingerprint): the
        # weights' hash, dtype, engine and version; empty where the loader cannot say.
        self.identity: dict[str, str] = dict(identity or {})
        self.concurrency = concurrency  # generations these weights run well at once, when the engine knows
        self.device = device
        self.from_cache = from_cache
        self.engine = engine
        self._close = close
        self._failure = failure
        self._on_failure = on_failure

    @property
    def watched(self) -> bool:
        return self._failure is not None

    def failure(self) -> str | None:
        return self._failure() if self._failure is not None else None

    def on_failure(self, listener: Callable[[], None]) -> None:
        if self._on_failure is not None:
            self._on_failure(listener)

    def close(self) -> None:
        if self._close is not None:
            self._close()


def start_in_slot(
    slots: Slots, model: str, timeout_s: float, cancel: threading.Event, start: Callable[[], Worker]
) -> Worker | None:
    """Queue for one of `slots`, then `start` the request's worker, which owns the slot from then on
    and releases it when done. None when the caller gave up while waiting (nothing started); a
    worker that fails to start gives the slot back here."""
    if not slots.acquire(model, timeout_s, cancel):
        return None
    try:
        return start()
    except BaseException:
        slots.release()
        raise


def decode_rate(tokens: int, first_at: float | None, now: float) -> float | None:
    """Tokens per second after the first token (prefill belongs to the time to first token)."""
    if first_at is None or tokens < 2 or now <= first_at:
        return None
    return (tokens - 1) / (now - first_at)


def cancelled_before_start(prompt_tokens: int = 0, prompt: str = "") -> Iterator[StreamEvent]:
    """The stream of a request whose caller gave up while it waited for a slot: it never ran."""
    yield Finished(FinishReason.CANCELLED, prompt_tokens=prompt_tokens, prompt=prompt)


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

"""The backend of an entry served by another OpenAI-compatible server: a chat or raw-text request
in, a stream of events out, exactly like a local model's.

Each request streams from `{base_url}/chat/completions` (or `/completions` for raw text) through an
`Upstream` reader thread; checks and queueing for a generation slot happen eagerly, upstream
failures arrive as Finished(ERROR) in that one stream. The consumer polls the reader's queue in
short slices so that Stop or a dropped client is honoured within a fraction of a second even while
upstream is silent.

Routing: each request names its conversation in the headers that routers hash on
(`session_headers`) and its user in OpenAI's `user` field, both keyed hashes made by the caller
(`types.Route`); without a route, a hash of the conversation's opening and no user. Sampling goes
in OpenAI's names (`upstream_sampling`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import httpx

from webui.engine.base import Backend, ClosingStream, Slots, cancelled_before_start, start_in_slot
from webui.engine.replicas import Replicas, conversation_key, later_turn
from webui.engine.stops import StopFilter, shown_until_stop
from webui.engine.templates import with_system
from webui.engine.upstream import Health, RemoteError, Tally, Upstream
from webui.models.specs import ModelSpec
from webui.types import Finished, FinishReason, Message, Route, SamplingParams, StreamEvent

_POLL_S = 0.1  # how often a waiting consumer looks at the cancel event
_MAX_UPSTREAM_STOPS = 4  # OpenAI's limit; the rest are applied here, on our side
SESSION_HEADERS = ("X-Session-ID", "X-SMG-Routing-Key")  # what routers hash on for affinity: session_headers


class RemoteBackend(Backend):
    def __init__(
        self,
        spec: ModelSpec,
        client: httpx.Client,
        slots: Slots,
        health: Health,
        *,
        queue_timeout_s: float,
        replicas: Replicas | None = None,
    ) -> None:
        self.spec = spec
        self.client = client
        self.slots = slots
        self._health = health
        self.queue_timeout_s = queue_timeout_s
        self.replicas = replicas or Replicas([spec.base_url])

    def health(self) -> str | None:
        return self._health.problem

    def stream(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        cancel: threading.Event | None = None,
        *,
        route: Route | None = None,
    ) -> Iterator[StreamEvent]:
        """Checks and queueing happen eagerly; the request itself starts in the reader thread, so
        that its failures arrive as Finished(ERROR) in this stream only."""
        params.validate(self.context_length)
        convo = [m.as_dict() for m in with_system(messages, self.spec.system_prompt)]
        opening = conversation_key(messages, self.spec.system_prompt)
        return self._start(
            "chat/completions",
            {"messages": convo},
            params,
            cancel,
            key=(route.session if route and route.session else None) or opening,
            follow=later_turn(messages),
            user=route.user if route else "",
        )

    def complete(
        self,
        prompt: str,
        params: SamplingParams,
        cancel: threading.Event | None = None,
        *,
        route: Route | None = None,
    ) -> Iterator[StreamEvent]:
        params.validate(self.context_length)
        return self._start(
            "completions",
            {"prompt": prompt},
            params,
            cancel,
            key=route.session if route and route.session else None,
            user=route.user if route else "",
        )

    def _start(
        self,
        path: str,
        payload: dict[str, Any],
        params: SamplingParams,
        cancel: threading.Event | None,
        *,
        finish: Callable[[Finished], Finished] | None = None,
        prompt_tokens: int = 0,
        prompt: str = "",
        key: str | None = None,
        follow: bool = False,
        user: str = "",
    ) -> Iterator[StreamEvent]:
        """Queue for a slot and start the reader thread. `finish` may rewrite the final event (an
        engine of our own knows the prompt and its token count better than the usage says); `key`
        names the conversation (our replica choice and a router's, `session_headers`), `follow`
        sends it to its replica (a later turn), and `user` (a keyed hash) goes as OpenAI's `user`."""
        started = time.perf_counter()
        body = {
            "model": self.spec.remote_model,
            **payload,
            **upstream_sampling(params),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if user:
            body["user"] = user
        cancel = cancel or threading.Event()
        upstream = Upstream(
            self.client,
            self.replicas,
            path,
            body,
            self.slots,
            self._health,
            key=key,
            follow=follow,
            headers=session_headers(key),
        )
        if (
            start_in_slot(
                self.slots, self.spec.name, self.queue_timeout_s, cancel, lambda: upstream.start(self.spec.name)
            )
            is None
        ):
            return cancelled_before_start(prompt_tokens, prompt)
        events = self._events(upstream, params, cancel, started, path=path, finish=finish)
        return ClosingStream(events, stop=upstream.abort)

    def _events(
        self,
        upstream: Upstream,
        params: SamplingParams,
        cancel: threading.Event,
        started: float,
        *,
        path: str,
        finish: Callable[[Finished], Finished] | None = None,
    ) -> Generator[StreamEvent, None, None]:
        tally = Tally(started)
        texts = (
            tally.add(chunk, chat=path.startswith("chat")) for chunk in upstream.chunks.until(cancel.is_set, _POLL_S)
        )
        reason: FinishReason | None = None
        error: RemoteError | None = None
        try:
            if (yield from shown_until_stop(texts, StopFilter(params.stop), complete=lambda: upstream.chunks.ended)):
                reason = FinishReason.STOP
            elif not upstream.chunks.ended:
                reason = FinishReason.CANCELLED
        except RemoteError as exc:
            reason, error = FinishReason.ERROR, exc
        finally:
            upstream.abort()
        if reason is None:
            reason = FinishReason.LENGTH if tally.finish == "length" else FinishReason.STOP
        final = tally.finished(reason, error, self.spec, upstream.replica)
        yield finish(final) if finish is not None else final


def session_headers(key: str | None) -> dict[str, str]:
    """The conversation's id in the headers that routers in front of a fleet hash on to keep a
    conversation on one replica (its prefix cache): vLLM's router reads X-Session-ID first, and
    SGLang's model gateway X-SMG-Routing-Key. The id is a hash, never a name or an address."""
    return dict.fromkeys(SESSION_HEADERS, key) if key else {}


def upstream_sampling(params: SamplingParams) -> dict[str, Any]:
    """Our sampling settings in OpenAI's names. The Hugging Face extras go only when they differ
    from their defaults, so that servers that do not know them (OpenAI itself) are not bothered.
    The values are the effective ones (a 1e-45 temperature goes as 0), which no server divides by."""
    params = params.effective()
    body: dict[str, Any] = {
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
    }
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop[:_MAX_UPSTREAM_STOPS])
    if params.top_k:
        body["top_k"] = params.top_k
    if params.repetition_penalty != 1.0:
        body["repetition_penalty"] = params.repetition_penalty
    if params.ignore_eos:
        body["ignore_eos"] = True
    return body

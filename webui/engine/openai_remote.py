"""A model served by another OpenAI-compatible server (vLLM, TGI, llama.cpp, another arena).

The arena fronts a fleet this way: each entry streams from `{base_url}/chat/completions` (or
`/completions` for raw text) into a pane or through our own API, exactly like a local model.

One request = one reader thread that owns the upstream HTTP stream and hands parsed chunks over a
queue (errors travel the same queue, so the consumer never waits forever). The consumer polls the
queue in short slices so that Stop or a dropped client is honoured within a fraction of a second
even while upstream is silent; aborting shuts the socket down, which wakes the reader and tells the
upstream server that its client left (a well-behaved server then stops generating).

An entry may list several replicas of the upstream (`base_url: [url, ...]`): `Replicas` chooses one
per request (least busy, a conversation's later turns on the replica of its first). A request whose
connection fails before anything came back (refused, reset, HTTP 502/503) is tried once on each
other replica; after the first chunk a failure ends the stream, never a silent restart.

Failures of the upstream server (refused connection, timeout, HTTP error) end that one stream with
Finished(reason=ERROR); once no replica is left answering, that is the backend's health until a
request succeeds again. A replica that fails is skipped for a while (the log says which).
Every visitor sees a model's status, so a failure there is a generic reason ("upstream
unreachable"); the upstream's address and its own words go to the server log, once.

Width and routing: an entry without max_concurrency sends up to `--remote-concurrency` (16)
requests at once to each replica, which a batching server runs side by side. Each request names its
conversation in the headers that routers hash on (`session_headers`) and its user in OpenAI's
`user` field, both keyed hashes made by the caller (`types.Route`); without a route, a hash of the
conversation's opening and no user.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import httpx

from webui.config import Settings
from webui.engine.base import (
    Backend,
    ClosingStream,
    EngineFailure,
    Slots,
    Weights,
    cancelled_before_start,
    decode_rate,
    start_in_slot,
)
from webui.engine.replicas import Replicas, conversation_key, later_turn
from webui.engine.stops import StopFilter, shown_until_stop
from webui.engine.templates import with_system
from webui.handoff import Handoff, run_in_thread
from webui.models.entries import OpenAIEntry
from webui.models.fingerprint import remote_components
from webui.models.specs import ModelSpec
from webui.types import Finished, FinishReason, Message, Route, SamplingParams, StreamEvent

log = logging.getLogger(__name__)
_POLL_S = 0.1  # how often a waiting consumer looks at the cancel event
_MAX_UPSTREAM_STOPS = 4  # OpenAI's limit; the rest are applied here, on our side
SESSION_HEADERS = ("X-Session-ID", "X-SMG-Routing-Key")  # what routers hash on for affinity: session_headers
_RETRY_STATUSES = (502, 503)  # a proxy or server with no engine behind it: another replica may have one
# What a visitor may read about an upstream that failed (the model status); the rest is logged.
UNREACHABLE = "upstream unreachable"
CONNECTION_LOST = "upstream connection lost"
TIMED_OUT = "upstream timed out"
UPSTREAM_ERROR = "upstream error"
BAD_ANSWER = "upstream sent a bad answer"
NO_KEY = "upstream API key not set"
KEY_REFUSED = "upstream refused our API key"
NOT_SERVED = "upstream does not serve this model"


class RemoteError(EngineFailure):
    """The upstream server failed; `status` is its HTTP status when it answered at all, and
    `detail` the server's own error message (without our URL: the HTTP API passes it on)."""

    def __init__(
        self, message: str, status: int | None = None, detail: str | None = None, *, public: str = UPSTREAM_ERROR
    ) -> None:
        super().__init__(message, public)
        self.status = status
        self.detail = detail


class Health:
    """The last thing we learned about the upstream server, shared by an entry's variants: a
    generic problem for the status, its detail logged once when it appears (or changes)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._problem: str | None = None
        self._public: str | None = None

    def ok(self) -> None:
        with self._lock:
            self._problem = self._public = None

    def failed(self, exc: RemoteError) -> None:
        with self._lock:
            new = exc.public != self._public
            self._public, self._problem = exc.public, f"{exc.public} (at {time.strftime('%H:%M:%S')})"
        if new:
            log.warning("%s is unhealthy: %s", self.name, exc)

    @property
    def problem(self) -> str | None:
        with self._lock:
            return self._problem


class _Failed(Exception):
    """One try at one replica failed: `down` when the replica itself is at fault (it is then
    skipped for a while), `retry` when the request may go to another replica if nothing came back."""

    def __init__(self, error: RemoteError, *, down: bool, retry: bool) -> None:
        super().__init__(str(error))
        self.error, self.down, self.retry = error, down, retry


class _Upstream:
    """One streaming HTTP request, read in its own thread; its chunks (or a RemoteError) go to
    `chunks`. Tries the replicas in turn while nothing has come back; releases the generation slot
    when done."""

    def __init__(
        self,
        client: httpx.Client,
        replicas: Replicas,
        path: str,
        body: dict[str, Any],
        slots: Slots,
        health: Health,
        *,
        key: str | None = None,
        follow: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.chunks: Handoff[dict[str, Any]] = Handoff()
        self.aborted = threading.Event()
        self.replica = self.url = ""  # the replica of the current (or last) try, and the URL asked
        self._client, self._replicas, self._path, self._body = client, replicas, path, body
        self._key, self._follow, self._headers = key, follow, headers or {}
        self._slots, self._health = slots, health
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._delivered = False  # a chunk went to the consumer: no more retries

    def start(self, name: str) -> threading.Thread:
        return run_in_thread(self._run, self.chunks, name=f"remote:{name}")

    def abort(self) -> None:
        """Stop reading and close the connection (callable from any thread, any number of times)."""
        self.aborted.set()
        with self._lock:
            sock = self._socket
        if sock is not None:
            with contextlib.suppress(OSError):  # shutdown, not close: it wakes a recv() blocked in the reader
                sock.shutdown(socket.SHUT_RDWR)

    def _run(self) -> None:
        """Raises a RemoteError for the consumer, unless we aborted the request ourselves."""
        tried: list[str] = []
        try:
            while (url := self._replicas.choose(self._key, follow=self._follow, tried=tried)) is not None:
                tried.append(url)
                self.replica, self.url = url, f"{url}/{self._path}"
                try:
                    self._attempt()
                    return
                except _Failed as failed:
                    if self.aborted.is_set():
                        return  # we closed it ourselves
                    if failed.down:
                        self._replicas.failed(url)
                    if not failed.retry or self._delivered or len(tried) == len(self._replicas.urls):
                        self._report(failed)
                    log.warning("%s: trying another replica: %s", self._health.name, failed.error)
                finally:
                    self._replicas.done(url)
        finally:
            self._slots.release()

    def _attempt(self) -> None:
        try:
            self._request()
        except RemoteError as exc:
            raise _Failed(
                exc, down=exc.status is not None and exc.status >= 500, retry=exc.status in _RETRY_STATUSES
            ) from exc
        except httpx.TimeoutException as exc:
            raise _Failed(
                RemoteError(f"{self.url} timed out ({type(exc).__name__})", public=TIMED_OUT),
                down=True,
                retry=isinstance(exc, httpx.ConnectTimeout),
            ) from exc
        except (httpx.HTTPError, OSError) as exc:
            # refused before a byte was sent, or dropped later (a server that died while answering)
            public = UNREACHABLE if isinstance(exc, (httpx.ConnectError, ConnectionRefusedError)) else CONNECTION_LOST
            raise _Failed(
                RemoteError(f"cannot reach {self.url}: {exc or type(exc).__name__}", public=public),
                down=True,
                retry=True,
            ) from exc
        except Exception as exc:  # e.g. a malformed chunk; must reach the consumer
            raise _Failed(
                RemoteError(f"bad answer from {self.url}: {type(exc).__name__}: {exc}", public=BAD_ANSWER),
                down=False,
                retry=False,
            ) from exc

    def _request(self) -> None:
        with self._client.stream("POST", self.url, json=self._body, headers=self._headers) as response:
            self._remember_socket(response)
            if self.aborted.is_set():
                return
            if response.status_code >= 400:
                response.read()
                detail = _error_text(response)
                raise RemoteError(
                    f"{self.url} answered HTTP {response.status_code}: {detail}", response.status_code, detail
                )
            self._replicas.succeeded(self.replica)
            self._health.ok()
            self._read(response)
            with self._lock:  # finished: the connection may go back to the pool, hands off
                self._socket = None

    def _read(self, response: httpx.Response) -> None:
        for line in response.iter_lines():
            if self.aborted.is_set():
                return
            if not line.startswith("data:"):
                continue  # blank separators, comments, `event:` lines
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                return
            chunk = json.loads(data)
            if isinstance(chunk, dict) and chunk.get("error"):
                error = chunk["error"]
                message = error.get("message") if isinstance(error, dict) else str(error)
                raise RemoteError(f"{self.url} reported an error mid-stream: {message}", public=UPSTREAM_ERROR)
            self._delivered = True
            self.chunks.put(chunk)

    def _remember_socket(self, response: httpx.Response) -> None:
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        with self._lock:
            self._socket = sock
        if sock is not None and self.aborted.is_set():
            self.abort()

    def _report(self, failed: _Failed) -> None:
        """The request failed for good. The model is unhealthy when no replica is left answering;
        with one replica down and another up it stays in service (the log names the replica)."""
        if failed.down and len(self._replicas.down()) == len(self._replicas.urls):
            self._health.failed(failed.error)
        elif failed.down:
            log.warning("%s: a replica failed, others remain: %s", self._health.name, failed.error)
        raise failed.error


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
        upstream = _Upstream(
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
        upstream: _Upstream,
        params: SamplingParams,
        cancel: threading.Event,
        started: float,
        *,
        path: str,
        finish: Callable[[Finished], Finished] | None = None,
    ) -> Generator[StreamEvent, None, None]:
        tally = _Tally(started)
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


class _Tally:
    """Counts what came back. Token counts come from the upstream usage when it sends one (we ask
    with stream_options.include_usage); otherwise each text chunk counts as one token."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.first_at: float | None = None
        self.chunks = 0
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None

    def add(self, chunk: dict[str, Any], *, chat: bool) -> str:
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not choices:
            return ""
        choice = choices[0]
        self.finish = choice.get("finish_reason") or self.finish
        text = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
        if text:
            self.chunks += 1
            if self.first_at is None:
                self.first_at = time.perf_counter()
        return text or ""

    def finished(self, reason: FinishReason, error: RemoteError | None, spec: ModelSpec, replica: str) -> Finished:
        usage = self.usage or {}
        completion = int(usage.get("completion_tokens") or self.chunks)
        rate = decode_rate(completion, self.first_at, time.perf_counter())
        extra: dict[str, Any] = {"upstream": replica or spec.base_url, "remote_model": spec.remote_model}
        if error is not None:
            extra["upstream_failure"] = error.public
        if error is not None and error.status is not None:
            extra["upstream_status"] = error.status
        if error is not None and error.detail:
            extra["upstream_message"] = error.detail
        return Finished(
            reason=reason,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=completion,
            ttft_s=(self.first_at - self.started) if self.first_at else None,
            tokens_per_s=rate,
            error=str(error) if error else None,
            extra=extra,
        )


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


def _error_text(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            return str(message)
    except (ValueError, AttributeError):
        pass
    return response.text[:300] or response.reason_phrase


# ---- loading ----------------------------------------------------------------------------------
def load_openai(spec: ModelSpec, settings: Settings) -> Any:
    """Registry loader: a client for the entry's server, after checking that the server answers
    and serves the model. A failure here becomes the model's status (failed: reason)."""

    client = _client(spec)
    replicas = Replicas(replica_urls(spec))
    try:
        listed = _probe_replicas(client, spec, replicas)
    except BaseException:
        client.close()
        raise
    health = Health(spec.name)
    log.info("%s: served by %s as %s", spec.name, ", ".join(replicas.urls), spec.remote_model)

    def make_backend(variant: ModelSpec, slots: Slots) -> RemoteBackend:
        return RemoteBackend(
            variant, client, slots, health, queue_timeout_s=settings.queue_timeout_s, replicas=replicas
        )

    # "remote" only: the device shows in every visitor's model status, the address is logged above
    identity = remote_components(replicas.urls[0], str(listed.get("id", spec.remote_model)))
    if isinstance(listed.get("root"), str) and listed["root"] != identity["model"]:
        identity["root"] = listed["root"]  # vLLM and others name the weights behind the id
    return _ReplicatedWeights(
        replicas,
        make_backend,
        device="remote",
        close=client.close,
        identity=identity,
        concurrency=default_concurrency(settings) * len(replicas.urls),  # each replica batches its own
    )


def default_concurrency(settings: Settings) -> int:
    """Requests in flight to one upstream server for an entry without max_concurrency (an entry
    with replicas gets this many per replica when it loads)."""
    return settings.remote_concurrency


class _ReplicatedWeights(Weights):
    """Weights whose status line counts the replicas being skipped ("1 of 3 replicas down"): the
    model still serves, so this is a remark beside "ready", not a problem; addresses go to the log."""

    def __init__(self, replicas: Replicas, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._replicas = replicas

    @property
    def engine(self) -> str:
        down = len(self._replicas.down())
        remark = f"{down} of {len(self._replicas.urls)} replicas down" if down else ""
        return "; ".join(part for part in (self._engine, remark) if part)

    @engine.setter
    def engine(self, value: str) -> None:
        self._engine = value


def _client(spec: ModelSpec) -> httpx.Client:
    headers = {}
    if spec.api_key_env:
        # The models file names the variable instead of holding the key, so the file can be shared.
        key = os.environ.get(spec.api_key_env)
        if not key:
            raise RemoteError(
                f"environment variable {spec.api_key_env} (the API key for {spec.base_url}) is not set", public=NO_KEY
            )
        headers["Authorization"] = f"Bearer {key}"
    timeout = httpx.Timeout(spec.timeout_s, connect=spec.connect_timeout_s)
    # No connection cap of httpx's own (100): the entry's generation slots already bound it.
    return httpx.Client(timeout=timeout, headers=headers, limits=httpx.Limits(max_connections=None))


def replica_urls(spec: ModelSpec) -> list[str]:
    """The entry's upstream URLs: `base_url` as one URL or a list of replicas."""
    entry = spec.entry
    given = entry.base_url if isinstance(entry, OpenAIEntry) else spec.base_url
    return [url.rstrip("/") for url in ([given] if isinstance(given, str) else given)]


def _probe_replicas(client: httpx.Client, spec: ModelSpec, replicas: Replicas) -> dict[str, Any]:
    """Ready when one replica answers and serves the model; the others are skipped until they
    answer a request (their reasons go to the log). None answering: the first one's failure. The
    model's entry in the first answering replica's model list ({} when it does not list them)."""
    failures: list[RemoteError] = []
    listed: dict[str, Any] | None = None
    for url in replicas.urls:
        try:
            entry = _probe(client, spec, url)
        except RemoteError as exc:
            failures.append(exc)
            replicas.failed(url)
            continue
        listed = entry if listed is None else listed
    if listed is None:
        raise failures[0]
    for failure in failures:
        log.warning("%s: a replica is not answering, the others serve: %s", spec.name, failure)
    return listed


def _probe(client: httpx.Client, spec: ModelSpec, base_url: str) -> dict[str, Any]:
    """Check that the server answers and serves the model; its entry in the server's model list
    ({} when it does not list its models)."""
    url = f"{base_url}/models"
    try:
        response = client.get(url, timeout=httpx.Timeout(spec.connect_timeout_s * 2, connect=spec.connect_timeout_s))
    except httpx.HTTPError as exc:
        public = TIMED_OUT if isinstance(exc, httpx.TimeoutException) else UNREACHABLE
        raise RemoteError(f"cannot reach {url}: {exc or type(exc).__name__}", public=public) from None
    if response.status_code in (401, 403):
        hint = f"check {spec.api_key_env}" if spec.api_key_env else "set api_key_env in the models file"
        raise RemoteError(f"{url} refused our key (HTTP {response.status_code}); {hint}", public=KEY_REFUSED)
    if response.status_code >= 400:
        raise RemoteError(f"{url} answered HTTP {response.status_code}: {_error_text(response)}")
    try:
        listed = {m["id"]: m for m in response.json()["data"]}
    except (ValueError, KeyError, TypeError):
        log.warning("%s: %s did not list its models; assuming it serves %s", spec.name, url, spec.remote_model)
        return {}
    if spec.remote_model not in listed:
        served = ", ".join(map(str, listed)) or "nothing"
        raise RemoteError(f"{base_url} does not serve {spec.remote_model!r}; it serves: {served}", public=NOT_SERVED)
    entry = listed[spec.remote_model]
    return entry if isinstance(entry, dict) else {}

"""One streaming request to an OpenAI-compatible server, read in its own thread, with retries on
other replicas; what counts as an upstream failure and what a visitor may read about it.

One request = one reader thread (`Upstream`) that owns the upstream HTTP stream and hands parsed
chunks over a queue (errors travel the same queue, so the consumer never waits forever). Aborting
shuts the socket down, which wakes the reader and tells the upstream server that its client left
(a well-behaved server then stops generating). The reader releases the generation slot when done.

Replicas: `Replicas` chooses one per request. A request whose connection fails before anything
came back (refused, reset, HTTP 502/503) is tried once on each other replica; after the first chunk
a failure ends the stream, never a silent restart. A replica that fails is skipped for a while (the
log says which).

Failures (refused connection, timeout, HTTP error) become a `RemoteError` for that one stream; once
no replica is left answering, that is the entry's `Health` until a request succeeds again. Every
visitor sees a model's status, so a failure there is a generic reason (`UNREACHABLE`, ...); the
upstream's address and its own words go to the server log, once.

`Tally` counts what came back and makes the stream's final event.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from typing import Any

import httpx

from webui.engine.base import EngineFailure, Slots, decode_rate
from webui.engine.replicas import Replicas
from webui.handoff import Handoff, run_in_thread
from webui.models.specs import ModelSpec
from webui.types import Finished, FinishReason

log = logging.getLogger(__name__)

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


class Upstream:
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
                detail = error_text(response)
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


class Tally:
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


def error_text(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            return str(message)
    except (ValueError, AttributeError):
        pass
    return response.text[:300] or response.reason_phrase

"""The /v1 routes. Thin on purpose: validate the body, start the engine in a worker thread, answer
as JSON or Server-Sent Events. Errors go through `webui.api.errors`, the one place that maps them.

Limits (docs/api.md): each generation request counts against the client's message budget, the
same per-client rate limiter the UI's sends count against; a model whose line of waiting requests
is full refuses at once (`Slots`, 429); and a request waits for its model and its slot only while
its client is still connected.

Anonymity: battles are a UI affair and nothing here knows about them. The model list shows each
model's load state only, never how busy it is, so that watching /v1/models cannot tell which two
models are answering in someone's battle right now.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError

from webui.access.clients import client_info
from webui.access.ratelimit import MESSAGE, client_key
from webui.api.bridge import EventPump, Starter, stop_on_disconnect
from webui.api.errors import ApiError, from_arena, from_finished, from_validation, without_addresses
from webui.api.responses import Reply, sse_stream
from webui.api.schemas import ChatCompletionRequest, CompletionRequest, SamplingFields, check_json
from webui.engine.base import Backend
from webui.engine.registry import ModelState, Registry
from webui.engine.replicas import conversation_key
from webui.errors import ArenaError, ParamError, PromptTooLong
from webui.records.events import ClientInfo
from webui.types import Finished, FinishReason, Message, SamplingParams, StreamEvent, TextDelta

if TYPE_CHECKING:
    from webui.services import Services

log = logging.getLogger(__name__)
Body = TypeVar("Body", ChatCompletionRequest, CompletionRequest)


def build_router(services: Services) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(_auth(services.settings.api_keys))])
    registry = services.registry
    created = int(time.time())
    wait_s = services.settings.queue_timeout_s
    counted = [Depends(_rate_limit(services))]

    @router.get("/models")
    def list_models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [_model_card(registry, n, created) for n in registry.names()]})

    @router.get("/models/{model_id:path}")
    def get_model(model_id: str) -> JSONResponse:
        try:
            registry.spec(model_id)
        except ArenaError as exc:
            raise from_arena(exc) from None
        return JSONResponse(_model_card(registry, model_id, created))

    @router.post("/chat/completions", dependencies=counted)
    async def chat_completions(request: Request) -> Any:
        body = await _parse(request, ChatCompletionRequest)
        messages = body.to_messages()
        # The API knows no conversation ids: its opening, per client, names one for a router upstream.
        client = _client(request, services)
        route = services.routes.route(f"{client_key(client)}\0{conversation_key(messages) or ''}", client)

        def start(cancel: threading.Event) -> Iterator[StreamEvent]:
            backend = registry.get(body.model, wait_s=wait_s, cancel=cancel)
            return backend.stream(messages, _sampling(backend, body, messages), cancel, route=route)

        return await _answer(request, services, body, "chat", start)

    @router.post("/completions", dependencies=counted)
    async def completions(request: Request) -> Any:
        body = await _parse(request, CompletionRequest)
        prompt = body.prompt_text()
        route = services.routes.route("", _client(request, services))  # no conversation: the user alone

        def start(cancel: threading.Event) -> Iterator[StreamEvent]:
            backend = registry.get(body.model, wait_s=wait_s, cancel=cancel)
            return backend.complete(prompt, _sampling(backend, body, prompt), cancel, route=route)

        return await _answer(request, services, body, "text", start)

    return router


# ---- helpers ----------------------------------------------------------------------------------
def _auth(keys: Sequence[str]) -> Any:
    """A dependency that requires `Authorization: Bearer KEY` when keys are configured, and notes
    which key it was (`request.state.api_key`: a digest, never the key) for the rate limit."""
    wanted = [k.encode() for k in keys]
    names = [key_name(k) for k in keys]

    async def check(request: Request) -> None:
        request.state.api_key = None
        if not wanted:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        given = token.strip().encode()
        # compare against every key without stopping early, so timing says nothing about them
        matches = [secrets.compare_digest(given, k) for k in wanted]
        if scheme.lower() != "bearer" or not any(matches):
            raise ApiError(
                401,
                "a valid API key is required: send the header `Authorization: Bearer YOUR_KEY`",
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        request.state.api_key = names[matches.index(True)]

    return check


def key_name(key: str) -> str:
    """What the rate limiter counts an API key as: a digest, so that no key sits in its tables."""
    return "api-key:" + hashlib.sha256(key.encode()).hexdigest()[:16]


def _client(request: Request, services: Services) -> ClientInfo:
    """Who the request counts as: its API key (a digest) when keys are configured, else the client."""
    key = getattr(request.state, "api_key", None)
    return ClientInfo(user=key) if key else client_info(request, services.settings)


def _rate_limit(services: Services) -> Any:
    """A dependency that counts one message (after the key check, before the body is read) in the
    UI's limiter, so that a script gets the same budget through either door: per API key when keys
    are configured (several keys behind one address each have their own; one key on many
    addresses has one), else per client as the UI counts."""

    async def check(request: Request) -> None:
        client = _client(request, services)
        try:  # on a thread: with --database the count is a round trip, and an outage can take seconds
            await asyncio.to_thread(services.rate_limiter.check, MESSAGE, client)
        except ArenaError as exc:
            raise from_arena(exc) from None

    return check


async def _parse(request: Request, model: type[Body]) -> Body:
    try:
        data = await request.json()
    except ValueError:  # includes bytes that are not UTF-8
        raise ApiError(400, "the request body must be a JSON object") from None
    except RecursionError:
        raise ApiError(400, "the request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    try:
        check_json(data)
        body = model.model_validate(data)
        body.check()
    except ValidationError as exc:
        raise from_validation(exc) from None
    except ArenaError as exc:
        raise from_arena(exc) from None
    return body


def _model_card(registry: Registry, name: str, created: int) -> dict[str, Any]:
    spec, status = registry.spec(name), registry.status(name)
    state, reason, context = status.state.value, status.reason, spec.context_length
    if status.state is ModelState.READY:
        with contextlib.suppress(ArenaError):  # unloaded between the two calls
            context = registry.get(name).context_length
        if status.problem:
            state, reason = "unhealthy", status.problem
    return {
        "id": name,
        "object": "model",
        "created": created,
        "owned_by": "pairwise-arena",
        "status": state,
        "status_reason": without_addresses(reason) or None,
        "backend": spec.backend,
        "context_length": context,
        "description": spec.description or None,
    }


def _sampling(backend: Backend, body: SamplingFields, prompt: Sequence[Message] | str) -> SamplingParams:
    """The model entry's defaults, overridden by what the request gives; the entry's stop strings
    stay and the request's are added. Without max_tokens, the default shrinks to what the context
    has room for (as OpenAI does); with it, a prompt that does not fit is refused, never cut. A
    refusal names what the prompt must fit in (`backend.context_name`: the context, or a paged
    cache smaller than it)."""
    params = backend.default_params().replace(**body.overrides())
    params = params.replace(stop=(*params.stop, *body.stop_list()))
    context, within = backend.context_length, backend.context_name
    if context is not None and body.max_tokens is None:  # the entry's default is not the client's to fix
        params = params.replace(max_new_tokens=min(params.max_new_tokens, context))
    elif context is not None and body.max_tokens is not None and body.max_tokens > context:
        raise ParamError(
            "max_new_tokens",
            f"must be 1..{context}, got {body.max_tokens}: a prompt and its reply must fit in {within}",
        )
    params = params.validate(context)
    used = backend.prompt_tokens(prompt)
    if context is None or used is None:
        return params
    if body.max_tokens is None:
        if used >= context:
            raise PromptTooLong(used, context - 1, within)
        return params.replace(max_new_tokens=min(params.max_new_tokens, context - used))
    if used > context - params.max_new_tokens:
        raise PromptTooLong(used, context - params.max_new_tokens, within)
    return params


async def _answer(request: Request, services: Services, body: SamplingFields, kind: str, start: Starter) -> Any:
    try:
        services.registry.spec(body.model)
    except ArenaError as exc:
        raise from_arena(exc) from None
    pump = EventPump(start, name=f"api:{body.model}")
    services.generations.track(pump.cancel)  # a server stop ends the reply as a dropped client would
    # Nothing is sent while the request waits for its model and a slot: watch for a client that
    # leaves meanwhile, whose request must leave the line without ever running.
    watcher = asyncio.create_task(stop_on_disconnect(request.is_disconnected, pump))
    try:
        await pump.start()
    except ArenaError as exc:
        watcher.cancel()
        prompt_param = "messages" if kind == "chat" else "prompt"
        raise from_arena(exc, max_tokens=body.max_tokens, prompt_param=prompt_param) from None
    except BaseException:
        watcher.cancel()
        raise
    reply = Reply("chat" if kind == "chat" else "text", body.model)
    if body.stream:  # from here the streaming response notices a client that leaves
        watcher.cancel()
        return _PumpResponse(
            pump,
            sse_stream(reply, pump.events(), body.include_usage),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    try:
        text, final = await _collect(pump)
    finally:
        watcher.cancel()
        pump.stop()
    if final.reason is FinishReason.ERROR:
        raise from_finished(final)
    return JSONResponse(reply.whole(text, final))


async def _collect(pump: EventPump) -> tuple[str, Finished]:
    parts: list[str] = []
    final: Finished | None = None
    event: StreamEvent
    async for event in pump.events():
        if isinstance(event, TextDelta):
            parts.append(event.text)
        else:
            final = event
    if final is None:
        final = Finished(FinishReason.ERROR, error="the stream ended without finishing")
    return "".join(parts), final


class _PumpResponse(StreamingResponse):
    """Stops the generation whatever happens to the response, including a client gone before the
    first chunk (then the body generator never starts, and its own cleanup never runs)."""

    def __init__(self, pump: EventPump, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pump = pump

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.pump.stop()

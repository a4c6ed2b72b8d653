"""Every /v1 answer the API tests see, checked against the `openai` package's own types.

The openai client builds its objects without validating them (a missing `id` or a string where the
error object belongs goes through unnoticed), so a test that only uses the client proves little
about the shapes. `checked_http_client()` is an httpx client whose response hook validates each
answer with pydantic: whole answers as `ChatCompletion`, `Completion`, `Model`; each Server-Sent
Event as `ChatCompletionChunk` or `Completion`; every error (status >= 400, or an error event in
a stream) as `{"error": ErrorObject}` with exactly OpenAI's four keys. The API tests give it to
their openai clients (`http_client=`) and use it for raw requests.

The hook reads the whole body first, so it suits short streams only; the cancellation tests,
which must leave a stream open, use plain httpx.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import httpx
import pytest
from openai.types import Completion, CompletionChoice, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.shared import ErrorObject
from pydantic import BaseModel

ERROR_KEYS = {"message", "type", "param", "code"}


class _CompletionChunkChoice(CompletionChoice):
    # The package streams completions as `Completion` objects, whose finish_reason may not be null;
    # OpenAI's stream (and vLLM's) sends null until the last chunk. Only that is relaxed here, and
    # `_check_events` requires the last chunk to carry a finish_reason.
    finish_reason: Literal["stop", "length", "content_filter"] | None  # type: ignore[assignment]


class CompletionChunk(Completion):
    choices: list[_CompletionChunkChoice]  # type: ignore[assignment]


WHOLE: dict[str, type[BaseModel]] = {"/v1/chat/completions": ChatCompletion, "/v1/completions": Completion}
CHUNK: dict[str, type[BaseModel]] = {"/v1/chat/completions": ChatCompletionChunk, "/v1/completions": CompletionChunk}


class ShapeError(AssertionError):
    pass


def check_error(data: Any, where: str) -> None:
    if not isinstance(data, dict) or set(data) != {"error"}:
        raise ShapeError(f"{where}: an error must be {{'error': {{...}}}}, got {data!r}")
    error = data["error"]
    if not isinstance(error, dict) or set(error) != ERROR_KEYS:
        raise ShapeError(f"{where}: the error object needs exactly {sorted(ERROR_KEYS)}, got {error!r}")
    ErrorObject.model_validate(error)


def check_answer(path: str, status: int, content_type: str, body: bytes) -> int:
    """Validate one /v1 answer; returns how many objects were checked. Raises ShapeError or
    pydantic's ValidationError."""
    if not path.startswith("/v1/"):
        return 0
    if status >= 400:
        check_error(_json(body, path), f"{path} {status}")
        return 1
    if content_type.startswith("text/event-stream"):
        return _check_events(path, body)
    data = _json(body, path)
    if path == "/v1/models":
        if data.get("object") != "list" or not isinstance(data.get("data"), list):
            raise ShapeError(f"{path}: expected a list object, got {data!r}")
        for card in data["data"]:
            Model.model_validate(card)
        return 1 + len(data["data"])
    if path.startswith("/v1/models/"):
        Model.model_validate(data)
        return 1
    WHOLE[path].model_validate(data)
    return 1


def _check_events(path: str, body: bytes) -> int:
    events = [line[len("data: ") :] for line in body.decode().split("\n") if line.startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        raise ShapeError(f"{path}: a stream must end with data: [DONE], got {events[-1:]!r}")
    finishes = []
    for event in events[:-1]:
        data = _json(event.encode(), path)
        if "error" in data:
            check_error(data, f"{path} stream")
            finishes.append("error")
        else:
            chunk = CHUNK[path].model_validate(data)
            finishes += [choice.finish_reason for choice in chunk.choices]  # type: ignore[attr-defined]
    if not finishes or finishes[-1] is None or any(f is not None for f in finishes[:-1]):
        raise ShapeError(
            f"{path}: only the last chunk with choices may (and must) carry a finish_reason, got {finishes!r}"
        )
    return len(events) - 1


def _json(body: bytes, where: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        raise ShapeError(f"{where}: not JSON: {body[:200]!r}") from None


class Checked:
    """How many objects the hook has validated (so a test can see that it ran)."""

    count = 0


def _hook(response: httpx.Response) -> None:
    response.read()
    Checked.count += check_answer(
        response.request.url.path, response.status_code, response.headers.get("content-type", ""), response.content
    )


def checked_http_client(**kwargs: Any) -> httpx.Client:
    return httpx.Client(event_hooks={"response": [_hook]}, **kwargs)


# ---- the checker itself can fail ------------------------------------------------------------------
_CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "logprobs": None, "finish_reason": "stop"}
    ],
}
_ERROR = {"error": {"message": "m", "type": "invalid_request_error", "param": None, "code": None}}


def test_the_checker_accepts_openai_shapes() -> None:
    assert check_answer("/v1/chat/completions", 200, "application/json", json.dumps(_CHAT).encode()) == 1
    assert check_answer("/v1/chat/completions", 400, "application/json", json.dumps(_ERROR).encode()) == 1
    chunk = {
        **_CHAT,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}],
    }
    stream = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(_ERROR)}\n\ndata: [DONE]\n\n".encode()
    assert check_answer("/v1/chat/completions", 200, "text/event-stream", stream) == 2


@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        (413, "application/json", {"error": "Request too large: at most 2 MB."}),  # a string, not the object
        (500, "text/plain", "Internal Server Error"),
        (400, "application/json", {"error": {"message": "m", "type": "t"}}),  # keys missing
        (200, "application/json", {**_CHAT, "choices": [{**_CHAT["choices"][0], "finish_reason": "cancelled"}]}),
        (200, "application/json", {k: v for k, v in _CHAT.items() if k != "id"}),
    ],
)
def test_the_checker_refuses_what_openai_would_not_produce(status: int, content_type: str, body: object) -> None:
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    with pytest.raises(AssertionError if status != 200 else ValueError):
        check_answer("/v1/chat/completions", status, content_type, raw)


def test_the_checker_refuses_a_stream_without_done_or_with_a_bad_chunk() -> None:
    with pytest.raises(ShapeError):
        check_answer("/v1/completions", 200, "text/event-stream", b'data: {"id": "x"}\n\n')
    with pytest.raises(ValueError, match="validation error"):
        check_answer("/v1/completions", 200, "text/event-stream", b'data: {"id": "x"}\n\ndata: [DONE]\n\n')
    text = {
        "id": "c",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "text": "a", "logprobs": None, "finish_reason": None}],
    }
    unfinished = f"data: {json.dumps(text)}\n\ndata: [DONE]\n\n".encode()
    with pytest.raises(ShapeError):  # the stream never said why it ended
        check_answer("/v1/completions", 200, "text/event-stream", unfinished)

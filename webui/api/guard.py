"""ASGI middleware around the /v1 paths: every error a client gets there is OpenAI's error object.

Our routes answer with `ApiError` already. This catches the rest, which an OpenAI client would
otherwise fail to parse: Starlette's own 404 and 405 (`{"detail": ...}`), the size limit in front
of the whole app (413, `{"error": "Request too large..."}`), and an exception nobody caught, which
Starlette answers with a plain-text 500 and then re-raises, so that uvicorn drops the keep-alive
connection. Here such an exception is logged, answered with a fixed sentence (never its text), and
not re-raised.

`install_api` adds it last, which makes it the outermost of the app's middleware, so it sees the
answers of the size limit too.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from webui.api.errors import INTERNAL, ApiError

log = logging.getLogger(__name__)
ERROR_KEYS = {"message", "type", "param", "code"}
_CODES = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}


class OpenAIErrors:
    def __init__(self, app: Any, prefix: str = "/v1") -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == self.prefix or path.startswith(self.prefix + "/")):
            await self.app(scope, receive, send)
            return
        answer = _Answer(send)
        try:
            await self.app(scope, receive, answer.send)
        except Exception:  # the client gets a fixed sentence, the log gets the rest
            log.exception("%s %s failed", scope.get("method"), path)
            if not answer.started:
                await answer.replace(500, None)


class _Answer:
    """Passes a response on, except an error response, which it holds until its body is complete
    and then passes on as it is (ours) or reshaped into OpenAI's error object."""

    def __init__(self, send: Any) -> None:
        self._send = send
        self.started = False
        self._held: dict | None = None
        self._body = b""

    async def send(self, message: dict) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            self._held = message
            return
        if message["type"] == "http.response.body" and self._held is not None:
            self._body += message.get("body", b"")
            if message.get("more_body"):
                return
            held, self._held = self._held, None
            if _is_openai_error(self._body):
                await self._pass(held, self._body)
            else:  # a foreign 5xx body may hold exception text: never pass it on
                said = _message_of(self._body) if held["status"] < 500 else None
                await self.replace(held["status"], said, _headers_of(held))
            return
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)

    async def replace(self, status: int, message: str | None, headers: list | None = None) -> None:
        if message is None:
            message = INTERNAL if status >= 500 else _phrase(status)
        kind = "server_error" if status >= 500 else "invalid_request_error"
        body = json.dumps(ApiError(status, message, type=kind, code=_CODES.get(status)).body()).encode()
        kept = [(k, v) for k, v in headers or [] if k.lower() not in (b"content-type", b"content-length")]
        await self._pass(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [*kept, (b"content-type", b"application/json")],
            },
            body,
        )

    async def _pass(self, start: dict, body: bytes) -> None:
        self.started = True
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        await self._send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await self._send({"type": "http.response.body", "body": body})


def _is_openai_error(body: bytes) -> bool:
    try:
        data = json.loads(body)
    except ValueError:
        return False
    return isinstance(data, dict) and isinstance(data.get("error"), dict) and set(data["error"]) == ERROR_KEYS


def _message_of(body: bytes) -> str | None:
    """The sentence of a foreign error body (`{"error": "..."}`, `{"detail": "..."}`), if it has one."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if isinstance(data, dict):
        for key in ("error", "detail"):
            if isinstance(data.get(key), str):
                return data[key]
    return None


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "The request failed."


def _headers_of(start: dict) -> list:
    return list(start.get("headers", []))

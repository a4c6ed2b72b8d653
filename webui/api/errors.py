"""Every error the API can answer, mapped to an HTTP status and OpenAI's error body in one place:

    {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}

What a message may say: what the client did wrong and what to do. Never what broke inside: an
exception's text, a class name, a path or the address of a model's server go to the server log
(where the engine already wrote them), and the client gets a plain sentence.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from webui.access.ratelimit import RateLimited
from webui.errors import ArenaError, ModelNotFound, ModelNotReady, Overloaded, ParamError, PromptTooLong, clipped
from webui.types import Finished

# Our parameter names -> the names an API client sent.
_API_PARAM = {"max_new_tokens": "max_tokens"}
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
GENERATION_FAILED = "The model failed while generating this answer; please try again. The server log has the details."
UPSTREAM_FAILED = (
    "The server that runs this model did not answer properly (unreachable, timed out or an error); "
    "please try again later."
)
INTERNAL = "The server failed to answer this request; the server log has the details."
ENGINE_DOWN = "The model is not ready: its engine stopped and is restarting; try again shortly."


def without_addresses(text: str) -> str:
    """A status reason with every URL taken out: a remote model's reason names its server."""
    return _URL.sub("(its server)", text)


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def from_arena(exc: ArenaError, *, max_tokens: int | None = None, prompt_param: str = "messages") -> ApiError:
    """Engine and registry errors -> HTTP. `max_tokens` (when the client gave it) makes context
    errors exact; `prompt_param` names the field that holds the prompt."""
    if isinstance(exc, ParamError):
        param = clipped(_API_PARAM.get(exc.param, exc.param))  # a path in the body: the client's own keys
        detail = str(exc).split(": ", 1)[-1]
        return ApiError(400, f"{param}: {detail}", param=param, code="invalid_value")
    if isinstance(exc, PromptTooLong):
        asked = f" with max_tokens={max_tokens}" if max_tokens is not None else ""
        return ApiError(
            400,
            f"The prompt is {exc.prompt_tokens} tokens but only {exc.limit} fit in {exc.within}{asked}: "
            f"{exc.excess} tokens too many. Shorten the prompt or lower max_tokens.",
            param=prompt_param,
            code="context_length_exceeded",
        )
    if isinstance(exc, ModelNotFound):
        return ApiError(404, str(exc), param="model", code="model_not_found")
    if isinstance(exc, RateLimited):  # per client, shared with the UI (webui/access/ratelimit.py)
        return ApiError(
            429,
            str(exc),
            type="rate_limit_error",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(exc.retry_after_s)},
        )
    if isinstance(exc, Overloaded):
        return ApiError(
            429,
            str(exc),
            type="rate_limit_error",
            code="model_overloaded",
            headers={"Retry-After": str(exc.retry_after_s)},
        )
    if isinstance(exc, ModelNotReady):
        return ApiError(
            503,
            without_addresses(str(exc)),
            type="service_unavailable",
            code="model_not_ready",
            headers={"Retry-After": "5"},
        )
    return ApiError(500, INTERNAL, type="server_error")


def from_validation(exc: ValidationError) -> ApiError:
    """The first problem pydantic found, named by its path in the body (`messages.0.role`)."""
    first = exc.errors()[0]
    loc = [str(part) for part in first.get("loc", ()) if not str(part).startswith(("function-", "literal["))]
    # pydantic appends the union member it tried (`str`, `list[...]`); the field path is enough.
    loc = [p for p in loc if p not in ("str", "list[str]", "list[TextPart]", "TextPart")]
    param = clipped(".".join(loc)) or None  # the path may hold the client's own keys
    if first.get("type") == "extra_forbidden":
        message = f"{param}: unknown field; this server does not support it"
    else:
        message = f"{param}: {first.get('msg', 'invalid value')}" if param else first.get("msg", "invalid body")
    return ApiError(400, message, param=param, code="invalid_value")


def from_finished(final: Finished) -> ApiError:
    """A generation that ended in an error, for answers that have not started yet (non-streaming)
    and for a stream's error event. A remote model's own HTTP error keeps its status where it
    means the same here, with the server's own message (never its address); any other failure
    gets a fixed sentence (`final.error` holds exception text, for the log only)."""
    extra = final.extra or {}
    if extra.get("engine_down"):  # our own engine died under the request; the registry restarts it
        return ApiError(
            503, ENGINE_DOWN, type="service_unavailable", code="model_not_ready", headers={"Retry-After": "5"}
        )
    upstream = extra.get("upstream_status")
    said = extra.get("upstream_message")
    if upstream in (400, 422):
        message = (
            f"The model's server refused the request: {said}" if said else "The model's server refused the request."
        )
        return ApiError(400, without_addresses(message), code="upstream_rejected")
    if upstream == 429:
        return ApiError(
            429,
            "The model's server is busy; try again shortly.",
            type="rate_limit_error",
            code="upstream_overloaded",
            headers={"Retry-After": "5"},
        )
    if "upstream" in extra:
        return ApiError(502, UPSTREAM_FAILED, type="upstream_error", code="upstream_failed")
    return ApiError(500, GENERATION_FAILED, type="server_error", code="generation_failed")


async def handle_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return exc.response()

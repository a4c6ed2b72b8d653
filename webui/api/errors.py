"""Every error the API can answer, mapped to an HTTP status and OpenAI's error body in one place:

    {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from webui.errors import ArenaError, ModelNotFound, ModelNotReady, Overloaded, ParamError, PromptTooLong
from webui.types import Finished

# Our parameter names -> the names an API client sent.
_API_PARAM = {"max_new_tokens": "max_tokens"}


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: dict[str, str] | None = None) -> None:
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
        param = _API_PARAM.get(exc.param, exc.param)
        detail = str(exc).split(": ", 1)[-1]
        return ApiError(400, f"{param}: {detail}", param=param, code="invalid_value")
    if isinstance(exc, PromptTooLong):
        asked = f" with max_tokens={max_tokens}" if max_tokens is not None else ""
        return ApiError(
            400,
            f"The prompt is {exc.prompt_tokens} tokens but only {exc.limit} fit in this model's context{asked}: "
            f"{exc.excess} tokens too many. Shorten the prompt or lower max_tokens.",
            param=prompt_param, code="context_length_exceeded",
        )
    if isinstance(exc, ModelNotFound):
        return ApiError(404, str(exc), param="model", code="model_not_found")
    if isinstance(exc, Overloaded):
        return ApiError(429, str(exc), type="rate_limit_error", code="model_overloaded",
                        headers={"Retry-After": str(exc.retry_after_s)})
    if isinstance(exc, ModelNotReady):
        return ApiError(503, str(exc), type="service_unavailable", code="model_not_ready",
                        headers={"Retry-After": "5"})
    return ApiError(500, str(exc), type="server_error")


def from_validation(exc: ValidationError) -> ApiError:
    """The first problem pydantic found, named by its path in the body (`messages.0.role`)."""
    first = exc.errors()[0]
    loc = [str(part) for part in first.get("loc", ()) if not str(part).startswith(("function-", "literal["))]
    # pydantic appends the union member it tried (`str`, `list[...]`); the field path is enough.
    loc = [p for p in loc if p not in ("str", "list[str]", "list[TextPart]", "TextPart")]
    param = ".".join(loc) or None
    if first.get("type") == "extra_forbidden":
        message = f"{param}: unknown field; this server does not support it"
    else:
        message = f"{param}: {first.get('msg', 'invalid value')}" if param else first.get("msg", "invalid body")
    return ApiError(400, message, param=param, code="invalid_value")


def from_finished(final: Finished) -> ApiError:
    """A generation that ended in an error, for answers that have not started yet (non-streaming).
    A remote model's own HTTP error keeps its status where it means the same here."""
    upstream = final.extra.get("upstream_status") if final.extra else None
    message = final.error or "generation failed"
    if upstream in (400, 422):
        return ApiError(400, message, code="upstream_rejected")
    if upstream == 429:
        return ApiError(429, message, type="rate_limit_error", code="upstream_overloaded", headers={"Retry-After": "5"})
    if final.extra and "upstream" in final.extra:
        return ApiError(502, message, type="upstream_error", code="upstream_failed")
    return ApiError(500, message, type="server_error", code="generation_failed")


async def handle_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return exc.response()

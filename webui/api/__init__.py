"""OpenAI-compatible HTTP API (/v1) on the same server and port as the UI. See docs/api.md."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fastapi import FastAPI

from webui.api.errors import ApiError, handle_api_error
from webui.api.guard import OpenAIErrors
from webui.api.routes import build_router

if TYPE_CHECKING:
    from webui.services import Services

log = logging.getLogger(__name__)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def install_api(app: FastAPI, services: Services) -> None:
    """Add the /v1 routes and their error handler to `app`. Call it before mounting the UI at "/",
    which would otherwise answer every path, and after adding the app's other middleware (the size
    limit): the guard added here then wraps them and reshapes their errors on /v1 too."""
    app.add_exception_handler(ApiError, handle_api_error)
    app.add_middleware(OpenAIErrors, prefix="/v1")
    app.include_router(build_router(services))
    settings = services.settings
    if not settings.api_keys and settings.host not in _LOOPBACK:
        log.warning(
            "the HTTP API on %s:%d needs no key: set ARENA_API_KEYS=key1,key2 to require one",
            settings.host,
            settings.port,
        )


__all__ = ["install_api"]

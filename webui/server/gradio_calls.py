"""Gradio requests that Gradio itself answers with a 500 and a traceback in the log: refused here
with a 4xx and a short message, as the `/v1` API answers its own bad requests.

* a body nested deeper than Python's JSON parser recurses (RecursionError inside Gradio);
* `/gradio_api/call/NAME` or `/gradio_api/run/NAME` for a NAME the app has no event for;
* a queue join, or a `/run/` call, whose `fn_index` is not one of the app's events (missing,
  negative, too large).

Runs inside the request-size limit (webui.server.security), so the bodies it reads are capped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from webui.errors import clipped
from webui.server.security import read_body, send_json

# Routes that name the event in the path, unless the body gives its index (the page's un-queued
# events post to /run/predict with one).
_NAMED_CALLS = ("/gradio_api/call/v2/", "/gradio_api/call/", "/gradio_api/run/", "/gradio_api/api/")
TOO_DEEP = "The request body nests too deeply to be read."


def refusal(path: str, body: bytes, fns: Mapping[int, Any]) -> tuple[int, str] | None:
    """(status, message) for a request Gradio would fail on with a 500, else None. `fns` is the
    app's events by index (gr.Blocks.fns)."""
    data: Any = None
    if body.lstrip()[:1] in (b"{", b"["):
        try:
            data = json.loads(body)
        except RecursionError:
            return 400, TOO_DEEP
        except ValueError:
            return None  # Gradio answers 422 itself
    index = data.get("fn_index") if isinstance(data, dict) else None
    named = next((prefix for prefix in _NAMED_CALLS if path.startswith(prefix)), None)
    if named is not None and index is None:  # Gradio looks the event up by its name
        name = path[len(named) :].split("/", 1)[0]
        if name not in {fn.api_name for fn in fns.values()}:
            return 404, f"No API endpoint named {clipped(name)!r}."
    elif (named is not None or path == "/gradio_api/queue/join") and (  # by its index (the page's calls)
        isinstance(index, bool) or not isinstance(index, int) or index not in fns
    ):
        return 422, f"fn_index {clipped(repr(index))} is not one of this app's events."
    return None


class RefuseBadGradioCalls:
    """ASGI middleware for `refusal`: reads POST bodies under /gradio_api/ and hands them on."""

    def __init__(self, app: Callable[..., Any], fns: Callable[[], Mapping[int, Any]]) -> None:
        self.app = app
        self.fns = fns  # looked up per request: the UI is built after the middleware is added

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") != "POST" or not path.startswith("/gradio_api/"):
            await self.app(scope, receive, send)
            return
        body, receive = await read_body(receive)
        refused = refusal(path, body, self.fns())
        if refused is not None:
            status, message = refused
            await send_json(send, status, {"error": message})
            return
        await self.app(scope, receive, send)


def refuse_bad_gradio_calls(app: Any) -> None:
    """Add the middleware to the outer FastAPI app before the size limit is added (so it runs inside
    it); the events are those of `app.state.blocks` once the UI is built."""
    app.add_middleware(RefuseBadGradioCalls, fns=lambda: getattr(getattr(app.state, "blocks", None), "fns", {}))

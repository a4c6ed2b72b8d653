"""Safe server defaults for a public arena: what Gradio may serve, how much it may queue, and how
big a request may be.

Gradio's defaults suit a demo on a laptop. On a public address they leave a few doors open that
this module closes, each for a stated reason:

* files: `/gradio_api/file=PATH` serves any file under an "allowed" or "created" directory. The
  logs (every prompt and vote), the weights caches and the login file are blocked outright (a block
  beats every allow), and `file=http://...`, which makes the server fetch any public URL for the
  caller (an open proxy), is refused.
* errors: only messages raised on purpose (`gr.Error`) reach the browser; other exceptions show a
  generic "Error" and their details stay in the server log (`show_error=False`).
* monitoring: Gradio's /monitoring dashboard stays off. With `enable_monitoring=None` Gradio
  still serves /monitoring/summary (it checks `is False`), so False is passed explicitly.
* queue: a bounded queue sized to the models' generation slots, so that a flood is refused at once
  with Gradio's "This application is currently busy" instead of piling up for minutes; and
  `api_open=False`, so that nothing skips the queue through the REST routes.
* size: request bodies are capped (`Settings.max_request_mb`).
* uploads: `/gradio_api/upload` takes files from anyone and `/file=` serves them back; this app has
  no upload component, so the route (and its progress stream) is refused.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webui.config import Settings

if TYPE_CHECKING:
    import gradio as gr

    from webui.engine.registry import Registry

log = logging.getLogger(__name__)

MB = 1024 * 1024
FILE_ROUTES = ("/gradio_api/file=", "/file=", "/gradio_api/file/", "/file/")
UPLOAD_ROUTES = ("/gradio_api/upload", "/gradio_api/upload_progress")


# ---- sizing ----------------------------------------------------------------------------------
def generation_slots(registry: Registry, settings: Settings) -> int:
    """Simultaneous generations the models can run: the registry's own count (one limit per set
    of weights, shared by its variants), so that the queue and the engine agree."""
    return max(1, registry.generation_slots())


def queue_size(registry: Registry, settings: Settings) -> int:
    """How many UI events may wait; Settings.queue_size wins when set."""
    return settings.queue_size or max(8, settings.queue_per_slot * generation_slots(registry, settings))


def configure_queue(blocks: gr.Blocks, registry: Registry, settings: Settings) -> None:
    """A bounded queue. Events that name no concurrency limit of their own run as many at once as
    the models have slots; more would only wait inside the engine, where nobody sees a position."""
    blocks.queue(
        max_size=queue_size(registry, settings),
        default_concurrency_limit=generation_slots(registry, settings),
        api_open=False,
    )


# ---- what Gradio may serve ---------------------------------------------------------------------
def blocked_paths(settings: Settings, environ: dict[str, str] | None = None) -> list[str]:
    """Absolute paths Gradio must never serve, whatever else allows them."""
    environ = dict(os.environ) if environ is None else environ
    paths: list[Path] = [settings.log_dir, settings.cache_dir]
    if settings.auth_file:
        paths.append(Path(settings.auth_file))
    hf_home = environ.get("HF_HOME") or str(Path.home() / ".cache" / "huggingface")
    paths += [Path(hf_home), Path(environ.get("HF_HUB_CACHE") or Path(hf_home) / "hub")]
    if environ.get("TRANSFORMERS_CACHE"):
        paths.append(Path(environ["TRANSFORMERS_CACHE"]))
    xdg = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    paths.append(Path(xdg))  # where package-shipped weights are assembled (gemma3 ...) and dequantised
    if Path("/data").is_dir():
        paths.append(Path("/data"))  # Spaces' persistent storage: logs, caches
    unique = dict.fromkeys(str(p.expanduser().resolve()) for p in paths)
    return list(unique)


def mount_kwargs(settings: Settings) -> dict[str, Any]:
    """The safety-relevant arguments for `gr.mount_gradio_app`."""
    return {
        "allowed_paths": [],
        "blocked_paths": blocked_paths(settings),
        "show_error": False,
        "enable_monitoring": False,
        "max_file_size": int(settings.max_request_mb * MB),
        "mcp_server": False,
    }


# ---- middleware --------------------------------------------------------------------------------
ASGIApp = Callable[..., Any]


class RefuseRemoteFiles:
    """ASGI middleware: refuses `/gradio_api/file=<url>`. Gradio would fetch the URL server-side
    and stream it back (SSRF-checked, but still an open proxy through our address); this app never
    shows remote files, so the route has no legitimate use here. Also refuses uploads: Gradio
    accepts files up to the size limit from anyone and serves them back, and no component here
    takes a file."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path = scope.get("path", "").rstrip("/")
            if _is_remote_file_request(path):
                await send_json(send, 403, {"error": "File not allowed."})
                return
            if path in UPLOAD_ROUTES:
                await send_json(send, 403, {"error": "Uploads are off: this app has no upload component."})
                return
        await self.app(scope, receive, send)


def _is_remote_file_request(path: str) -> bool:
    for prefix in FILE_ROUTES:
        if path.startswith(prefix):
            target = path[len(prefix) :].lstrip().lower()
            return "://" in target or target.startswith(("http:", "https:", "//"))
    return False


class LimitRequestSize:
    """ASGI middleware: refuses bodies over `max_bytes` with 413. A declared Content-Length is
    checked before anything is read; a chunked body is counted as it arrives and cut off at the
    limit, so a client cannot stream gigabytes into a JSON parser."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send)
            return
        state = {"seen": 0, "started": False, "refused": False}

        async def counting_receive() -> dict:
            message = await receive()
            if message["type"] == "http.request":
                state["seen"] += len(message.get("body", b""))
                if state["seen"] > self.max_bytes:
                    if not state["started"]:
                        state["refused"] = True
                        await self._refuse(send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: dict) -> None:
            if state["refused"]:
                return  # the app's own answer to the cut-off body would be a second response
            state["started"] = True
            await send(message)

        await self.app(scope, counting_receive, guarded_send)

    async def _refuse(self, send: Any) -> None:
        mb = self.max_bytes / MB
        await send_json(send, 413, {"error": f"Request too large: at most {mb:.3g} MB."})


def _content_length(scope: dict) -> int | None:
    for key, value in scope.get("headers", []):
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def send_json(send: Any, status: int, body: dict) -> None:
    """Answer an ASGI request with a small JSON body (from middleware, before the app sees it)."""
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def harden(app: Any, settings: Settings) -> None:
    """Add the middleware to the outer FastAPI app (so it covers the UI and the API alike)."""
    app.add_middleware(RefuseRemoteFiles)
    app.add_middleware(LimitRequestSize, max_bytes=int(settings.max_request_mb * MB))


async def read_body(receive: Any) -> tuple[bytes, Any]:
    """The whole body, and a `receive` that hands it on (then the client's own messages)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> dict:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay

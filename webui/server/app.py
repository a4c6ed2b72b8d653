"""Putting it together: one FastAPI app serving the Gradio UI at / and the HTTP API beside it."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from webui.config import Settings
from webui.services import Services, build_services

log = logging.getLogger(__name__)


def create_app(services: Services) -> FastAPI:
    import gradio as gr

    from webui.access import auth, signin
    from webui.server import gradio_calls, reaper, security, sessions
    from webui.ui import build_ui, preview
    from webui.ui.leaderboard_tab import leaderboard_view

    app = FastAPI(title="Pairwise Arena", docs_url=None, redoc_url=None, openapi_url=None)
    gradio_calls.refuse_bad_gradio_calls(app)  # first: inside the size limit and the session check
    # before harden(), so that it runs inside the size limit (docs/deploy.md)
    book = sessions.bind_sessions(app, sessions.session_key(services.settings))
    security.harden(app, services.settings)  # size limit, no remote file fetches, no uploads (docs/deploy.md)
    app.add_middleware(preview.LinkPreview)  # the page's link-preview tags say "Gradio" as Gradio writes them
    if services.settings.hf_oauth:
        auth.install_oauth(app)
    signin.install_proxy_signin(app, services.settings)  # last, so outermost: refused before anything reads a body

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        statuses = services.registry.statuses()
        body = {
            "status": "ok",
            "server": services.settings.server_name,  # which server behind the proxy answered (docs/deploy.md)
            "models": {
                s.name: {"state": s.state.value, "reason": s.reason, "problem": s.problem, "engine": s.engine}
                for s in statuses
            },
        }
        return JSONResponse(body)

    from webui.api import install_api

    install_api(app, services)  # before the UI: a mount at "/" answers every path after it
    board = leaderboard_view(services)  # the tab's, smart pairing's, and the snapshot schedule's (deploy.py)
    blocks = build_ui(services, board=board)
    security.configure_queue(blocks, services.registry, services.settings)  # bounded, sized to the models
    app.state.blocks = blocks  # for the share link and gradio_calls
    app.state.board = board
    app.state.services = services  # for a stop, which ends every generation (webui/server/stopping.py)
    mounted = gr.mount_gradio_app(
        app, blocks, path="/", **security.mount_kwargs(services.settings), **auth.gradio_auth_kwargs(services.settings)
    )
    reaper.expire_idle_sessions(mounted, blocks, book, services.settings)
    return mounted


def serve(settings: Settings) -> None:
    services = build_services(settings)
    if settings.preload:
        services.registry.start()
    app = create_app(services)
    log.info("serving on http://%s:%d", settings.host, settings.port)
    server = build_server(app, settings)
    from webui.server.deploy import after_serving, before_serving

    before_serving(server, app, services)  # ZeroGPU, Hub log sync, snapshot schedule, --share
    # uvicorn shuts down gracefully on SIGTERM and then raises the signal again with the handler
    # that was there before it: ours turns it into SystemExit, so that the `finally` below runs
    # (the default handler would end the process on the spot and leave engine processes behind).
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm) if _main_thread() else None
    try:
        server.run()
    finally:
        after_serving(app)  # the snapshot schedule and its webhook stop before the engines
        engines = time.monotonic()
        # frees the weights and stops every engine process, within what is left of the grace (2 s at
        # least); one still loading or stopping then is ended by its supervisor (webui.engine.process)
        started = server.stop_started if server.stop_started is not None else engines
        services.registry.close(wait_s=max(2.0, started + settings.shutdown_grace_s - engines))
        if server.stop_started is not None:
            now = time.monotonic()
            log.info("stopped in %.1f s (the engines in %.1f s)", now - server.stop_started, now - engines)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def build_server(app: FastAPI, settings: Settings) -> Any:
    """The uvicorn server `serve` runs (a uvicorn.Server), its access log following --ip-logging."""
    import uvicorn

    from webui.server import accesslog
    from webui.server.stopping import StoppingServer, stop_streams

    # proxy_headers off: webui.access.clients reads X-Forwarded-For itself, only as far as trusted_proxies allows;
    # a stop waits at most shutdown_grace_s for open connections, then cuts them off (webui/server/stopping.py)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="info",
        proxy_headers=False,
        timeout_graceful_shutdown=settings.shutdown_grace_s,  # type: ignore[arg-type]  # uvicorn takes a float
    )
    accesslog.install(settings)  # after uvicorn's Config, which sets up its loggers
    return StoppingServer(config, stop_streams(app))


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()

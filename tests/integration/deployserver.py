"""A real server for the deploy tests: this app's `create_app`, uvicorn on a free loopback port in a
thread, readiness polled (never a fixed sleep)."""

from __future__ import annotations

from tests.servers import RunningServer as Running
from tests.servers import serve_app, wait_for
from webui.config import Settings
from webui.server.app import create_app
from webui.services import build_services

__all__ = ["Running", "start", "wait_for"]


def start(settings: Settings, *, load: bool = True) -> Running:
    services = build_services(settings)
    if load:
        services.registry.start()
        assert services.registry.wait_idle(120), "models did not finish loading"
    return serve_app(create_app(services), services)

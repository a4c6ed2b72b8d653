"""Real servers for the HTTP API tests: uvicorn on 127.0.0.1, a free port, in a thread.

Readiness is polled (uvicorn's `started` flag, then the models' load state); nothing sleeps a fixed
time. The same `create_app` as `python app.py` builds the app, UI included, unless `ui=False`
asks for the API alone (quicker, for throwaway upstream servers).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from webui.config import Settings
from webui.server import Services, build_services, create_app


@dataclass
class RunningServer:
    url: str  # http://127.0.0.1:PORT
    services: Services | None
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def v1(self) -> str:
        return f"{self.url}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        if self.services is not None:
            self.services.registry.close()


def serve_app(app: FastAPI, services: Services | None = None) -> RunningServer:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn:{port}", daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), 30, "uvicorn did not start")
    assert server.started, "uvicorn exited during start-up"
    return RunningServer(f"http://127.0.0.1:{port}", services, server, thread)


def start_arena(settings: Settings, *, ui: bool = True) -> RunningServer:
    """This app, serving `settings.models_file`, with every model loaded (or failed)."""
    services = build_services(settings)
    services.registry.start()
    assert services.registry.wait_idle(120), "models did not finish loading"
    if ui:
        app = create_app(services)
    else:
        from webui.api import install_api

        app = FastAPI()
        install_api(app, services)
    return serve_app(app, services)


def wait_for(condition: Callable[[], object], timeout_s: float, message: str, every_s: float = 0.02) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(message)
        time.sleep(every_s)


def alive_threads(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix) and t.is_alive()]


def threads_end_within(prefix: str, timeout_s: float) -> float:
    """Seconds until no thread named `prefix...` is alive; fails after `timeout_s`."""
    start = time.monotonic()
    wait_for(lambda: not alive_threads(prefix), timeout_s, f"{prefix} threads still running after {timeout_s} s")
    return time.monotonic() - start

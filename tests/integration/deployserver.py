"""A real server for the deploy tests: this app's `create_app`, uvicorn on a free loopback port in a
thread, readiness polled (never a fixed sleep)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn

from webui.config import Settings
from webui.server import Services, build_services, create_app


@dataclass
class Running:
    url: str
    app: Any
    services: Services
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.services.registry.close()


def wait_for(condition: Callable[[], object], timeout_s: float, message: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(message)
        time.sleep(0.02)


def start(settings: Settings, *, load: bool = True) -> Running:
    services = build_services(settings)
    if load:
        services.registry.start()
        assert services.registry.wait_idle(120), "models did not finish loading"
    app = create_app(services)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", proxy_headers=False,
                                           timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn:{port}", daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), 30, "uvicorn did not start")
    assert server.started, "uvicorn exited during start-up"
    return Running(f"http://127.0.0.1:{port}", app, services, server, thread)

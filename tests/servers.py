"""Real servers for tests: uvicorn on 127.0.0.1, a free port, in a thread.

Readiness is polled (uvicorn's `started` flag); nothing sleeps a fixed time. Every test server
(the API, UI and deploy tests) is started through `serve_app`.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

# the one free_port (the engines' own), re-exported for the tests' servers in other processes
from webui.engine.process import free_port as free_port
from webui.services import Services


@dataclass
class RunningServer:
    url: str  # http://127.0.0.1:PORT
    services: Services | None
    server: uvicorn.Server
    thread: threading.Thread
    app: Any = None

    @property
    def v1(self) -> str:
        return f"{self.url}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        if self.services is not None:
            self.services.registry.close()


def serve_app(app: Any, services: Services | None = None, *, name: str = "uvicorn") -> RunningServer:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # proxy_headers off, as in webui.server.app.serve: clients.py alone decides who the client is
    config = uvicorn.Config(app, log_level="warning", proxy_headers=False, timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"{name}:{port}", daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), 30, "uvicorn did not start")
    assert server.started, "uvicorn exited during start-up"
    return RunningServer(f"http://127.0.0.1:{port}", services, server, thread, app)


def wait_models_ready(name: str, process: Any, port: int, output: Path, timeout_s: float = 120.0) -> None:
    """Poll the app server `name` (a subprocess on 127.0.0.1:`port`) until /healthz says every
    model is ready; AssertionError with the tail of its `output` if it exits or time runs out."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, output.read_text()[-3000:]
        try:
            models = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()["models"]
            if models and all(m["state"] == "ready" for m in models.values()):
                return
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"{name} not ready: {output.read_text()[-3000:]}")


def wait_for(condition: Callable[[], object], timeout_s: float, message: str, every_s: float = 0.02) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(message)
        time.sleep(every_s)


def answers_ok(url: str) -> bool:
    """Whether `url` answers 200 now; a server still starting (refused, reset) is a plain no."""
    import httpx

    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def process_group(pgid: int) -> list[int]:
    """Live processes whose process group is `pgid` (an engine's supervisor leads one); zombies are gone."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def alive_threads(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix) and t.is_alive()]


def threads_end_within(prefix: str, timeout_s: float) -> None:
    """Wait until no thread named `prefix...` is alive; fails after `timeout_s` (a hang guard: how
    fast they end is for bench/, not for tests to assert)."""
    wait_for(lambda: not alive_threads(prefix), timeout_s, f"{prefix} threads still running after {timeout_s} s")

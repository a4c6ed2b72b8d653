"""The real server, as a user starts it: `python app.py` in a subprocess on a free loopback port.

Readiness is polled (GET / for the page, GET /healthz for every model's state), never slept for,
and every poll's timing is kept: the cold-start section is nothing but these timings.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.report import ROOT
from webui.engine.process import free_port

POLL_S = 0.1
TERMINAL = ("ready", "failed")


def http_get(url: str, timeout_s: float = 5.0) -> tuple[int, bytes] | None:
    """(status, body), or None when nothing answers yet."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # loopback only
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return None


@dataclass
class Launch:
    """Seconds from the process start to each milestone (None: not reached)."""

    page_s: float | None = None  # first 200 on /
    healthz_s: float | None = None  # first 200 on /healthz
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {state, s, reason}

    def all_settled(self) -> bool:
        return bool(self.models) and all(m["state"] in TERMINAL for m in self.models.values())


class ArenaProcess:
    def __init__(
        self, models_file: Path, workdir: Path, *, cache_dir: Path | None = None, extra_args: Sequence[str] = ()
    ) -> None:
        self.models_file = models_file
        self.workdir = workdir
        self.cache_dir = cache_dir
        self.extra_args = list(extra_args)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.log_path = workdir / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            str(ROOT / "app.py"),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--models",
            str(self.models_file),
            "--log-dir",
            str(self.workdir / "logs"),
            # The bench sends many messages from one address on purpose; the per-client limit
            # would refuse them. Everything else is the app as shipped.
            "--rate-messages",
            "0",
        ]
        if self.cache_dir is not None:
            cmd += ["--cache-dir", str(self.cache_dir)]
        return cmd + self.extra_args

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1"}
        log = self.log_path.open("wb")
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen(
            self.command(), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def wait(self, timeout_s: float) -> Launch:
        """Poll until the page is served and every model is ready or failed; the timings are the result."""
        launch = Launch()
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            self._check_alive()
            now = time.perf_counter() - self.started_at
            if launch.page_s is None and _ok(http_get(self.url + "/", 5.0)):
                launch.page_s = time.perf_counter() - self.started_at
            health = http_get(self.url + "/healthz", 5.0)
            if health is not None and health[0] == 200:
                launch.healthz_s = launch.healthz_s or now
                _update_models(launch, json.loads(health[1]).get("models", {}), now)
            if launch.page_s is not None and launch.all_settled():
                return launch
            time.sleep(POLL_S)
        raise TimeoutError(f"the server was not ready within {timeout_s:.0f} s; see {self.log_path}\n{self.log_tail()}")

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(
                f"the server exited with status {self.proc.returncode} during start-up:\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM (uvicorn shuts down cleanly), then SIGKILL if it lingers; only our own process group."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def __enter__(self) -> ArenaProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _ok(answer: tuple[int, bytes] | None) -> bool:
    return answer is not None and answer[0] == 200


def _update_models(launch: Launch, models: dict[str, Any], now: float) -> None:
    for name, info in models.items():
        state = info.get("state", "?")
        seen = launch.models.get(name)
        if seen is None or (seen["state"] not in TERMINAL and state != seen["state"]):
            launch.models[name] = {
                "state": state,
                "s": now if state in TERMINAL else None,
                "reason": info.get("reason") or None,
            }

"""An engine's server (vLLM's or llama.cpp's) as a child process of the app: started, watched, stopped.

Why a separate process: an engine with its own dependencies (vLLM pins its torch and transformers)
or its own binary (llama.cpp) must not decide ours; a process is also the only thing that can be
stopped for sure, with all the memory it holds. The server listens on 127.0.0.1 on a free port and
serves one model; the app talks to it over HTTP (webui.engine.vllm, webui.engine.llamacpp). What to
run is the engine's `LaunchConfig`; everything else here is the same for every engine.

No orphans: the server runs under webui.engine.supervisor, the leader of a process group of its
own, which `stop()` signals as a whole (SIGTERM, then SIGKILL after a grace period); the supervisor
ends the whole group when the app dies in any way (PR_SET_PDEATHSIG); and an `atexit` hook stops
whatever is still running when the interpreter exits.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import httpx

from webui.engine.base import EngineFailure
from webui.engine.supervisor import EXITED

log = logging.getLogger(__name__)
_LIVE: weakref.WeakSet[EngineServer] = weakref.WeakSet()
TAIL_LINES = 200  # log lines kept in memory for failure reasons
STOP_GRACE_S = 15.0
SUPERVISOR = Path(__file__).with_name("supervisor.py")


class EngineStartError(EngineFailure):
    """The engine did not become ready; the message holds its own last words (the end of its log),
    for the server log: visitors read only that the engine failed to start."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "engine failed to start")


class LaunchConfig(Protocol):
    """What an engine's server needs to start: its command (run under the supervisor) and environment."""

    @property
    def label(self) -> str: ...  # the engine's name in messages: "vLLM", "llama.cpp"

    @property
    def served_name(self) -> str: ...

    @property
    def log_file(self) -> Path: ...

    @property
    def cache_root(self) -> Path: ...

    @property
    def supervisor_python(self) -> str: ...

    def server_command(self, port: int) -> list[str]: ...

    def environment(self) -> dict[str, str]: ...


def supervised(config: LaunchConfig, port: int) -> list[str]:
    """The server's command under the supervisor (which runs in the given interpreter)."""
    return [config.supervisor_python, str(SUPERVISOR), *config.server_command(port)]


class EngineServer:
    """One running engine server: `launch()` returns at once, `wait_ready()` blocks until it answers or
    raises EngineStartError, `start()` does both."""

    def __init__(self, config: LaunchConfig) -> None:
        self.config = config
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._reader: threading.Thread | None = None
        self._stopping = threading.Event()
        self._exited = threading.Event()  # the supervisor said the server exited, or its output ended
        self._exit_code: int | None = None
        self._on_exit: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._launched = 0.0  # time.monotonic() of the launch

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- start ------------------------------------------------------------------------------
    def start(self, timeout_s: float, cancelled: threading.Event | None = None) -> None:
        self.launch()
        self.wait_ready(timeout_s, cancelled)

    def launch(self) -> None:
        """Start the process and return at once (the caller can do its own preparation meanwhile)."""
        self.port = free_port()
        self.config.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.config.cache_root.mkdir(parents=True, exist_ok=True)
        log.info(
            "starting %s for %s on port %d (log: %s)",
            self.config.label,
            self.config.served_name,
            self.port,
            self.config.log_file,
        )
        self._launched = time.monotonic()
        with self._lock:
            self.process = subprocess.Popen(
                supervised(self.config, self.port),
                env=self.config.environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            _LIVE.add(self)
        self._reader = threading.Thread(
            target=self._read_log, name=f"engine-log:{self.config.served_name}", daemon=True
        )
        self._reader.start()

    def wait_ready(self, timeout_s: float, cancelled: threading.Event | None = None) -> None:
        """Block until the server answers; EngineStartError (the server stopped) when it does not."""
        try:
            self._wait_ready(timeout_s, cancelled)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout_s: float, cancelled: threading.Event | None) -> None:
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                code = self.process.poll() if self.process else None
                if code is not None:
                    raise EngineStartError(
                        f"{self.config.label} exited during start-up (code {code}): {self.last_words()}"
                    )
                if cancelled is not None and cancelled.is_set():
                    raise EngineStartError("start-up was cancelled")
                if time.monotonic() > deadline:
                    raise EngineStartError(
                        f"{self.config.label} was not ready after {timeout_s:.0f} s: {self.last_words()}"
                    )
                if _answers(client, f"{self.base_url}/health"):
                    # what the engine itself took: the rest of a model's load time is ours
                    waited = time.monotonic() - self._launched
                    log.info("%s for %s answers after %.1f s", self.config.label, self.config.served_name, waited)
                    return
                time.sleep(0.05)  # llama.cpp is up in about a second: a coarser poll would add to every start

    def _read_log(self) -> None:
        """Copy the server's output to its log file, keeping the last lines for failure reasons.
        The supervisor's word that the server exited, or the end of the output, is the engine's
        death: noticed here at once (the registry would otherwise learn of it at its next look)."""
        assert self.process is not None and self.process.stdout is not None
        try:
            with open(self.config.log_file, "ab") as out:
                for raw in self.process.stdout:
                    out.write(raw)
                    out.flush()
                    line = raw.decode("utf-8", "replace").rstrip()
                    if line.startswith(EXITED):
                        self._died(int(line[len(EXITED) :].strip() or 0))
                    else:
                        self._tail.append(line)
        finally:
            self._died(None)

    def on_exit(self, listener: Callable[[], None]) -> None:
        """Call `listener` (from the log reader's thread) as soon as the engine dies on its own; at
        once if it already has. Not after a deliberate stop."""
        with self._lock:
            self._on_exit.append(listener)
            dead = self._exited.is_set()
        if dead and not self._stopping.is_set():
            listener()

    def _died(self, code: int | None) -> None:
        with self._lock:
            if self._exited.is_set():
                return
            self._exit_code = code
            self._exited.set()
            listeners = list(self._on_exit)
        if self._stopping.is_set():
            return
        for listener in listeners:
            try:
                listener()
            except Exception:  # a broken listener must not stop the log copy
                log.exception("an exit listener of %s failed", self.config.served_name)

    # ---- health and failure ------------------------------------------------------------------
    def failure(self) -> str | None:
        """None while the server runs (or after a deliberate stop); why it died otherwise."""
        if self.process is None or self._stopping.is_set():
            return None
        code = self.process.poll()
        if code is None and not self._exited.is_set():
            return None
        if code is None or self._exit_code is not None:  # the server's own code, while its group ends
            code = self._exit_code
        return f"the {self.config.label} engine exited (code {code}): {self.last_words()}"

    def last_words(self, lines: int = 3) -> str:
        """The last meaningful lines of the log: the engine's own account of what went wrong, not a traceback."""
        return summarize_log(list(self._tail), lines)

    # ---- stop ---------------------------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def stop(self) -> None:
        """Stop the server and every process it started (idempotent)."""
        self._stopping.set()
        with self._lock:
            process = self.process
        if process is None:
            return
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)  # the supervisor ends the group: SIGTERM, grace, SIGKILL
            try:
                process.wait(STOP_GRACE_S + 10)
            except subprocess.TimeoutExpired:
                log.warning("%s for %s did not stop in time; killing it", self.config.label, self.config.served_name)
        _signal_group(process.pid, signal.SIGKILL)  # whatever is left in its group, if the supervisor itself died
        process.wait(5)
        if self._reader is not None:
            self._reader.join(5)
        _LIVE.discard(self)


def summarize_log(lines: Sequence[str], count: int = 3) -> str:
    """The most telling lines of a vLLM log: error lines first (without traceback frames), else the
    last lines; each without vLLM's prefix of process, level and time."""
    cleaned = [_strip_prefix(line) for line in lines if line.strip()]
    frames = ("File ", "Traceback", "^", "~", "raise ", "return ", "self.", "During handling")
    errors = [line.strip() for line in cleaned if _EXCEPTION.match(line.strip())]
    # the root cause first (vLLM wraps it in "... initialization failed. See root cause above.")
    causes = [line for line in errors if not _WRAPPER.search(line)]
    chosen = (causes[: count - 1] + errors[-1:]) if causes else errors[-count:]
    if not errors:
        chosen = [line for line in cleaned if not line.lstrip().startswith(frames)][-count:]
    text = " | ".join(dict.fromkeys(chosen)) or "(no output)"
    return text if len(text) <= 600 else "..." + text[-597:]


_WRAPPER = re.compile(r"initialization failed|See root cause|See stack trace|see above", re.IGNORECASE)
_EXCEPTION = re.compile(r"^([A-Za-z_.]*(Error|Exception)|ERROR)\b:?")


def _strip_prefix(line: str) -> str:
    """'(EngineCore pid=12) ERROR 11-23 17:34:39 [core.py:12] message' -> 'message'."""
    text = line.strip()
    if text.startswith("[vllm ") and "] " in text:
        text = text.split("] ", 1)[1]
    if text.startswith("(") and ") " in text:
        text = text.split(") ", 1)[1]
    for level in ("DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL "):
        if text.startswith(level) and "] " in text:
            return text.split("] ", 1)[1]
    return text


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now, for a server started in another process (an
    engine here; a test's, the bench's or deploy/local_tier.py's). Another process could take it before
    that server binds: the server then fails with its own message."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(client: httpx.Client, url: str) -> bool:
    try:
        return client.get(url).status_code == 200
    except httpx.HTTPError:
        return False


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


@atexit.register
def _stop_all() -> None:
    # One whose stop is under way (in a thread the exit is cutting short) is left to its supervisor,
    # which already ends its group: waiting for it again would hold the exit up for the grace period.
    for server in list(_LIVE):
        if not server.stopping:
            server.stop()

"""Run a command line with its standard error on a pseudo-terminal, as a person at a terminal
sees it, or on a pipe, as a script does; what it wrote there."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def environment() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


def on_terminal(args: list[str], timeout_s: float = 120.0) -> tuple[int, str]:
    """`python -m ARGS` with stderr on a pseudo-terminal (stdout to /dev/null): exit code, and the
    terminal's text (its line ends are the terminal's \\r\\n)."""
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=terminal,
    )
    os.close(terminal)  # the child holds the only other end: reading ends (EIO) when it exits
    seen = bytearray()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.5)
            if not ready:
                continue
            try:
                data = os.read(controller, 65536)
            except OSError:  # EIO: every writer is gone
                break
            if not data:
                break
            seen += data
        else:
            process.kill()
        code = process.wait(30)
    finally:
        os.close(controller)
    return code, seen.decode("utf-8", "replace")


def on_pipe(args: list[str], timeout_s: float = 120.0) -> tuple[int, str]:
    """The same with stderr on a pipe."""
    done = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=timeout_s,
        check=False,
    )
    return done.returncode, done.stderr.decode("utf-8", "replace")


def bars(text: str) -> list[str]:
    """The redrawn lines of a terminal's text: what follows each carriage return that ends no line."""
    return [part for part in text.replace("\r\n", "\n").split("\r") if part][1:]

"""Runs an engine's server (vLLM's or llama.cpp's) as its child; no part of it outlives the app.

`python supervisor.py COMMAND ARGS...`: the app (webui.engine.process) starts this file as the leader
of a new process group; the server and whatever it starts (vLLM's engine core and workers) join that
group. Killing the server alone would orphan its engine processes (they hold gigabytes and keep
running), so this small process stands between: when the app stops the model, or dies in any way
(the kernel tells us with a signal, PR_SET_PDEATHSIG), or when the server exits on its own, it ends
the whole group: SIGTERM, a grace period for vLLM to free its shared memory, then SIGKILL for
whatever is left.

Standard library only: it runs in vLLM's environment as well as the app's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 15.0
SHM = "/dev/shm"
# Printed the moment the server exits on its own, before the group's grace period: the app reads
# our output and fails the model at once instead of when the last process of the group is gone.
EXITED = "[arena-supervisor] the server exited with code"


def main(argv: list[str]) -> int:
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: told when the app dies
        if os.getppid() != parent:
            return 1  # the app died before we could ask
    stop: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: stop.append(number))
    shared_before = _shared_memory()
    server = subprocess.Popen(argv)
    while server.poll() is None and not stop:
        time.sleep(0.2)
    if not stop:
        code = server.returncode
        print(f"{EXITED} {code if code >= 0 else 128 - code}", flush=True)  # as the shell (and we) would exit
    end_group()
    code = server.wait()
    _free_shared_memory(_shared_memory() - shared_before)
    return 0 if stop else (code if code >= 0 else 128 - code)


def end_group() -> None:
    """SIGTERM to everyone in our group, a grace period, then SIGKILL to the rest (not to us)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    group = os.getpgid(0)
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and _others(group):
        time.sleep(0.2)
    for pid in _others(group):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _shared_memory() -> set[str]:
    try:
        return {name for name in os.listdir(SHM) if name.startswith(("psm_", "sem.mp-"))}
    except OSError:
        return set()


def _free_shared_memory(names: set[str]) -> None:
    """vLLM's processes keep a few hundred MB of shared memory (RAM) in /dev/shm and leave it
    behind when they are killed rather than stopped: remove what appeared while we ran, unless a
    live process (another model's engine) still has it mapped or open."""
    in_use = _mapped_shared_memory()
    for name in names - in_use:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(SHM, name))


def _mapped_shared_memory() -> set[str]:
    found: set[str] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            maps = (entry / "maps").read_text()
            fds = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        for text in (maps, "\n".join(fds)):
            found.update(part.rsplit("/", 1)[1].split()[0] for part in text.split() if part.startswith(SHM + "/"))
    return found


def _others(group: int) -> list[int]:
    """Live processes of the group other than this one (zombies count as gone)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            found.append(int(entry.name))
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The server's process ends cleanly after a stop even while daemon threads are inside torch: at a
normal interpreter teardown such a thread aborts the process (status -6, "terminate called without
an active exception"), which a fresh-clone run met after a clean Ctrl-C."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import atexit, threading, time
    import torch
    from webui.__main__ import leave_after_stop

    matrix = torch.randn(600, 600)

    def spin():  # a daemon thread that is inside torch's C++ whenever the process ends
        while True:
            torch.mm(matrix, matrix)

    def last_words():  # a thread the process must wait for, as a normal exit does
        time.sleep(0.3)
        print("non-daemon thread finished")

    for _ in range(2):
        threading.Thread(target=spin, daemon=True).start()
    threading.Thread(target=last_words).start()
    atexit.register(lambda: print("atexit function ran"))
    print("stopped")  # stdout is a pipe here: block-buffered until flushed
    time.sleep(0.2)
    leave_after_stop(3)
    """
)


def test_the_process_ends_with_its_status_waiting_for_threads_and_flushing() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert "terminate called" not in done.stderr
    assert done.stdout.splitlines() == ["stopped", "non-daemon thread finished", "atexit function ran"]

"""The ways to start the server serve the same app and stop cleanly on SIGTERM and Ctrl-C:
`pairwise-arena` (the console script), `python -m webui` and `make run` (`python app.py`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "pairwise-arena"
VENV = Path(sys.executable).parent.parent
# `make run` as a newcomer types it, on this virtualenv, without installing again (-o)
MAKE_RUN = ["make", "--no-print-directory", "-C", str(ROOT), "-o", f"{VENV}/.installed", f"VENV={VENV}", "run"]


@pytest.mark.parametrize(
    ("command", "stop"),
    [
        ([str(SCRIPT)], signal.SIGTERM),
        ([sys.executable, "-m", "webui"], signal.SIGINT),
        (MAKE_RUN, signal.SIGINT),
    ],
    ids=["console-script-sigterm", "python-m-webui-ctrl-c", "make-run-app.py-ctrl-c"],
)
def test_each_entry_point_serves_and_stops_cleanly(
    command: list[str], stop: signal.Signals, tiny_models_file: Path, tmp_path: Path
) -> None:
    """The signal goes to the whole process group, as a terminal's Ctrl-C does: under `make run`
    make gets it too, and reports the server's status; Ctrl-C is a clean stop, never "Error 130"."""
    assert Path(command[0]).exists() or command[0] == "make", f"{command[0]} is not installed (pip install -e .)"
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's webui, wherever the virtualenv's editable install points
    log = tmp_path / "server.log"
    options = [
        "--port",
        str(port),
        "--models",
        str(tiny_models_file),
        "--log-dir",
        str(tmp_path / "logs"),
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    under_make = command is MAKE_RUN
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*command, "ARGS=" + " ".join(options)] if under_make else [*command, *options],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                assert proc.poll() is None, f"the server exited:\n{log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"no ready model:\n{log.read_text()[-3000:]}"
                try:
                    health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()
                except httpx.HTTPError:
                    health = {}
                if health.get("models", {}).get("tiny-a", {}).get("state") == "ready":
                    break
                time.sleep(0.2)
            os.killpg(proc.pid, stop)
            # make itself dies of the Ctrl-C it got, after reporting its child (the server)
            assert proc.wait(30) == (-signal.SIGINT if under_make else 0), log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]
    assert "make: ***" not in text, text[-3000:]  # "make: *** [Makefile:10: run] Error 130"
    assert f"http://127.0.0.1:{port}" in text
    assert "Application shutdown complete" in text


@pytest.mark.parametrize("ends", ["killed by the signal", "exit 130", "exit 3"])
def test_make_run_is_quiet_however_the_server_ends_on_ctrl_c(ends: str, tmp_path: Path) -> None:
    """A Ctrl-C that reaches the server before it handles signals (while it imports) kills it with
    SIGINT; one that it handles may end it with 130: either way `make run` says nothing ("make:
    *** ... Interrupt" or "Error 130" before), while any other failure is still reported."""
    started = tmp_path / "started"
    server = tmp_path / "server.py"  # stands in for `python app.py`: one that Ctrl-C ends as `ends` says
    handling = {"killed by the signal": "pass", "exit 130": "sys.exit(130)", "exit 3": "sys.exit(3)"}[ends]
    server.write_text(
        "import pathlib, sys, time\n"
        f"pathlib.Path({str(started)!r}).touch()\n"
        "try:\n    time.sleep(60)\n"
        f"except KeyboardInterrupt:\n    {handling}\n"
        "    raise\n"
    )
    command = [*MAKE_RUN, f"PY={sys.executable} {server}"]
    # as a person's shell runs it, not as a make inside `make test` (which says "make[1]: ...")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + 30
        while not started.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the stand-in server did not start"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        output = proc.communicate(timeout=30)[0].decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    if ends == "exit 3":
        assert "make: *** [Makefile" in output and "Error 3" in output, output
    else:
        assert "***" not in output, output


@pytest.mark.parametrize(
    ("models_yaml", "says"),
    [
        ("models: [", "models.yaml"),  # not YAML at all
        ("models:\n  - name: x\n    source: /nowhere\n    temperature: hot\n", "temperature"),  # an unknown key
        ("models:\n  - source: /nowhere\n", "name"),  # a required key missing
    ],
    ids=["not-yaml", "unknown-key", "no-name"],
)
def test_a_broken_models_file_is_a_one_line_error_and_exit_status_2(
    models_yaml: str, says: str, tmp_path: Path
) -> None:
    """Through the real entry point: the operator sees what is wrong, no traceback, and a status a
    script or a service manager can tell from a crash."""
    models = tmp_path / "models.yaml"
    models.write_text(models_yaml)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "webui",
            "--port",
            str(free_port()),
            "--models",
            str(models),
            "--log-dir",
            str(tmp_path / "logs"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and says in errors[0], done.stderr[-3000:]
    assert "Traceback" not in done.stderr


def test_a_malformed_categories_file_stops_the_start_with_its_line_and_reason(tmp_path: Path) -> None:
    """--categories-file is read before anything is served or loaded: the operator sees the file, the
    line and what is wrong on it, and the server does not start."""
    categories = tmp_path / "categories.yaml"
    categories.write_text("categories:\n  - name: maths\n    regex: '(unclosed'\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "webui",
            "--port",
            str(free_port()),
            "--log-dir",
            str(tmp_path / "logs"),
            "--categories-file",
            str(categories),
            "--no-preload",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        f"error: categories file {categories}, line 3: `regex:` does not compile: "
        "missing ), unterminated subpattern at position 0"
    ], done.stderr[-3000:]
    assert "Traceback" not in done.stderr

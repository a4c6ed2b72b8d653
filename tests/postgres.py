"""A real PostgreSQL server for the tests of the shared vote store, started in a temporary folder.

`postgres_server` (session-scoped) runs Debian's `initdb` and `pg_ctl` from /usr/lib/postgresql
(scripts/install-postgres.sh puts them there; `make test` runs it) on a free port, and yields a
`PostgresServer` whose `url` the store connects to; tests that restart the database use `stop`
and `start`. Missing binaries FAIL the tests rather than skip them: the install script provides
them, so their absence is a broken setup, not an optional feature. initdb refuses to run as root,
so as root the server runs as the `postgres` user that Debian's package creates.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import free_port

USER = "arena"  # the database's superuser (trust authentication: a throwaway server on 127.0.0.1)


def server_binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    if not found:
        raise FileNotFoundError(
            "PostgreSQL's server binaries are missing (no /usr/lib/postgresql/*/bin/initdb): "
            "run scripts/install-postgres.sh (make test does)"
        )
    return Path(found[-1]).parent


@dataclass
class PostgresServer:
    bin: Path
    folder: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def new_database(self) -> str:
        """The URL of a fresh, empty database on this server (one per test keeps tests apart)."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{name}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.folder / "data"), "-o", options, "-l", str(self.folder / "log"), "-w", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        """`mode` is pg_ctl's: "fast" rolls back and closes cleanly, "immediate" ends every process
        at once, as a crash would (the next start recovers from the write-ahead log)."""
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", mode, "-w", "stop")

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            log = (self.folder / "log").read_text(errors="replace")[-2000:] if (self.folder / "log").exists() else ""
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip()}\n{log}")


def start_server() -> PostgresServer:
    """A new server in a temporary folder, started (bench/tier/vote_store.py uses it too)."""
    folder = Path(tempfile.mkdtemp(prefix="arena-pg-"))
    binaries = server_binaries()
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise FileNotFoundError(
                "running as root, the test server needs the 'postgres' user that Debian's "
                "postgresql package creates: run scripts/install-postgres.sh"
            ) from None
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    server = PostgresServer(binaries, folder, free_port())
    server._run("initdb", "-D", str(folder / "data"), "-A", "trust", "-U", USER, "--no-sync")
    server.start()
    return server


def remove_server(server: PostgresServer) -> None:
    try:
        server.stop()
    finally:
        shutil.rmtree(server.folder, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store that several servers share lives, once per kind: a SQLite file, then a fresh
    database on the test PostgreSQL server (started only for that variant). A test module that
    uses it imports `postgres_server` too."""
    if request.param == "sqlite":
        return str(tmp_path / "shared.sqlite3")
    return str(request.getfixturevalue("postgres_server").new_database())


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        server = start_server()
    except FileNotFoundError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        remove_server(server)

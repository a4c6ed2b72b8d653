"""Two arena servers behind a real nginx (deploy/nginx.conf.template), sharing one real PostgreSQL
(tests/postgres.py) and one secret: visitors who land on different servers vote into one board,
a client's rate limit holds across the servers, votes cast on both while PostgreSQL is stopped hard
reach the board once when it is back, and a server killed with SIGKILL mid-battle leaves
the other's visitors unaffected, loses no acknowledged vote, and its visitors carry on on the other
server with the cookie the dead one issued. Servers start once per module."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from tests.postgres import PostgresServer, postgres_server  # noqa: F401  (the fixture)
from tests.proxy import Proxy, start_proxy
from tests.servers import free_port, wait_for, wait_models_ready
from tests.tiny import THREE, tiny_models
from webui.leaderboard.stats.categories import ALL
from webui.leaderboard.votes.index import VoteIndex
from webui.records.storage import log_files

NAMES = ("web1", "web2")
MESSAGES_PER_MINUTE = 8  # the battles of every test come from 127.0.0.1: fewer than this
BOARD_LEASE_S = 3  # short, so that the board's builder killed below is replaced within the test
DATABASE_AWAY = "the leaderboard's database cannot be reached right now"  # the tab's words during an outage
HELLO = {"model": "tiny-a", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}


@dataclass
class Server:
    name: str
    port: int
    logs: Path
    output: Path
    process: subprocess.Popen

    def answers(self, path: str, status: int) -> int:
        """How many POSTs to `path` this server answered with `status`, as uvicorn's access log says."""
        return self.output.read_text(errors="replace").count(f'"POST {path} HTTP/1.1" {status}')


@dataclass
class Tier:
    servers: dict[str, Server]
    proxy: Proxy
    database: str


def start_server(name: str, folder: Path, models: Path, database: str, secret: Path) -> Server:
    port = free_port()
    logs, output = folder / name, folder / f"{name}.out"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1"}
    with open(output, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "webui",
                "--port",
                str(port),
                "--models",
                str(models),
                "--log-dir",
                str(logs),
                "--cache-dir",
                str(folder / "cache"),
                "--server-name",
                name,
                "--database",
                database,
                "--secret-file",
                str(secret),
                "--trusted-proxies",
                "1",
                "--rate-messages",
                str(MESSAGES_PER_MINUTE),
                "--board-lease-s",
                str(BOARD_LEASE_S),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    return Server(name, port, logs, output, process)


@pytest.fixture(scope="module")
def tier(
    postgres_server: PostgresServer,  # noqa: F811
    tiny_model_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Tier]:
    folder = tmp_path_factory.mktemp("tier")
    models = tiny_models(folder, tiny_model_dir, THREE)
    secret = folder / "secret"
    secret.write_text("a-secret-both-servers-share-0123456789\n")
    secret.chmod(0o600)
    database = postgres_server.new_database()
    servers = {name: start_server(name, folder, models, database, secret) for name in NAMES}
    proxy = None
    try:
        for server in servers.values():
            wait_models_ready(server.name, server.process, server.port, server.output)
        proxy = start_proxy(folder / "nginx", [f"127.0.0.1:{s.port}" for s in servers.values()])
        yield Tier(servers, proxy, database)
    finally:
        if proxy is not None:
            proxy.stop()
        for server in servers.values():
            server.process.kill()
            server.process.wait()


def served_by(tier: Tier, client: Client) -> str:
    """Which server the proxy sends this client to: /healthz with its cookies names it."""
    return str(httpx.get(tier.proxy.url + "healthz", cookies=client.cookies, timeout=10).json()["server"])


def clients_on_each_server(tier: Tier) -> dict[str, Client]:
    """One gradio_client per server, all through the proxy (a new client lands where its cookie hashes)."""
    found: dict[str, Client] = {}
    for _ in range(20):
        client = Client(tier.proxy.url, verbose=False, download_files=False)
        name = served_by(tier, client)
        if name in found:
            client.close()
        else:
            found[name] = client
        if len(found) == len(NAMES):
            return found
    raise AssertionError(f"20 clients all landed on {list(found)}")


def battle_and_vote(client: Client, message: str) -> None:
    client.predict(api_name="/battle_new_round")
    final = client.predict(message, api_name="/battle_send")
    assert [final[0]["label"], final[1]["label"]] == ["Model A", "Model B"]
    client.predict(api_name="/battle_vote_a")


def logged_votes(server: Server) -> list[dict]:
    lines = [json.loads(line) for path in log_files(server.logs) for line in path.read_text().splitlines()]
    return [record for record in lines if record.get("type", "").endswith("vote")]


def indexed_votes(tier: Tier) -> dict[str, int]:
    """The shared board's rows by server, once each server's log folder is indexed (the board's own path)."""
    for server in tier.servers.values():
        index = VoteIndex(server.logs, database=tier.database, server=server.name)
        index.catch_up()
        index.close()
    with psycopg.connect(tier.database) as conn:
        rows = conn.execute(
            "SELECT f.server, count(*) FROM votes v JOIN files f ON f.name = v.file GROUP BY f.server"
        ).fetchall()
    return {server: int(count) for server, count in rows}


def board_summary(client: Client, votes: int, timeout_s: float = 60.0, says: str = "") -> str:
    """The Leaderboard tab's sentence on this client's server, once its board has read `votes`
    (or, given `says`, once the sentence says that)."""
    deadline = time.monotonic() + timeout_s
    while True:
        summary = str(client.predict(ALL, api_name="/leaderboard_refresh")[0])
        done = says in summary if says else f"({votes} battle votes read)" in summary
        if done or time.monotonic() > deadline:
            return summary
        time.sleep(0.5)


def builder(client: Client, timeout_s: float = 60.0) -> str:
    """The server that built the board this client's server shows (its first board may be under way)."""
    deadline = time.monotonic() + timeout_s
    while True:
        summary = str(client.predict(ALL, api_name="/leaderboard_refresh")[0])
        found = re.search(r"by server (\S+)\.", summary)
        if found:
            return found.group(1)
        assert time.monotonic() < deadline, f"no board names its builder: {summary}"
        time.sleep(0.5)


def test_visitors_on_two_servers_vote_into_one_board(tier: Tier):
    clients = clients_on_each_server(tier)
    try:
        for name, client in clients.items():
            battle_and_vote(client, f"hello from a visitor of {name}")
            assert served_by(tier, client) == name, "the proxy kept the visitor on one server"
        # One server builds the board; both show that board, each visitor's vote counted.
        summaries = {name: board_summary(client, votes=2) for name, client in clients.items()}
        builders = {re.search(r"by server (\S+)\.", text) for text in summaries.values()}
        assert all("(2 battle votes read)" in text for text in summaries.values()), summaries
        assert len({m.group(1) for m in builders if m}) == 1 and None not in builders, summaries
    finally:
        for client in clients.values():
            client.close()
    assert {name: len(logged_votes(s)) for name, s in tier.servers.items()} == {"web1": 1, "web2": 1}
    assert all(p.name.endswith(f"-{s.name}-conv.json") for s in tier.servers.values() for p in log_files(s.logs))
    assert indexed_votes(tier) == {"web1": 1, "web2": 1}


def test_a_client_over_its_limit_on_one_server_is_refused_on_the_other(tier: Tier):
    """A script on the API sends no cookie: the proxy spreads its requests round-robin over both
    servers. From 127.0.0.2 it is a client of its own, named by the proxy's X-Forwarded-For."""
    path = "/v1/chat/completions"
    before = {name: (s.answers(path, 200), s.answers(path, 429)) for name, s in tier.servers.items()}
    transport = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(transport=transport, base_url=tier.proxy.url, timeout=60) as http:
        codes = [http.post(path.lstrip("/"), json=HELLO).status_code for _ in range(MESSAGES_PER_MINUTE + 2)]
    assert codes == [200] * MESSAGES_PER_MINUTE + [429] * 2
    after = {name: (s.answers(path, 200), s.answers(path, 429)) for name, s in tier.servers.items()}
    admitted = {name: after[name][0] - before[name][0] for name in NAMES}
    refused = {name: after[name][1] - before[name][1] for name in NAMES}
    # Each server admitted some and refused one: alone, each would have admitted all six it saw.
    assert sum(admitted.values()) == MESSAGES_PER_MINUTE and all(admitted.values()), admitted
    assert refused == {"web1": 1, "web2": 1}


def test_votes_while_the_database_is_down_reach_the_board_once_it_is_back(
    tier: Tier,
    postgres_server: PostgresServer,  # noqa: F811
):
    """PostgreSQL stopped hard (as a crash would) while a visitor on each server battles and votes:
    each vote is acknowledged all the same (the JSON Lines log is the truth, the database only its
    index and the shared limits), the tab says in plain words that the board waits for its database
    (no address, no exception), the log says so once, and once the database is back each vote is
    on the shared board once."""
    clients = clients_on_each_server(tier)
    before = {name: len(logged_votes(s)) for name, s in tier.servers.items()}
    output_at = {name: len(s.output.read_text(errors="replace")) for name, s in tier.servers.items()}
    try:
        postgres_server.stop(mode="immediate")
        try:
            for name, client in clients.items():
                battle_and_vote(client, f"a vote while the database is away, on {name}")  # acknowledged
            away = {name: board_summary(client, votes=-1, says=DATABASE_AWAY) for name, client in clients.items()}
        finally:
            postgres_server.start()
        logged = {name: len(logged_votes(s)) for name, s in tier.servers.items()}
        assert logged == {name: before[name] + 1 for name in NAMES}
        # Each server's own board catches up with its log once the database answers again.
        summaries = {name: board_summary(client, votes=sum(logged.values())) for name, client in clients.items()}
    finally:
        for client in clients.values():
            client.close()
    assert all(DATABASE_AWAY in text and "postgresql" not in text for text in away.values()), away
    assert all(f"({sum(logged.values())} battle votes read)" in text for text in summaries.values()), summaries
    assert indexed_votes(tier) == logged
    for name, server in tier.servers.items():

        def said(name: str = name, server: Server = server) -> str:
            return server.output.read_text(errors="replace")[output_at[name] :]

        # (the line that it is back follows the turn that published the board just read)
        wait_for(lambda: "the leaderboard's database is back" in said(), 10, f"{name} never said so: {said()[-3000:]}")
        assert said().count("the leaderboard's database cannot be reached") == 1, said()[-3000:]
        assert said().count("the leaderboard's database is back") == 1, said()[-3000:]
        assert "the leaderboard could not be rebuilt" not in said(), said()[-3000:]
        assert said().count("counting in this process only") == 1, said()[-3000:]  # the rate limits, per server


def test_a_server_killed_mid_battle_loses_no_acknowledged_vote(tier: Tier):
    """The server killed is the board's builder, so that the other must take the board over."""
    clients = clients_on_each_server(tier)
    dead = builder(clients["web1"])
    alive = next(name for name in NAMES if name != dead)
    doomed, survivor = clients[dead], clients[alive]
    before = {name: len(logged_votes(s)) for name, s in tier.servers.items()}
    try:
        battle_and_vote(doomed, "a vote before the crash")  # acknowledged
        battle_and_vote(survivor, "a vote before the crash")
        doomed.predict(api_name="/battle_new_round")
        doomed.predict("a battle cut short", api_name="/battle_send")  # replied to, not yet voted on
        tier.servers[dead].process.send_signal(signal.SIGKILL)
        tier.servers[dead].process.wait()
        battle_and_vote(survivor, "a battle on the other server goes on")
        with pytest.raises(AppError):  # its battle died with its server: the proxy moved it to one that never saw it
            doomed.predict(api_name="/battle_vote_a")
        assert served_by(tier, doomed) == alive
        battle_and_vote(doomed, "a new round on the other server")  # which accepts the dead one's cookie: one secret
    finally:
        for client in clients.values():
            client.close()
    logged = {name: len(logged_votes(s)) for name, s in tier.servers.items()}
    assert logged == {dead: before[dead] + 1, alive: before[alive] + 3}
    assert indexed_votes(tier) == logged
    # The dead builder's lease expires and the survivor builds the board, every vote counted.
    client = Client(tier.proxy.url, verbose=False, download_files=False)
    try:
        summary = board_summary(client, votes=sum(logged.values()))
    finally:
        client.close()
    assert f"({sum(logged.values())} battle votes read)" in summary and f"by server {alive}." in summary, summary

"""Drills on a running deploy/local_tier.py: python -m deploy.tier_drill FOLDER [URL]

Through the proxy, as visitors: one visitor on each arena server fights a battle and votes. Then
the database outage: PostgreSQL is stopped hard (`pg_ctl stop -m immediate`, as a crash would)
and each visitor battles and votes again, every vote acknowledged (the logs are the truth, the
database only their index); PostgreSQL starts again, and the shared board must count each vote
once. Then the crash: the server that builds the board is killed with SIGKILL in the middle of its
visitor's next battle; the other server's visitor battles on; the dead server's visitor is moved
to the other server (its vote on the lost battle is refused) and fights a new round there; then
the board, built by the survivor once the dead builder's lease ran out, must count every vote.
Prints what happened, with times; exits 1 if a board does not count every vote within two
minutes. Destructive: the tier keeps running with one arena server fewer.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import httpx
from gradio_client import Client

from deploy.local_tier import Postgres

BOARD_WAIT_S = 120.0  # the lease (30 s by default) and a poll, with room to spare
BUILDER = re.compile(r"by server (\S+)\.")


def say(text: str) -> None:
    print(time.strftime("%H:%M:%S"), text, flush=True)


def served_by(url: str, client: Client) -> str:
    return str(httpx.get(url + "healthz", cookies=client.cookies, timeout=10).json()["server"])


def visitors(url: str, servers: int = 2) -> dict[str, Client]:
    """One visitor per server: new visitors land where their cookie hashes, so a few are tried."""
    found: dict[str, Client] = {}
    for _ in range(20):
        client = Client(url, verbose=False, download_files=False)
        name = served_by(url, client)
        if name in found:
            client.close()
        else:
            found[name] = client
        if len(found) == servers:
            return found
    raise RuntimeError(f"20 visitors all landed on {sorted(found)}")


def battle_and_vote(client: Client, message: str) -> None:
    client.predict(api_name="/battle_new_round")
    client.predict(message, api_name="/battle_send")
    client.predict(api_name="/battle_vote_a")


def board(client: Client) -> str:
    return " ".join(str(client.predict("all", api_name="/leaderboard_refresh")[0]).split())


def wait_for_board(client: Client, done: str) -> str:
    deadline = time.monotonic() + BOARD_WAIT_S
    while True:
        summary = board(client)
        if done in summary or time.monotonic() > deadline:
            return summary
        time.sleep(1)


def outage(postgres: Postgres, clients: dict[str, Client], votes: int) -> int:
    """Votes on every server while PostgreSQL is down hard; the votes cast so far once it is back
    and the board counts them all, or RuntimeError."""
    postgres.stop(mode="immediate")
    say(f"stopped PostgreSQL hard (pg_ctl stop -m immediate, port {postgres.port})")
    try:
        for name, client in clients.items():
            battle_and_vote(client, f"Name a fruit. (a visitor of {name}, the database away)")
            votes += 1
            say(f"a visitor of {name} fought a battle and voted: acknowledged with the database away")
        say(f"the board meanwhile: {board(next(iter(clients.values())))}")
    finally:
        postgres.start()
        say("started PostgreSQL again")
    summary = wait_for_board(clients["web2"], f"({votes} battle votes read)")
    say(f"the board, {votes} votes cast: {summary}")
    if f"({votes} battle votes read)" not in summary:
        raise RuntimeError(f"the votes cast while the database was away are not all on the board: {summary}")
    return votes


def crash(tier: dict, url: str, clients: dict[str, Client], votes: int) -> bool:
    """The board's builder killed mid-battle; whether the survivor's board then counts every vote."""
    builder = BUILDER.search(wait_for_board(clients["web1"], "by server "))
    if builder is None:
        raise RuntimeError("no board names its builder")
    dead = builder.group(1)
    alive = next(name for name in clients if name != dead)
    clients[dead].predict(api_name="/battle_new_round")
    clients[dead].predict("A battle cut short.", api_name="/battle_send")
    os.kill(tier[dead]["pid"], signal.SIGKILL)
    say(f"killed {dead}, the board's builder, with SIGKILL (pid {tier[dead]['pid']}) in the middle of a battle")
    battle_and_vote(clients[alive], "What is 2+2?")
    votes += 1
    say(f"the visitor of {alive} fought a battle and voted")
    try:
        clients[dead].predict(api_name="/battle_vote_a")
        say("the vote on the lost battle was ACCEPTED (unexpected)")
    except Exception as exc:  # gradio_client's AppError carries the UI's message
        say(f"the vote on the lost battle was refused: {exc}")
    say(f"the visitor of {dead} is now on {served_by(url, clients[dead])}")
    battle_and_vote(clients[dead], "Say hello.")
    votes += 1
    say("it fought a new round and voted")
    newcomer = Client(url, verbose=False, download_files=False)
    summary = wait_for_board(newcomer, f"({votes} battle votes read)")
    say(f"the board, {votes} votes cast: {summary}")
    newcomer.close()
    return f"({votes} battle votes read)" in summary


def main(argv: list[str]) -> int:
    folder, url = Path(argv[0]), (argv[1] if len(argv) > 1 else "http://127.0.0.1:8080/")
    tier = json.loads((folder / "tier.json").read_text())
    clients = visitors(url)
    votes = 0
    try:
        for name, client in clients.items():
            battle_and_vote(client, f"Name a colour. (a visitor of {name})")
            votes += 1
            say(f"a visitor of {name} fought a battle and voted")
        votes = outage(Postgres(**tier["postgres"]), clients, votes)
        return 0 if crash(tier, url, clients, votes) else 1
    except RuntimeError as exc:
        say(f"FAILED: {exc}")
        return 1
    finally:
        for client in clients.values():
            client.close()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Rate limits counted in a real PostgreSQL server (tests/postgres.py) that two servers share: a
client over its limit on one is refused by the other, concurrent checks on both admit exactly the
limit, the table holds no address, and a database outage falls back to counting in-process (and
says so) instead of blocking, then counts in the database again once it is back."""

from __future__ import annotations

import logging
import threading

import psycopg
import pytest

from tests.postgres import PostgresServer, postgres_server  # noqa: F401  (the fixture)
from webui.access.ratelimit import MESSAGE, VOTE, RateLimited, build_rate_limiter
from webui.access.shared_ratelimit import SharedRateLimiter
from webui.records.events import ClientInfo

KEY = b"k" * 32
VISITOR = ClientInfo(address="203.0.113.7")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def database(postgres_server: PostgresServer) -> str:  # noqa: F811
    return postgres_server.new_database()


def servers(database: str, messages: int, clock: Clock | None = None) -> list[SharedRateLimiter]:
    return [
        SharedRateLimiter(
            build_rate_limiter(messages, 30, votes_per_day=200).limits, database, KEY, clock=clock or Clock()
        )
        for _ in range(2)
    ]


def test_a_client_over_its_limit_on_one_server_is_refused_on_the_other(database: str):
    web1, web2 = servers(database, messages=3)
    web1.check(MESSAGE, VISITOR)
    web1.check(MESSAGE, VISITOR)
    web2.check(MESSAGE, VISITOR)
    for server in (web1, web2):
        with pytest.raises(RateLimited, match="at most 3 messages per minute"):
            server.check(MESSAGE, VISITOR)
    assert web1.remaining(MESSAGE, VISITOR) == 0
    web2.check(MESSAGE, ClientInfo(address="198.51.100.1"))  # another client has its own count
    web1.check(VOTE, VISITOR)  # and another action its own
    assert web2.remaining(VOTE, VISITOR) == 29
    with psycopg.connect(database) as conn:
        clients = {c for (c,) in conn.execute("SELECT client FROM rate_hits")}
        names = sorted(n for (n,) in conn.execute("SELECT DISTINCT name FROM rate_hits"))
    assert len(clients) == 2 and not any("203.0.113" in c for c in clients)
    assert names == ["message", "vote", "vote/day"]  # a vote counts in both of its windows


def race(limiters: list[SharedRateLimiter], client: ClientInfo) -> int:
    """How many of one check per limiter, all at once, were admitted."""
    admitted: list[bool] = []
    start = threading.Barrier(len(limiters))

    def send(server: SharedRateLimiter) -> None:
        start.wait()
        try:
            server.check(MESSAGE, client)
            admitted.append(True)
        except RateLimited:
            admitted.append(False)

    threads = [threading.Thread(target=send, args=(s,)) for s in limiters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return admitted.count(True)


def test_concurrent_checks_on_several_servers_admit_exactly_the_limit(database: str):
    limiters = [server for _ in range(4) for server in servers(database, messages=5)]
    for round_ in range(5):  # a client per round, racing on eight connections
        assert race(limiters, ClientInfo(address=f"198.51.100.{round_}")) == 5, round_


def test_an_outage_counts_in_process_and_says_so(
    database: str,
    postgres_server: PostgresServer,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
):
    clock = Clock()
    web1, _ = servers(database, messages=2, clock=clock)
    web1.check(MESSAGE, VISITOR)
    postgres_server.stop()
    try:
        with caplog.at_level(logging.ERROR, logger="webui.access.shared_ratelimit"):
            web1.check(MESSAGE, VISITOR)  # admitted, in-process: chatting goes on
            web1.check(MESSAGE, VISITOR)  # the process's own count starts at the outage
            with pytest.raises(RateLimited):
                web1.check(MESSAGE, VISITOR)
        assert not web1.shared
        assert [r.message for r in caplog.records if "counting in this process only" in r.message]
    finally:
        postgres_server.start()
    clock.now += 60  # the retry delay has passed
    web1.check(MESSAGE, VISITOR)  # in the database again: its 1 from before the outage, and this one
    assert web1.shared
    with pytest.raises(RateLimited):
        web1.check(MESSAGE, VISITOR)

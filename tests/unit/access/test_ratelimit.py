"""Rate limits: a sliding window per action and client, thread-safe, with a message a person can act on."""

from __future__ import annotations

import threading

import pytest

from webui.access.ratelimit import MESSAGE, VOTE, Limit, RateLimited, RateLimiter, build_rate_limiter, client_key
from webui.errors import ArenaError, ConfigError
from webui.records.events import ClientInfo


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


ALICE = ClientInfo(address="203.0.113.5")
BOB = ClientInfo(address="198.51.100.7")


def test_allows_up_to_the_limit_then_refuses_with_a_clear_message() -> None:
    limiter = build_rate_limiter(3, 10, clock=Clock())
    for _ in range(3):
        limiter.check(MESSAGE, ALICE)
    with pytest.raises(RateLimited) as caught:
        limiter.check(MESSAGE, ALICE)
    assert isinstance(caught.value, ArenaError)
    assert str(caught.value) == "Too many messages: at most 3 messages per minute. Please wait 60 s and try again."
    assert caught.value.retry_after_s == 60


def test_window_slides_rather_than_resetting_on_the_minute() -> None:
    clock = Clock()
    limiter = build_rate_limiter(2, 10, clock=clock)
    limiter.check(MESSAGE, ALICE)  # t=0
    clock.now += 40
    limiter.check(MESSAGE, ALICE)  # t=40
    clock.now += 10
    with pytest.raises(RateLimited) as caught:  # t=50: both still inside the last 60 s
        limiter.check(MESSAGE, ALICE)
    assert caught.value.retry_after_s == 10  # the first one leaves the window at t=60
    clock.now += 10.5  # t=60.5
    limiter.check(MESSAGE, ALICE)
    with pytest.raises(RateLimited):  # t=40 and t=60.5 are inside the window
        limiter.check(MESSAGE, ALICE)


def test_refused_attempts_do_not_extend_the_wait() -> None:
    clock = Clock()
    limiter = build_rate_limiter(1, 10, clock=clock)
    limiter.check(MESSAGE, ALICE)
    for _ in range(5):
        clock.now += 10
        with pytest.raises(RateLimited):
            limiter.check(MESSAGE, ALICE)
    clock.now += 10.1  # 60.1 s after the only counted message
    limiter.check(MESSAGE, ALICE)


def test_clients_and_actions_are_counted_separately() -> None:
    limiter = build_rate_limiter(1, 1, clock=Clock())
    limiter.check(MESSAGE, ALICE)
    limiter.check(MESSAGE, BOB)
    limiter.check(VOTE, ALICE)
    with pytest.raises(RateLimited, match="Too many votes: at most 1 vote per minute"):
        limiter.check(VOTE, ALICE)
    assert limiter.remaining(MESSAGE, ALICE) == 0
    assert limiter.remaining(MESSAGE, ClientInfo(address="192.0.2.1")) == 1


def test_logged_in_user_is_the_key_across_addresses() -> None:
    limiter = build_rate_limiter(1, 1, clock=Clock())
    limiter.check(MESSAGE, ClientInfo(address="203.0.113.5", user="carol"))
    with pytest.raises(RateLimited):
        limiter.check(MESSAGE, ClientInfo(address="198.51.100.7", user="carol"))
    assert client_key(ClientInfo(address="1.2.3.4", user="carol")) == "user:carol"
    assert client_key(ClientInfo(address="1.2.3.4")) == "addr:1.2.3.4"


def test_zero_turns_a_limit_off_and_unknown_clients_are_not_limited() -> None:
    limiter = build_rate_limiter(0, 1, clock=Clock())
    for _ in range(100):
        limiter.check(MESSAGE, ALICE)
        limiter.check(VOTE, ClientInfo())
    assert limiter.remaining(MESSAGE, ALICE) is None


def test_unknown_action_and_bad_limits_are_config_errors() -> None:
    limiter = build_rate_limiter(1, 1)
    with pytest.raises(ConfigError, match="no rate limit configured for 'upload'"):
        limiter.check("upload", ALICE)
    with pytest.raises(ConfigError, match="must be 0 \\(off\\) or more"):
        Limit(-1)
    with pytest.raises(ConfigError, match="must be > 0 seconds"):
        Limit(1, 0)


def test_idle_clients_are_swept_so_memory_stays_bounded() -> None:
    clock = Clock()
    limiter = RateLimiter({MESSAGE: Limit(100)}, clock=clock, sweep_every=10)
    for i in range(50):
        limiter.check(MESSAGE, ClientInfo(address=f"10.0.0.{i}"))
    assert limiter.tracked_clients() == 50
    clock.now += 61  # all 50 are now idle for longer than the window
    for _ in range(10):  # the 60th call sweeps
        limiter.check(MESSAGE, ALICE)
    assert limiter.tracked_clients() == 1


def test_concurrent_checks_admit_exactly_the_limit() -> None:
    """Many threads racing on one client: a check-then-append without the lock admits more."""
    limiter = build_rate_limiter(50, 1)
    admitted: list[int] = []
    start = threading.Barrier(8)

    def hammer() -> None:
        start.wait()
        for _ in range(100):
            try:
                limiter.check(MESSAGE, ALICE)
                admitted.append(1)
            except RateLimited:
                pass

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 50

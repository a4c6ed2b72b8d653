"""The replica chooser (webui/engine/replicas.py) with a fake clock, and the models-file key."""

from __future__ import annotations

import pytest

from webui.engine.replicas import Replicas, conversation_key, later_turn
from webui.errors import ConfigError
from webui.models.specs import parse_specs
from webui.types import Message

A, B, C = "http://a/v1", "http://b/v1", "http://c/v1"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_least_busy_replica_takes_the_request_ties_in_turn() -> None:
    replicas = Replicas([A, B, C])
    assert [replicas.choose(), replicas.choose(), replicas.choose()] == [A, B, C]  # each busy once
    replicas.done(B)
    assert replicas.choose() == B  # the only one with nothing in flight
    for url in (A, B, C):
        replicas.done(url)
    assert replicas.choose() == A and replicas.in_flight(A) == 1  # idle again: the least recently chosen first


def test_a_later_turn_goes_to_the_replica_of_its_first_even_when_busier() -> None:
    replicas = Replicas([A, B])
    first = [Message("user", "hi")]
    later = [*first, Message("assistant", "hello"), Message("user", "and then?")]
    key = conversation_key(first)
    assert key == conversation_key(later) and not later_turn(first) and later_turn(later)
    assert replicas.choose(key) == A  # turn 1 (left in flight: A stays busier)
    assert replicas.choose(key, follow=True) == A
    assert replicas.choose(conversation_key([Message("user", "other")])) == B  # a new conversation: least busy
    assert replicas.choose(key) == B, "a first turn is balanced, not pinned (the same opening by someone else)"


def test_the_key_is_the_opening_system_prompt_included() -> None:
    hi = [Message("user", "hi")]
    assert conversation_key(hi, "be brief") != conversation_key(hi, "be long")
    assert conversation_key([Message("system", "be brief"), *hi]) == conversation_key(hi, "be brief")
    assert conversation_key([Message("assistant", "alone")]) is None


def test_a_failed_replica_is_skipped_for_a_doubling_backoff_then_tried_again() -> None:
    clock = Clock()
    replicas = Replicas([A, B], clock=clock, backoff_s=2, max_backoff_s=5)
    key = conversation_key([Message("user", "hi")])
    assert replicas.choose(key) == A
    replicas.done(A)
    replicas.failed(A)
    assert replicas.down() == [A]
    assert replicas.choose(key, follow=True) == B  # its replica is down: another, which keeps it from now on
    replicas.done(B)
    clock.now += 2.5
    assert replicas.down() == [] and replicas.choose() == A  # back after the backoff, for a real request to try
    replicas.done(A)
    assert replicas.choose(key, follow=True) == B
    replicas.done(B)
    replicas.failed(A)
    clock.now += 2.5
    assert replicas.down() == [A], "the second failure in a row doubles the pause"
    clock.now += 10
    replicas.failed(A)
    clock.now += 5.5
    assert replicas.down() == [], "the pause stops growing at max_backoff_s"
    replicas.failed(A)
    replicas.succeeded(A)
    assert replicas.down() == []


def test_all_down_the_first_back_is_still_tried_and_each_replica_once_per_request() -> None:
    clock = Clock()
    replicas = Replicas([A, B], clock=clock)
    replicas.failed(B)
    clock.now += 1
    replicas.failed(A)  # A comes back later than B
    assert replicas.choose() == B
    assert replicas.choose(tried=[B]) == A
    assert replicas.choose(tried=[A, B]) is None


@pytest.mark.parametrize(
    ("base_url", "message"),
    [
        ([], "at least one URL"),
        (["http://a/v1", "http://a/v1/"], "lists a replica twice"),
        (["http://a/v1", "gpu-box:8000/v1"], "http:// or https://"),
        ("ftp://a/v1", "http:// or https://"),
    ],
)
def test_bad_replica_lists_are_refused_naming_the_key(base_url: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_specs({"models": [{"name": "r", "backend": "openai", "base_url": base_url, "remote_model": "m"}]})
    assert "key 'base_url'" in str(info.value)


def test_a_replica_list_is_read_and_the_first_is_the_spec_base_url() -> None:
    from webui.engine.openai_remote import replica_urls

    [spec] = parse_specs(
        {
            "models": [
                {"name": "r", "backend": "openai", "remote_model": "m", "base_url": ["http://a/v1/", "https://b/v1"]}
            ]
        }
    )
    assert spec.base_url == "http://a/v1" and replica_urls(spec) == ["http://a/v1", "https://b/v1"]

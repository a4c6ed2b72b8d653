"""Generation slots: a bounded first-come, first-served line; refused at once when full; a
request whose caller gave up leaves the line without running."""

from __future__ import annotations

import threading

import pytest

from tests.servers import wait_for
from webui.engine.base import Slots
from webui.errors import Overloaded
from webui.types import FinishReason, Message, SamplingParams


def _waiter(slots: Slots, results: list, cancel: threading.Event | None = None, tag: str = "") -> threading.Thread:
    def run() -> None:
        try:
            results.append((tag, slots.acquire("m", 10, cancel)))
        except Overloaded as exc:
            results.append((tag, exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_full_line_is_refused_at_once() -> None:
    slots = Slots(1, max_waiting=1)
    assert slots.acquire("m", 1)
    results: list = []
    _waiter(slots, results)
    wait_for(lambda: slots.waiting == 1, 5, "the second request did not queue")
    # A caller that has already given up: had the request joined the line at all, it would leave
    # it at once with False, so a refusal here can only be the one made before any wait.
    gave_up = threading.Event()
    gave_up.set()
    with pytest.raises(Overloaded, match="already waiting") as refused:
        slots.acquire("m", 30, gave_up)
    assert refused.value.retry_after_s >= 1
    assert slots.waiting == 1  # the line is as it was
    slots.release()
    wait_for(lambda: results, 5, "the waiting request did not get the slot")
    assert results == [("", True)]


def test_slots_go_to_the_line_in_order() -> None:
    slots = Slots(1, max_waiting=5)
    assert slots.acquire("m", 1)
    order: list = []
    for tag in "abc":
        _waiter(slots, order, tag=tag)
        wait_for(lambda tag=tag: slots.waiting == "abc".index(tag) + 1, 5, "did not queue")
    for expected in (["a"], ["a", "b"], ["a", "b", "c"]):
        slots.release()
        wait_for(lambda expected=expected: [t for t, _ in order] == expected, 5, f"expected {expected}")
    assert slots.busy == 1 and slots.waiting == 0


def test_a_cancelled_waiter_leaves_the_line_and_never_runs() -> None:
    slots = Slots(1, max_waiting=2)
    assert slots.acquire("m", 1)
    cancel = threading.Event()
    results: list = []
    thread = _waiter(slots, results, cancel)
    wait_for(lambda: slots.waiting == 1, 5, "did not queue")
    cancel.set()
    thread.join(2)
    assert results == [("", False)] and slots.waiting == 0
    slots.release()
    assert slots.busy == 0  # the slot was not handed to the request that left


def test_waiting_past_the_timeout_is_overloaded() -> None:
    slots = Slots(1, max_waiting=2)
    assert slots.acquire("m", 1)
    with pytest.raises(Overloaded, match="waited"):
        slots.acquire("m", 0.1, threading.Event())
    assert slots.waiting == 0


def test_a_request_queued_in_the_real_engine_leaves_when_its_caller_gives_up(registry, no_thread_leak) -> None:
    """The engine passes the caller's cancel event to the line: a dropped client's request never
    starts a generate thread (no prefill), and its stream says it was cancelled."""
    backend = registry.get("tiny-a")
    long = SamplingParams(temperature=0, max_new_tokens=200, ignore_eos=True)
    held = [backend.stream([Message("user", "hello")], long) for _ in range(backend.slots.size)]
    try:
        cancel = threading.Event()
        box: list = []
        thread = threading.Thread(
            target=lambda: box.append(list(backend.stream([Message("user", "hi")], long, cancel))), daemon=True
        )
        thread.start()
        wait_for(lambda: backend.slots.waiting == 1, 5, "the request did not queue")
        generating = sum(t.name.startswith("generate:") for t in threading.enumerate())
        cancel.set()
        thread.join(5)
        [events] = box
        assert [e.reason for e in events] == [FinishReason.CANCELLED]
        assert sum(t.name.startswith("generate:") for t in threading.enumerate()) <= generating
        assert backend.slots.waiting == 0
    finally:
        for stream in held:
            stream.close()

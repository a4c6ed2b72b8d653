"""The one hand-off between worker threads and their consumer."""

from __future__ import annotations

import asyncio
import queue
import threading

import pytest

from webui.handoff import AsyncHandoff, Ended, Handoff, run_in_thread


def test_items_arrive_in_order_then_the_end() -> None:
    box: Handoff[int] = Handoff()
    run_in_thread(lambda: [box.put(i) for i in range(5)], box, "producer").join()
    assert list(box) == [0, 1, 2, 3, 4]
    assert box.ended
    with pytest.raises(Ended):
        box.get(timeout=0)


def test_a_crash_reaches_the_consumer_after_the_items_and_still_ends_the_stream() -> None:
    box: Handoff[str] = Handoff()

    def work() -> None:
        box.put("a")
        raise ValueError("boom")

    run_in_thread(work, box, "producer").join()
    assert box.get() == "a"
    with pytest.raises(ValueError, match="boom"):
        box.get()
    assert list(box) == []  # closed after the failure: nothing more to wait for


def test_several_producers_end_only_when_all_have_closed() -> None:
    box: Handoff[int] = Handoff(producers=3)
    gate = threading.Event()
    threads = [run_in_thread(lambda i=i: (gate.wait(5), box.put(i)), box, f"p{i}") for i in range(2)]
    run_in_thread(lambda: box.put(99), box, "quick").join()
    assert box.get(timeout=5) == 99
    with pytest.raises(queue.Empty):
        box.get(timeout=0.05)  # two producers are still open: not the end
    gate.set()
    assert sorted(box) == [0, 1]
    for t in threads:
        t.join(5)


def test_until_stops_waiting_when_told() -> None:
    box: Handoff[int] = Handoff()  # a producer that never sends anything
    stop = threading.Event()
    threading.Timer(0.1, stop.set).start()
    assert list(box.until(stop.is_set, every_s=0.02)) == []
    assert not box.ended


def test_ready_returns_what_is_there_and_keeps_a_failure_for_the_next_call() -> None:
    box: Handoff[int] = Handoff()
    box.put(1)
    box.put(2)
    box.fail(RuntimeError("late"))
    assert box.ready() == [1, 2]
    with pytest.raises(RuntimeError, match="late"):
        box.ready()
    assert box.ready() == []


def test_a_coroutine_reads_items_then_the_failure_then_the_end() -> None:
    async def consume() -> list[object]:
        box: AsyncHandoff[int] = AsyncHandoff()

        def work() -> None:
            box.put(1)
            box.put(2)
            raise ValueError("boom")

        thread = run_in_thread(work, box, "producer")
        seen: list[object] = [await box.get(), await box.get()]
        with pytest.raises(ValueError, match="boom"):
            await box.get()
        with pytest.raises(Ended):
            await box.get()
        thread.join(5)
        return [*seen, box.ended]

    assert asyncio.run(consume()) == [1, 2, True]


def test_a_producer_outliving_its_loop_is_told_and_does_not_crash() -> None:
    lost = threading.Event()

    async def make() -> AsyncHandoff[int]:
        return AsyncHandoff(on_lost=lost.set)

    box = asyncio.run(make())  # asyncio.run closes the loop on the way out
    box.put(1)  # would raise RuntimeError (loop closed) into the producer's thread
    box.close()
    assert lost.is_set()

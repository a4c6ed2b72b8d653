"""The API's bridge from the blocking engine stream to the async handler (webui.api.bridge), with
plain generators for streams: the start's failure reaches the handler, a stream's failure becomes
one error event, and a consumer that leaves closes the engine's stream even if it ignores cancel."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator

import pytest

from webui.api.bridge import EventPump
from webui.errors import ParamError
from webui.types import Finished, FinishReason, StreamEvent, TextDelta


def test_what_the_start_raises_is_raised_by_start() -> None:
    def start(cancel: threading.Event) -> Iterator[StreamEvent]:
        raise ParamError("temperature", "too hot")

    async def run() -> None:
        with pytest.raises(ParamError, match="too hot"):
            await EventPump(start).start()

    asyncio.run(run())


def test_a_stream_that_raises_ends_in_one_error_event() -> None:
    def start(cancel: threading.Event) -> Iterator[StreamEvent]:
        yield TextDelta("a")
        raise ValueError("boom")

    async def run() -> list[StreamEvent]:
        pump = EventPump(start)
        await pump.start()
        return [event async for event in pump.events()]

    assert asyncio.run(run()) == [TextDelta("a"), Finished(FinishReason.ERROR, error="ValueError: boom")]


def test_a_consumer_that_leaves_closes_a_stream_that_ignores_cancel() -> None:
    closed = threading.Event()

    def start(cancel: threading.Event) -> Iterator[StreamEvent]:
        try:
            while True:  # never looks at `cancel`: only the bridge can end it
                yield TextDelta("x")
                time.sleep(0.001)
        finally:
            closed.set()

    async def run() -> EventPump:
        pump = EventPump(start)
        await pump.start()
        async with contextlib.aclosing(pump.events()) as events:
            async for _ in events:
                break  # the client went away
        return pump

    pump = asyncio.run(run())
    assert pump.cancel.is_set()
    assert closed.wait(10), "the engine's stream was never closed"

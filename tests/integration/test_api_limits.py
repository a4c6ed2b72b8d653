"""The API's own limits, on the real app: the per-client rate limit that the UI
shares, a model's full line refused at once, and a queued request whose client left.

One trusted proxy: each test speaks from its own X-Forwarded-For address, so each has its own
rate budget (and the test of the limit shows that another address is not affected).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from gradio_client import Client

from tests.integration.apiserver import STOP_S, RunningServer, alive_threads, start_app, threads_end_within, wait_for
from tests.integration.test_api_shapes import checked_http_client
from tests.tiny import tiny_models
from webui.config import Settings
from webui.engine.base import Slots

RATE = 5  # API requests and UI messages per client per minute


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("api-limits")
    # tiny-long: dtype fp32, its own weights, so that its one slot is its own
    long = {"name": "tiny-long", "dtype": "fp32", "context_length": 4096, "max_concurrency": 1,
            "sampling": {"temperature": 0, "max_new_tokens": 4}}  # fmt: skip
    models = tiny_models(root, tiny_model_dir, ["tiny-a", "tiny-b", long], max_new_tokens=4)
    # A long queue timeout: a request that waits must be refused or leave because of the line and
    # the client, never because the timeout ran out during the test.
    settings = Settings(
        models_file=models,
        log_dir=root / "logs",
        cache_dir=root / "cache",
        queue_timeout_s=60.0,
        queue_per_slot=2,
        rate_messages=RATE,
        rate_votes=0,
        trusted_proxies=1,
    )
    running = start_app(settings)
    yield running
    running.stop()


_addresses = iter(f"198.51.100.{i}" for i in range(1, 255))


def http_from(server: RunningServer, address: str | None = None, **kwargs: object) -> httpx.Client:
    """A client seen as a fresh address (or `address`) behind the trusted proxy."""
    return checked_http_client(base_url=server.v1, headers={"X-Forwarded-For": address or next(_addresses)}, **kwargs)


def _chat(model: str = "tiny-a", **fields: object) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 1, **fields}


def _slots(server: RunningServer, model: str) -> Slots:
    return server.services.registry.get(model).slots  # type: ignore[union-attr, attr-defined]


class Holder:
    """A stream on tiny-long read up to its first text and left open: it holds the only slot."""

    def __init__(self, server: RunningServer) -> None:
        self.client = httpx.Client(base_url=server.v1, timeout=30, headers={"X-Forwarded-For": next(_addresses)})
        body = _chat("tiny-long", stream=True, max_tokens=3000, ignore_eos=True)
        self.response = self.client.send(self.client.build_request("POST", "/chat/completions", json=body), stream=True)
        assert self.response.status_code == 200
        self.lines = self.response.iter_lines()
        while '"delta":{"content":' not in next(self.lines):
            pass

    def close(self) -> None:  # idempotent: a test may free the slot before the fixture does
        self.response.close()
        self.client.close()
        threads_end_within("generate:tiny-long", STOP_S)


@pytest.fixture
def holder(server: RunningServer) -> Iterator[Holder]:
    held = Holder(server)
    yield held
    held.close()


def _wait_in_line(server: RunningServer, body: dict, results: list) -> threading.Thread:
    """A request from its own address that waits in tiny-long's line, in a thread."""

    def run() -> None:
        with http_from(server, timeout=60) as client:
            results.append(client.post("/chat/completions", json=body).status_code)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# ---- the rate limit -------------------------------------------------------------------------------
def test_api_requests_are_rate_limited_per_client(server: RunningServer) -> None:
    with http_from(server) as client:
        statuses = [client.post("/chat/completions", json=_chat()).status_code for _ in range(RATE)]
        assert statuses == [200] * RATE
        refused = client.post("/completions", json={"model": "tiny-a", "prompt": "hello", "max_tokens": 1})
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        error = refused.json()["error"]
        assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limit_exceeded")
        assert error["message"].startswith(f"Too many messages: at most {RATE} messages per minute.")
        assert client.get("/models").status_code == 200  # listing is free
    with http_from(server) as other:  # another client has its own budget
        assert other.post("/chat/completions", json=_chat()).status_code == 200


def test_the_ui_and_the_api_share_one_budget(server: RunningServer) -> None:
    address = next(_addresses)
    ui = Client(server.url, verbose=False, download_files=False, headers={"X-Forwarded-For": address})
    try:
        for i in range(RATE - 1):  # each send is one message, whatever the mode
            if i:
                ui.predict(api_name="/battle_new_round")
            ui.predict("hello", api_name="/battle_send")
    finally:
        ui.close()
    with http_from(server, address) as client:
        assert client.post("/chat/completions", json=_chat()).status_code == 200
        assert client.post("/chat/completions", json=_chat()).status_code == 429


# ---- the line in front of a model -----------------------------------------------------------------
def test_a_full_line_is_refused_at_once(server: RunningServer, holder: Holder) -> None:
    slots = _slots(server, "tiny-long")
    results: list[int] = []
    waiting = [_wait_in_line(server, _chat("tiny-long"), results) for _ in range(slots.max_waiting)]
    wait_for(lambda: slots.waiting == slots.max_waiting, 10, "the requests did not line up")
    with http_from(server) as client:
        for stream in (False, True):
            refused = client.post("/chat/completions", json=_chat("tiny-long", stream=stream))
            # Refused for the line, before any wait: a refusal after the queue timeout says how
            # long it waited (and asks for that many seconds, not 5), and those in line are untouched.
            assert refused.status_code == 429 and refused.headers["retry-after"] == "5"
            error = refused.json()["error"]
            assert error["code"] == "model_overloaded" and "requests are already waiting" in error["message"]
            assert slots.waiting == slots.max_waiting
        assert client.post("/chat/completions", json=_chat("tiny-b")).status_code == 200  # other weights, other line
    holder.close()
    for thread in waiting:
        thread.join(30)
    assert results == [200] * slots.max_waiting  # those in line were served in turn


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_leaves_the_line_never_runs(server: RunningServer, holder: Holder, stream: bool) -> None:
    slots = _slots(server, "tiny-long")
    (holding,) = alive_threads("generate:tiny-long")  # the holder's generation
    gone = http_from(server, timeout=httpx.Timeout(30, read=0.5))
    with pytest.raises(httpx.ReadTimeout):  # it waits for tiny-long's slot, and gives up
        gone.post("/chat/completions", json=_chat("tiny-long", stream=stream, max_tokens=3000, ignore_eos=True))
    gone.close()
    # The line must empty while the holder still generates: once that ends, the slot would go to a
    # request still in line. (30 s: inside the 60 s queue timeout, which would empty it too.)
    wait_for(lambda: slots.waiting == 0 or not holding.is_alive(), 30, "the line never emptied")
    assert holding.is_alive(), "the request of a client that left stayed in line until the slot came free"
    holder.close()  # its generation has ended: a request still in line would hold the slot now
    assert slots.busy == 0 and not alive_threads("generate:tiny-long")

"""Remote backends (`backend: openai`) against a real OpenAI-compatible server started here: a
second instance of this app serving the tiny model, behind an API key.

"upstream" serves tiny-a; "front" lists `remote-a` (tiny-a, fetched from upstream) beside a local
model, the way a deployment puts another machine's models into its battle pool.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import openai
import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from tests.integration.apiserver import (
    STOP_S,
    RunningServer,
    alive_threads,
    decoding_steps,
    serve_app,
    start_app,
    threads_end_within,
)
from tests.tiny import tiny_models
from webui.config import Settings
from webui.engine.base import collect
from webui.engine.registry import ModelState, Registry
from webui.models.specs import parse_specs
from webui.types import FinishReason, Message, SamplingParams, TextDelta

KEY_ENV = "ARENA_TEST_UPSTREAM_KEY"
KEY = "upstream-secret"
HELLO = [Message("user", "hello what is the capital of france")]
GREEDY = {"temperature": 0, "max_new_tokens": 16}


@pytest.fixture(scope="module")
def upstream(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("upstream")
    tiny_a = {"name": "tiny-a", "context_length": 4096, "sampling": GREEDY}
    settings = Settings(
        models_file=tiny_models(root, tiny_model_dir, [tiny_a]),
        log_dir=root / "logs",
        cache_dir=root / "cache",
        api_keys=(KEY,),
    )
    server = start_app(settings)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def dead_url() -> str:
    """A port nothing listens on (bound, never listened: connections are refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    sock.close()


@pytest.fixture(scope="module")
def front(
    upstream: RunningServer, dead_url: str, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("front")
    entries = [
        {"name": "local-b", "sampling": GREEDY},
        {"name": "remote-a", "backend": "openai", "base_url": upstream.v1, "remote_model": "tiny-a",
         "api_key_env": KEY_ENV, "sampling": GREEDY},
        {"name": "remote-dead", "backend": "openai", "base_url": dead_url, "remote_model": "tiny-a",
         "connect_timeout_s": 2},
    ]  # fmt: skip
    os.environ[KEY_ENV] = KEY
    settings = Settings(
        models_file=tiny_models(root, tiny_model_dir, entries), log_dir=root / "logs", cache_dir=root / "cache"
    )
    try:
        server = start_app(settings)
    finally:
        del os.environ[KEY_ENV]
    yield server
    server.stop()


def _upstream_answer(upstream: RunningServer, max_tokens: int) -> openai.types.chat.ChatCompletion:
    client = openai.OpenAI(base_url=upstream.v1, api_key=KEY, max_retries=0)
    return client.chat.completions.create(
        model="tiny-a", messages=[m.as_dict() for m in HELLO], max_tokens=max_tokens, extra_body={"ignore_eos": True}
    )


# ---- status and the battle pool -----------------------------------------------------------------
def test_remote_entry_joins_the_pool_and_a_dead_one_fails_with_a_reason(
    front: RunningServer, upstream: RunningServer
) -> None:
    registry = front.services.registry
    assert set(registry.ready_names()) == {"local-b", "remote-a"}  # both can be drawn for a battle
    assert registry.status("remote-a").device == "remote"  # the address is for the log, not the status
    served = registry.fingerprint("remote-a")  # what records say served it: the host and the model id it lists
    assert served is not None and registry.status("remote-a").fingerprint == served.id
    assert dict(served.components) == {
        "upstream": upstream.v1.split("/")[2],
        "model": "tiny-a",
        "engine": "openai-remote",
    }
    dead = registry.status("remote-dead")
    assert dead.state is ModelState.FAILED and dead.reason == "upstream unreachable" and "cannot reach" in dead.detail
    cards = {m["id"]: m for m in httpx.get(f"{front.v1}/models").json()["data"]}
    assert cards["remote-a"]["status"] == "ready" and cards["remote-a"]["backend"] == "openai"
    assert (
        cards["remote-dead"]["status"] == "failed" and cards["remote-dead"]["status_reason"] == "upstream unreachable"
    )


def test_wrong_key_or_model_fails_loading_with_a_reason(
    upstream: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "wrong")
    specs = parse_specs(
        {
            "models": [
                {
                    "name": "bad-key",
                    "backend": "openai",
                    "base_url": upstream.v1,
                    "remote_model": "tiny-a",
                    "api_key_env": KEY_ENV,
                },
                {
                    "name": "no-key",
                    "backend": "openai",
                    "base_url": upstream.v1,
                    "remote_model": "tiny-a",
                    "api_key_env": "ARENA_TEST_UNSET",
                },
            ]
        }
    )
    registry = Registry(specs, Settings())
    registry.start()
    assert registry.wait_idle(30)
    assert registry.status("bad-key").reason == "upstream refused our API key"
    assert "refused our key (HTTP 401)" in registry.status("bad-key").detail
    assert registry.status("no-key").reason == "upstream API key not set"
    assert "ARENA_TEST_UNSET" in registry.status("no-key").detail
    monkeypatch.setenv(KEY_ENV, KEY)
    specs = parse_specs(
        {
            "models": [
                {
                    "name": "x",
                    "backend": "openai",
                    "base_url": upstream.v1,
                    "remote_model": "gpt-17",
                    "api_key_env": KEY_ENV,
                }
            ]
        }
    )
    registry = Registry(specs, Settings())
    registry.start()
    assert registry.wait_idle(30)
    assert registry.status("x").reason == "upstream does not serve this model"
    assert "does not serve 'gpt-17'; it serves: tiny-a" in registry.status("x").detail


# ---- streaming like a local model ---------------------------------------------------------------
def test_remote_backend_streams_into_a_pane_like_a_local_model(front: RunningServer, upstream: RunningServer) -> None:
    expected = _upstream_answer(upstream, 6)
    backend = front.services.registry.get("remote-a")
    params = backend.default_params().replace(max_new_tokens=6, ignore_eos=True)
    events = list(backend.stream(HELLO, params))
    assert all(isinstance(e, TextDelta) for e in events[:-1])
    final = events[-1]
    assert "".join(e.text for e in events[:-1]) == expected.choices[0].message.content
    assert final.reason is FinishReason.LENGTH
    # token counts come from the upstream usage, not from counting chunks
    assert (final.prompt_tokens, final.completion_tokens) == (expected.usage.prompt_tokens, 6)
    assert final.ttft_s is not None and final.extra["remote_model"] == "tiny-a"


def test_remote_model_through_our_api_whole_streamed_and_raw(front: RunningServer, upstream: RunningServer) -> None:
    expected = _upstream_answer(upstream, 6).choices[0].message.content
    client = openai.OpenAI(base_url=front.v1, api_key="unused", max_retries=0)
    args = {
        "model": "remote-a",
        "messages": [m.as_dict() for m in HELLO],
        "max_tokens": 6,
        "extra_body": {"ignore_eos": True},
    }
    whole = client.chat.completions.create(**args)
    assert whole.choices[0].message.content == expected
    assert whole.choices[0].finish_reason == "length" and whole.usage.completion_tokens == 6
    chunks = list(client.chat.completions.create(**args, stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == expected
    assert chunks[-1].usage.completion_tokens == 6
    raw = client.completions.create(
        model="remote-a", prompt="the cat sat", max_tokens=4, extra_body={"ignore_eos": True}
    )
    assert raw.choices[0].finish_reason == "length" and raw.usage.completion_tokens == 4


def test_stop_strings_apply_to_remote_models(front: RunningServer, upstream: RunningServer) -> None:
    full = _upstream_answer(upstream, 12).choices[0].message.content
    stop = next(w for w in full.split()[1:] if full.find(w) > 0)
    backend = front.services.registry.get("remote-a")
    text, final = collect(
        backend.stream(HELLO, backend.default_params().replace(max_new_tokens=12, ignore_eos=True, stop=[stop]))
    )
    assert text == full[: full.find(stop)] and final.reason is FinishReason.STOP


def test_upstream_refusal_keeps_its_status_through_our_api(front: RunningServer) -> None:
    """Upstream's own context check (4096 tokens) refuses; our API answers 400 with its message."""
    client = openai.OpenAI(base_url=front.v1, api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="remote-a", messages=[m.as_dict() for m in HELLO], max_tokens=5000)
    assert "max_tokens" in caught.value.body["message"]


# ---- Stop and disconnects reach the upstream model ----------------------------------------------
LONG_TOKENS = 3000  # tiny-a runs for many seconds to reach it, unless something stops it


def test_closing_the_remote_stream_stops_the_upstream_model(
    front: RunningServer, upstream: RunningServer, no_thread_leak: None
) -> None:
    backend = front.services.registry.get("remote-a")
    with decoding_steps(upstream, "tiny-a") as steps:
        events = backend.stream(HELLO, backend.default_params().replace(max_new_tokens=LONG_TOKENS, ignore_eos=True))
        assert isinstance(next(events), TextDelta)
        assert alive_threads("generate:tiny-a"), "upstream should be generating"
        events.close()  # what Stop does to a pane
        threads_end_within("generate:tiny-a", STOP_S)
    assert len(steps) < LONG_TOKENS, "upstream generated to the end after we closed the stream"
    threads_end_within("remote:remote-a", STOP_S)


def test_cancel_event_stops_the_upstream_model(
    front: RunningServer, upstream: RunningServer, no_thread_leak: None
) -> None:
    backend = front.services.registry.get("remote-a")
    cancel = threading.Event()
    with decoding_steps(upstream, "tiny-a") as steps:
        events = backend.stream(
            HELLO, backend.default_params().replace(max_new_tokens=LONG_TOKENS, ignore_eos=True), cancel
        )
        next(events)
        cancel.set()
        remaining = list(events)
        threads_end_within("generate:tiny-a", STOP_S)
    assert remaining[-1].reason is FinishReason.CANCELLED
    assert len(steps) < LONG_TOKENS, "upstream generated to the end after the cancel"


def test_api_client_disconnect_reaches_the_upstream_model(
    front: RunningServer, upstream: RunningServer, no_thread_leak: None
) -> None:
    body = {
        "model": "remote-a",
        "messages": [m.as_dict() for m in HELLO],
        "stream": True,
        "max_tokens": LONG_TOKENS,
        "ignore_eos": True,
    }
    with decoding_steps(upstream, "tiny-a") as steps:
        with (
            httpx.Client(timeout=30) as client,
            client.stream("POST", f"{front.v1}/chat/completions", json=body) as response,
        ):
            lines = response.iter_lines()
            while '"delta":{"content":' not in next(lines):
                pass
            assert alive_threads("generate:tiny-a")
        threads_end_within("generate:tiny-a", STOP_S)  # the client has left
    assert len(steps) < LONG_TOKENS, "upstream generated to the end after the API client left"


# ---- failures become an error in that stream only -----------------------------------------------
def _remote_registry(url: str, **entry: object) -> Registry:
    specs = parse_specs({"models": [{"name": "r", "backend": "openai", "base_url": url, "remote_model": "m", **entry}]})
    registry = Registry(specs, Settings())
    registry.load("r")
    return registry


class FakeUpstream:
    """A minimal OpenAI-compatible server that misbehaves on purpose: it lists model "m"; its chat
    route either sends nothing at all (`headers=False`) or one chunk and then falls silent. It
    notes when its client hangs up."""

    def __init__(self, *, headers: bool) -> None:
        self.hung_up = threading.Event()
        self.release = asyncio.Event()
        self.app = FastAPI()
        self.app.get("/v1/models")(lambda: {"object": "list", "data": [{"id": "m", "object": "model"}]})
        self.app.post("/v1/chat/completions")(self._chat if headers else self._silent)

    async def _silent(self) -> dict:
        await self.release.wait()
        return {}

    async def _chat(self) -> StreamingResponse:
        async def body() -> AsyncIterator[str]:
            try:
                yield 'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
                await self.release.wait()
            finally:
                self.hung_up.set()

        return StreamingResponse(body(), media_type="text/event-stream")


def test_upstream_that_goes_down_later_gives_an_error_event_and_shows_in_status() -> None:
    server = serve_app(FakeUpstream(headers=True).app)
    registry = _remote_registry(server.v1, connect_timeout_s=1)
    backend = registry.get("r")
    server.stop()
    text, final = collect(backend.stream(HELLO, backend.default_params()))
    assert final.reason is FinishReason.ERROR and "cannot reach" in final.error and text == ""
    assert backend.health().startswith("upstream unreachable")

    from fastapi.testclient import TestClient

    from webui.api import install_api
    from webui.records.events import NullRecorder
    from webui.services import Services

    app = FastAPI()
    install_api(app, Services(registry.settings, registry, NullRecorder()))
    with TestClient(app) as client:
        card = client.get("/v1/models/r").json()
        assert card["status"] == "unhealthy" and card["status_reason"].startswith("upstream unreachable")
        answer = client.post(
            "/v1/chat/completions", json={"model": "r", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert answer.status_code == 502 and answer.json()["error"]["type"] == "upstream_error"
    registry.close()


def test_upstream_timeout_gives_an_error_event() -> None:
    fake = FakeUpstream(headers=False)
    server = serve_app(fake.app)
    try:
        registry = _remote_registry(server.v1, timeout_s=0.5)
        backend = registry.get("r")
        _text, final = collect(backend.stream(HELLO, backend.default_params()))
        assert final.reason is FinishReason.ERROR and "timed out" in final.error
        registry.close()
    finally:
        server.server.force_exit = True
        server.stop()


def test_stop_closes_a_silent_upstream_stream() -> None:
    """Upstream sent one chunk and went quiet: our reader is blocked reading. Stop must still hang
    up (no next chunk ever comes, and the read timeout is far beyond the wait here) and free the slot."""
    fake = FakeUpstream(headers=True)
    server = serve_app(fake.app)
    try:
        registry = _remote_registry(server.v1, timeout_s=3600)
        backend = registry.get("r")
        events = backend.stream(HELLO, backend.default_params())
        assert next(events) == TextDelta("hi")
        events.close()
        assert fake.hung_up.wait(STOP_S), "the upstream server did not see us hang up"
        threads_end_within("remote:r", STOP_S)
        assert backend.slots.busy == 0
        registry.close()
    finally:
        server.server.force_exit = True
        server.stop()


# ---- what a visitor may learn about an upstream ----------------------------------------------------
UPSTREAM_INSIDES = 'Traceback: File "/srv/upstream/engine.py", KeyError: 7'


def _failing_upstream() -> FastAPI:
    """Lists "m" (or fails to, on /broken/v1) and fails every chat with its insides in the answer."""
    from fastapi.responses import PlainTextResponse

    app = FastAPI()
    app.get("/v1/models")(lambda: {"object": "list", "data": [{"id": "m", "object": "model"}]})
    app.get("/broken/v1/models")(lambda: PlainTextResponse(UPSTREAM_INSIDES, status_code=500))
    app.post("/v1/chat/completions")(lambda: PlainTextResponse(UPSTREAM_INSIDES, status_code=500))
    return app


def test_visitors_see_a_short_reason_and_the_log_has_the_details(
    dead_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """/healthz, /v1/models and the UI's status lines say what state a model is in and a generic why;
    the upstream's address and its own words go to the server log, with the model's name."""
    from webui.ui import views

    upstream = serve_app(_failing_upstream(), name="failing-upstream")
    (tmp_path / "models.yaml").write_text(f"""\
models:
  - {{name: erring, backend: openai, base_url: {upstream.v1}, remote_model: m}}
  - {{name: broken, backend: openai, base_url: {upstream.url}/broken/v1, remote_model: m}}
  - {{name: dead, backend: openai, base_url: {dead_url}, remote_model: m, connect_timeout_s: 2}}
""")
    settings = Settings(models_file=tmp_path / "models.yaml", log_dir=tmp_path / "logs", cache_dir=tmp_path / "cache")
    front = start_app(settings)
    try:
        registry = front.services.registry
        _, final = collect(registry.get("erring").stream(HELLO, SamplingParams(max_new_tokens=4)))
        assert final.reason is FinishReason.ERROR
        assert registry.status("erring").problem is not None  # ready, but its upstream fails
        statuses = registry.statuses()
        shown = {
            "healthz": httpx.get(f"{front.url}/healthz").text,
            "models": httpx.get(f"{front.v1}/models").text,
            "status line": views.status_markdown(statuses),
            "dropdown": repr(views.model_choices(statuses)),
        }
        for where, text in shown.items():
            for leak in (upstream.url.split("//")[1], dead_url.split("//")[1], "/srv/upstream", "KeyError", "HTTP 500"):
                assert leak not in text, (where, leak, text)
        assert "upstream error" in shown["status line"] and "upstream unreachable" in shown["status line"]
        health = httpx.get(f"{front.url}/healthz").json()["models"]
        assert health["dead"]["state"] == "failed" and health["dead"]["reason"] == "upstream unreachable"
        assert health["broken"]["reason"] == "upstream error" and health["erring"]["problem"].startswith(
            "upstream error"
        )
        logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
        for name, detail in (("broken", UPSTREAM_INSIDES), ("dead", dead_url), ("erring", UPSTREAM_INSIDES)):
            assert any(
                name in r.getMessage() and detail in (r.getMessage() + str(r.exc_info and r.exc_info[1]))
                for r in caplog.records
            ), (name, logged[-2000:])
    finally:
        front.stop()
        upstream.stop()

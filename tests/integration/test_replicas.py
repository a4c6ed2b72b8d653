"""A remote model served by several replicas (`base_url: [url, ...]`), against real upstream servers:
instances of this app serving the tiny model (API only), some of them stopped mid-test.

Which replica served a request is read from its final event (`extra["upstream"]`), or, while it
runs, from the upstream servers' own busy slots.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from tests.integration.apiserver import STOP_S, RunningServer, serve_app, start_app, threads_end_within
from tests.tiny import tiny_models
from webui.config import Settings
from webui.engine.base import collect
from webui.engine.registry import Registry
from webui.engine.remote_backend import RemoteBackend
from webui.models.specs import parse_specs
from webui.types import Finished, FinishReason, Message, SamplingParams, TextDelta

LONG = SamplingParams(temperature=0, max_new_tokens=3000, ignore_eos=True)  # runs until closed
SHORT = SamplingParams(temperature=0, max_new_tokens=6, ignore_eos=True)


def _tiny_server(folder: Path, root: Path) -> RunningServer:
    root.mkdir()
    models = tiny_models(root, folder, [{"name": "tiny-a", "context_length": 4096}])
    return start_app(Settings(models_file=models, log_dir=root / "logs", cache_dir=root / "cache"), ui=False)


@pytest.fixture(scope="module")
def replicas(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RunningServer]]:
    root = tmp_path_factory.mktemp("replicas")
    servers = [_tiny_server(tiny_model_dir, root / name) for name in ("a", "b")]
    yield servers
    for server in servers:
        server.stop()


def _served_by(urls: list[str]) -> tuple[Registry, RemoteBackend]:
    specs = parse_specs({"models": [{"name": "r", "backend": "openai", "base_url": urls, "remote_model": "tiny-a"}]})
    registry = Registry(specs, Settings())
    registry.load("r")
    backend = registry.get("r")
    assert isinstance(backend, RemoteBackend)
    return registry, backend


def _busy(server: RunningServer) -> int:
    assert server.services is not None
    return server.services.registry.get("tiny-a").slots.busy


def _finish(events: Iterator[object]) -> tuple[str, Finished]:
    text, final = collect(events)  # type: ignore[arg-type]
    return text, final


def test_two_streams_at_once_go_to_different_replicas(replicas: list[RunningServer]) -> None:
    registry, backend = _served_by([s.v1 for s in replicas])
    first = backend.stream([Message("user", "one two")], LONG)
    second = backend.stream([Message("user", "three four")], LONG)
    try:
        assert isinstance(next(first), TextDelta) and isinstance(next(second), TextDelta)
        assert [_busy(s) for s in replicas] == [1, 1]
    finally:
        first.close()
        second.close()
        threads_end_within("remote:r", STOP_S)
        registry.close()


def test_a_conversations_later_turns_go_to_the_replica_of_its_first(replicas: list[RunningServer]) -> None:
    registry, backend = _served_by([s.v1 for s in replicas])
    opening = [Message("user", "hello what is the capital of france")]
    _, turn1 = _finish(backend.stream(opening, SHORT))
    own = next(s for s in replicas if s.v1 == turn1.extra["upstream"])
    other = next(s for s in replicas if s is not own)
    # least busy alone would now pick the other replica (chosen less recently), then (idle) the other again
    held = backend.stream([*opening, Message("assistant", "paris"), Message("user", "and spain")], LONG)
    try:
        assert isinstance(next(held), TextDelta)
        assert (_busy(own), _busy(other)) == (1, 0)
        _, turn2 = _finish(
            backend.stream([*opening, Message("assistant", "paris"), Message("user", "and italy")], SHORT)
        )
        assert turn2.reason is FinishReason.LENGTH and turn2.extra["upstream"] == own.v1
        _, stranger = _finish(backend.stream([Message("user", "a new conversation")], SHORT))
        assert stranger.extra["upstream"] == other.v1  # new conversations still go to the least busy
    finally:
        held.close()
        threads_end_within("remote:r", STOP_S)
        registry.close()


def test_a_replica_stopped_before_a_request_is_retried_on_another(
    replicas: list[RunningServer], tiny_model_dir: Path, tmp_path: Path
) -> None:
    doomed = _tiny_server(tiny_model_dir, tmp_path / "doomed")
    registry, backend = _served_by([doomed.v1, replicas[0].v1])  # a fresh chooser tries them in this order
    try:
        doomed.stop()  # it answered the load probe: still believed healthy
        text, final = _finish(backend.stream([Message("user", "hello")], SHORT))
        assert final.reason is FinishReason.LENGTH and final.completion_tokens == 6 and text
        assert final.extra["upstream"] == replicas[0].v1
        assert backend.replicas.down() == [doomed.v1]
        status = registry.status("r")
        assert status.usable, "one replica down is not the model down"
        assert "1 of 2 replicas down" in status.describe() and "127.0.0.1" not in status.describe()
    finally:
        registry.close()


def test_a_503_before_any_token_is_retried_on_another_replica(replicas: list[RunningServer]) -> None:
    app = FastAPI()
    app.get("/v1/models")(lambda: {"object": "list", "data": [{"id": "tiny-a", "object": "model"}]})
    app.post("/v1/chat/completions")(lambda: PlainTextResponse("no engine behind me", status_code=503))
    proxy = serve_app(app, name="no-engine")
    registry, backend = _served_by([proxy.v1, replicas[1].v1])
    try:
        _, final = _finish(backend.stream([Message("user", "hello")], SHORT))
        assert final.reason is FinishReason.LENGTH and final.extra["upstream"] == replicas[1].v1
    finally:
        registry.close()
        proxy.stop()


def test_a_replica_killed_mid_stream_ends_that_stream_and_the_next_goes_elsewhere(
    replicas: list[RunningServer], tiny_model_dir: Path, tmp_path: Path
) -> None:
    doomed = _tiny_server(tiny_model_dir, tmp_path / "doomed")
    registry, backend = _served_by([doomed.v1, replicas[0].v1])
    try:
        events = backend.stream([Message("user", "hello")], LONG)
        shown = [next(events)]
        assert isinstance(shown[0], TextDelta) and _busy(doomed) == 1
        doomed.stop()
        *rest, final = list(events)
        assert final.reason is FinishReason.ERROR, "the user saw text: the stream must end, not restart elsewhere"
        assert final.extra["upstream"] == doomed.v1 and final.completion_tokens < LONG.max_new_tokens
        assert all(isinstance(e, TextDelta) for e in rest)
        assert registry.status("r").usable, "the other replica serves: the model stays in battles"
        _, after = _finish(backend.stream([Message("user", "hello")], SHORT))
        assert after.reason is FinishReason.LENGTH and after.extra["upstream"] == replicas[0].v1
        assert registry.status("r").usable
    finally:
        registry.close()


def test_every_replica_down_fails_the_request_and_the_model_is_unhealthy(replicas: list[RunningServer]) -> None:
    app = FastAPI()
    app.get("/v1/models")(lambda: {"object": "list", "data": [{"id": "tiny-a", "object": "model"}]})
    lister = serve_app(app, name="lister")  # answers the load probe, then goes away
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    registry, backend = _served_by([lister.v1, f"http://127.0.0.1:{dead.getsockname()[1]}/v1"])
    try:
        lister.stop()
        assert registry.status("r").usable  # the dead one failed its probe, the lister answered it
        text, final = _finish(backend.stream([Message("user", "hello")], SHORT))
        assert final.reason is FinishReason.ERROR and text == ""
        assert registry.status("r").problem.startswith("upstream unreachable")
        assert not registry.status("r").usable
    finally:
        registry.close()
        dead.close()

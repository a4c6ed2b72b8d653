"""Remote models at their real width, and what a router in front of them reads: battles through the
arena's own handlers against a real HTTP server standing in for an OpenAI-compatible fleet, which
records every request's headers and body and how many are in flight at once.

The stand-in holds each reply after its first chunk until the test lets go, so that "how many at
once" is counted, never timed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.servers import wait_for
from webui.arena.handlers import Handlers
from webui.arena.rules import Owner, PaneSettings, Session
from webui.config import Settings
from webui.engine.registry import Registry
from webui.engine.remote_backend import SESSION_HEADERS
from webui.models.specs import parse_specs
from webui.records.events import ClientInfo, NullRecorder
from webui.services import Services

OWN = [PaneSettings(own_defaults=True)] * 2
BATTLES = 4
HOLD_S = 30.0  # the longest a held reply waits to be let go (a failing test must not hang)


class Fleet:
    """What the stand-in saw: each request's headers and body, and the most in flight per model."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.in_flight: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.release = threading.Event()

    def held(self, model: str) -> int:
        with self.lock:
            return self.in_flight.get(model, 0)


def _handler(fleet: Fleet) -> type[BaseHTTPRequestHandler]:
    class Upstream(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection closes: no chunking to write

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._send(200, "application/json", json.dumps({"data": [{"id": "a"}, {"id": "b"}]}).encode())

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            model = body["model"]
            with fleet.lock:
                fleet.requests.append({"headers": dict(self.headers.items()), "body": body})
                fleet.in_flight[model] = fleet.in_flight.get(model, 0) + 1
                fleet.most[model] = max(fleet.most.get(model, 0), fleet.in_flight[model])
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self._chunk({"choices": [{"delta": {"content": "hello "}}]})
                fleet.release.wait(HOLD_S)
                self._chunk({"choices": [{"delta": {"content": "there"}, "finish_reason": "stop"}]})
                self.wfile.write(b"data: [DONE]\n\n")
            finally:
                with fleet.lock:
                    fleet.in_flight[model] -= 1

        def _chunk(self, chunk: dict[str, Any]) -> None:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

        def _send(self, status: int, kind: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Upstream


@pytest.fixture
def fleet() -> Iterator[tuple[Fleet, str]]:
    state = Fleet()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="fake-fleet", daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}/v1"
    state.release.set()
    server.shutdown()
    server.server_close()


def _services(base_url: str | list[str], tmp_path: Path, **entry: Any) -> Services:
    specs = parse_specs(
        {
            "models": [
                {"name": f"remote-{m}", "backend": "openai", "base_url": base_url, "remote_model": m, **entry}
                for m in ("a", "b")
            ]
        }
    )
    settings = Settings(log_dir=tmp_path / "logs")
    registry = Registry(specs, settings)
    registry.start()
    assert registry.wait_idle(30)
    return Services(settings, registry, NullRecorder())


def _battle(handlers: Handlers, session: Session | None, text: str, who: int) -> Session:
    *_, last = handlers.send(session, "battle", text, OWN, Owner(f"tab-{who}"), ClientInfo(address=f"10.9.8.{who}"))
    return last


def _run_at_once(
    handlers: Handlers, sessions: list[Session | None], texts: list[str]
) -> tuple[list[Session | None], list[threading.Thread]]:
    """Each battle's turn in a thread of its own; the sessions fill in as they end."""
    done: list[Session | None] = [None] * len(texts)

    def one(i: int) -> None:
        done[i] = _battle(handlers, sessions[i], texts[i], i)

    threads = [threading.Thread(target=one, args=(i,), name=f"battle-{i}") for i in range(len(texts))]
    for thread in threads:
        thread.start()
    return done, threads


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(HOLD_S + 10)
        assert not thread.is_alive()


def _session_of(request: dict[str, Any]) -> str:
    headers = {k.lower(): v for k, v in request["headers"].items()}
    values = {headers.get(name.lower()) for name in SESSION_HEADERS}
    assert len(values) == 1, f"every session header carries the one id: {values}"
    (value,) = values
    assert value, "a request without a session id"
    return str(value)


def _opening(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["body"]["messages"] if m["role"] == "user")


def test_four_battles_reach_a_remote_at_once_each_conversation_with_its_own_id(
    fleet: tuple[Fleet, str], tmp_path: Path
) -> None:
    state, url = fleet
    services = _services(url, tmp_path)
    handlers = Handlers(services)
    try:
        assert services.registry.get("remote-a").slots.size == 16  # the default: a batching server's width
        sessions, threads = _run_at_once(handlers, [None] * BATTLES, [f"battle {i} opens" for i in range(BATTLES)])
        # Every battle has both panes streaming at once: 4 requests in flight to each model (2 before).
        wait_for(
            lambda: state.held("a") == BATTLES and state.held("b") == BATTLES,
            HOLD_S,
            f"not all {BATTLES} battles reached the remote at once: in flight {state.in_flight}",
        )
        state.release.set()
        _join(threads)
        assert state.most == {"a": BATTLES, "b": BATTLES}
        first = list(state.requests)
        assert len(first) == 2 * BATTLES
        ids = {(_opening(r), r["body"]["model"]): _session_of(r) for r in first}
        assert len(set(ids.values())) == 2 * BATTLES, "each battle pane is a conversation of its own"
        users = {_opening(r): r["body"]["user"] for r in first}
        assert len(set(users.values())) == BATTLES, "one user key per client, another for each other client"
        for request in first:
            sent = json.dumps(request)
            assert "10.9.8." not in sent and "tab-" not in sent, "a raw address or session went upstream"

        # A second turn of each battle carries its panes' ids again, and its client's user key.
        state.release.clear()
        _, threads = _run_at_once(handlers, sessions, [f"battle {i} goes on" for i in range(BATTLES)])
        wait_for(lambda: len(state.requests) == 4 * BATTLES, HOLD_S, "the second turns did not all arrive")
        state.release.set()
        _join(threads)
        for request in state.requests[2 * BATTLES :]:
            assert _session_of(request) == ids[(_opening(request), request["body"]["model"])]
            assert request["body"]["user"] == users[_opening(request)]
    finally:
        state.release.set()
        services.registry.close()


def test_an_entrys_own_width_is_kept_and_replicas_each_get_the_default(
    fleet: tuple[Fleet, str], tmp_path: Path
) -> None:
    _, url = fleet
    own = _services(url, tmp_path / "own", max_concurrency=3)
    try:
        assert own.registry.get("remote-a").slots.size == 3
    finally:
        own.registry.close()
    # The same server under two names stands in for two replicas: each batches its own 16.
    twice = _services([url, url.replace("127.0.0.1", "localhost")], tmp_path / "twice")
    try:
        assert twice.registry.get("remote-a").slots.size == 32
    finally:
        twice.registry.close()


def test_through_our_api_a_conversation_keeps_its_id_and_the_client_is_hashed(
    fleet: tuple[Fleet, str], tmp_path: Path
) -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from webui.api import install_api

    state, url = fleet
    state.release.set()  # nothing held: each answer comes at once
    services = _services(url, tmp_path)
    app = FastAPI()
    install_api(app, services)
    opening = {"role": "user", "content": "what is the capital of france"}
    turns = [
        [opening],
        [opening, {"role": "assistant", "content": "hello there"}, {"role": "user", "content": "and spain"}],
        [{"role": "user", "content": "another conversation"}],
    ]
    try:
        with TestClient(app) as client:
            for messages in turns:
                answer = client.post("/v1/chat/completions", json={"model": "remote-a", "messages": messages})
                assert answer.status_code == 200, answer.text
        first, second, other = state.requests
        assert _session_of(first) == _session_of(second) != _session_of(other)
        users = {r["body"]["user"] for r in state.requests}
        assert len(users) == 1 and "testclient" not in users.pop(), "one client, hashed"
    finally:
        services.registry.close()

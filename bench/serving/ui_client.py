"""A lean client of Gradio's queue protocol, reading the UI's updates the moment they arrive, as the
page in a browser does.

Why not gradio_client: its reader thread looks for new server messages every 50 ms when it has
none (`time.sleep(0.05)` in `gradio_client.utils.stream_sse_v1plus`), so every update reached the
bench 0-50 ms after the server sent it, and the first text and the end of every reply were charged
that wait. The page's own client reads its event stream as it comes. This one does what the page
does, in order:

1. `GET /config` once: the events (their numbers, inputs and outputs) and the components; the
   response also sets the session cookie that binds our session hashes (webui.server.sessions);
2. per turn, a fresh session that already exists before the timed message, as a page's does after
   its load event: an untimed call to the tab's Clear event creates it on the server;
3. `POST /gradio_api/queue/join` with the event's inputs (a gr.State input goes as null: the server
   holds it), then `GET /gradio_api/queue/data?session_hash=...`, an event stream whose
   `process_generating` messages carry the outputs: whole the first time, then as diffs, which are
   applied here with gradio_client's own `apply_diff`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from gradio_client.utils import apply_diff

API = "/gradio_api"


class UIProtocolError(RuntimeError):
    """The server answered the queue protocol with something this client does not expect."""


@dataclass(frozen=True)
class Event:
    """One event of the page: its number, and its input and output components (config entries)."""

    fn_index: int
    api_name: str
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]

    def chat_outputs(self) -> list[int]:
        return [i for i, c in enumerate(self.outputs) if c.get("type") == "chatbot"]


class UIClient:
    """Thread-safe: each turn has its own session hash; the connection pool and cookie are shared."""

    def __init__(self, url: str, timeout_s: float = 600.0) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )
        config = self.http.get(f"{self.url}/config")
        config.raise_for_status()
        self.config = config.json()
        components = {c["id"]: c for c in self.config["components"]}
        self.events: dict[str, Event] = {}
        for index, dep in enumerate(self.config["dependencies"]):
            name = dep.get("api_name")
            if name:
                self.events[f"/{name}"] = Event(
                    dep.get("id", index),
                    f"/{name}",
                    [components[i] for i in dep["inputs"]],
                    [components[i] for i in dep["outputs"]],
                )

    def event(self, api_name: str) -> Event | None:
        return self.events.get(api_name)

    def new_session(self, prepare: str | None = None) -> str:
        """A session hash of our own; `prepare` (an event with only a gr.State input, such as a tab's
        Clear) is called once, untimed, so that the server holds the session before it is timed."""
        session = secrets.token_hex(6)
        if prepare is not None:
            event = self.events[prepare]
            for _ in self.stream(event, [None] * len(event.inputs), session):
                pass
        return session

    def stream(self, event: Event, data: list[Any], session: str) -> Iterator[list[Any]]:
        """The outputs after each update of one call, as they arrive; the last is the result."""
        body = {
            "data": data,
            "fn_index": event.fn_index,
            "session_hash": session,
            "event_data": None,
            "trigger_id": None,
        }
        joined = self.http.post(f"{self.url}{API}/queue/join", json=body)
        if joined.status_code != 200:
            raise UIProtocolError(f"queue/join answered {joined.status_code}: {joined.text[:200]}")
        event_id = joined.json().get("event_id")
        outputs: list[Any] | None = None
        for message in self._messages(session, event_id):
            kind = message.get("msg")
            if kind == "process_generating":
                outputs = _apply(outputs, message["output"]["data"])
                yield outputs
            elif kind == "process_completed":
                if not message.get("success", True):
                    raise UIProtocolError(_error_text(message.get("output") or {}))
                yield message["output"]["data"]
                return
            elif kind == "unexpected_error":
                raise UIProtocolError(str(message.get("message")))
        raise UIProtocolError("the event stream closed before the call completed")

    def _messages(self, session: str, event_id: str | None) -> Iterator[dict[str, Any]]:
        """The session's event stream: the messages about this event (and those about none)."""
        with self.http.stream("GET", f"{self.url}{API}/queue/data", params={"session_hash": session}) as response:
            if response.status_code != 200:
                response.read()
                raise UIProtocolError(f"queue/data answered {response.status_code}: {response.text[:200]}")
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[len("data:") :])
                if message.get("msg") == "close_stream":
                    return
                if message.get("event_id") in (event_id, None):
                    yield message

    def close(self) -> None:
        self.http.close()


def _apply(outputs: list[Any] | None, data: list[Any]) -> list[Any]:
    """The first update carries every output; later ones a diff per output (sse_v3)."""
    if outputs is None:
        return list(data)
    return [apply_diff(old, diff) for old, diff in zip(outputs, data, strict=True)]


def _error_text(output: dict[str, Any]) -> str:
    return str(output.get("error") or output.get("title") or "the call failed")

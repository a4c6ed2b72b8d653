"""Local stand-ins for what the arena posts to: a webhook receiver and the Hugging Face Hub's API.

Both are real HTTP servers on a free loopback port, in a thread (no network). The Hub stand-in
answers what huggingface_hub's `HfApi.create_repo` and `create_commit` call (create, validate the
README's YAML, preupload, commit: every file as a "regular" inline upload) and keeps the files
of each commit, as the Hub's repository would.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Webhook:
    """What a receiver got, and how it answers: `status`, or hold the request until `release`."""

    url: str
    posts: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    status: int = 200
    fail_first: int = 0  # answer 500 to this many posts first
    hang: bool = False
    echo_path: bool = False  # a failure's reason phrase quotes the path, as some servers' do
    holding: threading.Event = field(default_factory=threading.Event)  # set while a request is held
    release: threading.Event = field(default_factory=threading.Event)


@contextmanager
def webhook(path: str = "/hook", **answers: Any) -> Iterator[Webhook]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.daemon_threads = True
    hook = Webhook(f"http://127.0.0.1:{server.server_address[1]}{path}", **answers)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hook.paths.append(self.path)
            if hook.hang:
                hook.holding.set()
                hook.release.wait(30)
            failing = len(hook.paths) <= hook.fail_first
            status = 500 if failing else hook.status
            if 200 <= status < 300:
                hook.posts.append(json.loads(body))
            self.send_response(status, f"no hook at {self.path}" if hook.echo_path and status >= 400 else None)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server.RequestHandlerClass = Handler
    thread = threading.Thread(target=server.serve_forever, name="webhook", daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        hook.release.set()
        server.shutdown()
        server.server_close()


@dataclass
class Hub:
    endpoint: str
    repos: dict[str, dict[str, bytes]] = field(default_factory=dict)  # "datasets/owner/name" -> path -> bytes
    commits: list[dict[str, Any]] = field(default_factory=list)  # each commit's header and paths
    created: list[dict[str, Any]] = field(default_factory=list)
    tokens: set[str] = field(default_factory=set)  # the bearer tokens seen


class HubHandler(BaseHTTPRequestHandler):
    """One request to the stand-in Hub (`state`: set on a subclass per server)."""

    protocol_version = "HTTP/1.1"
    state: Hub

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.state.tokens.add(self.headers.get("Authorization", ""))
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        if parts[:3] == ["api", "repos", "create"]:
            return self._create(json.loads(body))
        if parts[:2] == ["api", "validate-yaml"]:
            return self._answer(200, {"errors": [], "warnings": []})
        if len(parts) == 6 and parts[0] == "api" and parts[4] in ("preupload", "commit"):
            repo = "/".join(parts[1:4])
            if repo not in self.state.repos:
                return self._answer(404, {"error": "Repository not found"})
            return self._preupload(body) if parts[4] == "preupload" else self._commit(repo, body)
        return self._answer(404, {"error": f"not in the stand-in: {self.path}"})

    def _create(self, payload: dict[str, Any]) -> None:
        self.state.created.append(payload)
        repo = f"{payload['type']}s/{payload['organization']}/{payload['name']}"
        if repo in self.state.repos:
            return self._answer(409, {"error": "You already created this repo"})
        self.state.repos[repo] = {}
        return self._answer(200, {"url": f"{self.state.endpoint}/{repo}", "name": payload["name"]})

    def _preupload(self, body: bytes) -> None:
        files = json.loads(body)["files"]  # every file inline: no LFS or Xet storage to stand in for
        self._answer(
            200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]}
        )

    def _commit(self, repo: str, body: bytes) -> None:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next(line["value"] for line in lines if line["key"] == "header")
        paths = []
        for line in lines:
            if line["key"] == "file":
                value = line["value"]
                self.state.repos[repo][value["path"]] = base64.b64decode(value["content"])
                paths.append(value["path"])
        self.state.commits.append({"header": header, "paths": paths})
        oid = f"{len(self.state.commits):040x}"
        self._answer(200, {"commitUrl": f"{self.state.endpoint}/{repo}/commit/{oid}", "commitOid": oid})

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def hub() -> Iterator[Hub]:
    """A minimal Hub: POST /api/repos/create, /api/validate-yaml, /api/{type}s/{repo}/preupload/{rev},
    /api/{type}s/{repo}/commit/{rev}; anything else is a 404."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.daemon_threads = True
    state = Hub(f"http://127.0.0.1:{server.server_address[1]}")
    server.RequestHandlerClass = type("Handler", (HubHandler,), {"state": state})
    thread = threading.Thread(target=server.serve_forever, name="hub-standin", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()

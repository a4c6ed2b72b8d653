"""The server's own access log (uvicorn's, on stdout) keeps client addresses and
session hashes the way the JSON Lines logs do (`--ip-logging`), not raw.

The server is built by `webui.server.app.build_server`, the function `serve()` runs, on a free
loopback port; the access log lines are caught by a handler on uvicorn's access logger, after
every filter the app installed on it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port, wait_for
from webui.config import Settings
from webui.server.app import build_server, create_app
from webui.services import build_services

HASH = "abcdef123456secret"  # a session hash as the page picks it
FILE_HASH = "ab" * 32  # the folder of a file in Gradio's cache: its URL alone downloads it (an export)


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def access_lines(request: pytest.FixtureRequest, tiny_models_file: Path, tmp_path: Path) -> Iterator[list[str]]:
    settings = Settings(
        models_file=tiny_models_file,
        log_dir=tmp_path / "logs",
        cache_dir=tmp_path / "cache",
        host="127.0.0.1",
        port=free_port(),
        ip_logging=request.param,
        ip_hash_secret="k" * 32,
    )
    services = build_services(settings)
    server = build_server(create_app(services), settings)
    lines = Lines()
    logger = logging.getLogger("uvicorn.access")
    logger.addHandler(lines)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), 30, "server did not start")
        url = f"http://127.0.0.1:{settings.port}"
        with httpx.Client(base_url=url, timeout=10) as http:
            for path, params in (
                ("/healthz", {}),
                ("/gradio_api/queue/data", {"session_hash": HASH}),
                (f"/gradio_api/heartbeat/{HASH}", {}),
                ("/gradio_api/deep_link", {"session_hash": HASH}),
                (f"/gradio_api/call/battle_send/{HASH}", {}),
                (f"/gradio_api/file=/tmp/gradio/{FILE_HASH}/battles.jsonl", {}),
            ):
                try:
                    with http.stream("GET", path, params=params):
                        pass  # only the line in the log matters, not the answer
                except httpx.HTTPError:
                    pass
        wait_for(lambda: len(lines.lines) >= 6, 10, f"access log lines missing: {lines.lines}")
        yield lines.lines
    finally:
        server.should_exit = True
        thread.join(15)
        logger.removeHandler(lines)
        services.registry.close()


@pytest.mark.parametrize("access_lines", ["hash"], indirect=True)
def test_hash_mode_hashes_addresses_and_sessions(access_lines: list[str]) -> None:
    text = "\n".join(access_lines)
    assert "127.0.0.1" not in text and HASH not in text, text
    assert all(line.startswith("h:") for line in access_lines), text
    assert "/gradio_api/heartbeat/h:" in text and "session_hash=h:" in text, text
    assert "/gradio_api/call/battle_send/h:" in text, text
    assert FILE_HASH not in text and "/tmp/gradio/h:" in text, text
    assert "GET /healthz" in text  # the rest of the line is as uvicorn writes it


@pytest.mark.parametrize("access_lines", ["none"], indirect=True)
def test_none_mode_keeps_neither(access_lines: list[str]) -> None:
    text = "\n".join(access_lines)
    assert "127.0.0.1" not in text and HASH not in text and FILE_HASH not in text and "h:" not in text, text
    assert all(line.startswith("- ") for line in access_lines), text


@pytest.mark.parametrize("access_lines", ["raw"], indirect=True)
def test_raw_mode_keeps_the_address_and_still_hashes_sessions(access_lines: list[str]) -> None:
    """As in the records: raw keeps addresses, sessions are hashed in every mode but none."""
    text = "\n".join(access_lines)
    assert all(line.startswith("127.0.0.1:") for line in access_lines), text
    assert HASH not in text and FILE_HASH not in text, text

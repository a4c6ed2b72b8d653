"""A stop of the server `serve()` runs (webui.server.app.build_server) while an idle page's heartbeat
stream and an API stream are open: both end by themselves (the API reply stopped in the model,
with its [DONE]), the server is gone within --shutdown-grace-s and a margin, and uvicorn never had to cut a
connection off. Before, either one held the stop up for as long as it lasted (issue 37)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port, wait_for
from tests.tiny import tiny_models
from webui.config import Settings
from webui.server.app import build_server, create_app
from webui.services import build_services

GRACE_S = 5.0
HASH = "shutdown0test"
LONG = {"name": "long", "context_length": 4096, "sampling": {"ignore_eos": True, "max_new_tokens": 3000}}


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def uvicorn_log() -> Iterator[Lines]:
    lines = Lines()
    logger = logging.getLogger("uvicorn.error")  # uvicorn's own loggers do not reach the root (caplog)
    logger.addHandler(lines)
    yield lines
    logger.removeHandler(lines)


def test_a_stop_ends_an_api_stream_and_a_heartbeat_and_returns_in_time(
    tiny_model_dir: Path, tmp_path: Path, uvicorn_log: Lines
) -> None:
    models = tiny_models(tmp_path, tiny_model_dir, [LONG])
    settings = Settings(
        models_file=models, log_dir=tmp_path / "logs", cache_dir=tmp_path / "cache", port=free_port()
    ).replace(shutdown_grace_s=GRACE_S)
    services = build_services(settings)
    services.registry.start()
    assert services.registry.wait_idle(120), "the model did not load"
    server = build_server(create_app(services), settings)
    thread = threading.Thread(target=server.run, name="shutdown-test-server", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{settings.port}"
    streams: dict[str, list[str]] = {"api": [], "heartbeat": []}
    readers: list[threading.Thread] = []
    try:
        wait_for(lambda: server.started or not thread.is_alive(), 30, "the server did not start")
        page = httpx.Client(base_url=url, timeout=httpx.Timeout(60, connect=5))
        page.get("/")  # the session cookie an open page has
        body = {"model": "long", "stream": True, "messages": [{"role": "user", "content": "hello"}]}
        for name, request in (
            ("heartbeat", page.build_request("GET", f"/gradio_api/heartbeat/{HASH}")),
            ("api", httpx.Request("POST", f"{url}/v1/chat/completions", json=body)),
        ):
            readers.append(threading.Thread(target=_read, args=(page, request, streams[name]), daemon=True))
            readers[-1].start()
        wait_for(lambda: len(streams["api"]) > 3 and streams["heartbeat"], 60, f"no streams: {streams}")

        server.should_exit = True  # what uvicorn's handler of SIGTERM and Ctrl-C does
        thread.join(GRACE_S + 10)  # what this test is about: open streams no longer hold the server up
        assert not thread.is_alive(), f"the server still runs {GRACE_S + 10:.0f} s after the stop"
        for reader in readers:
            reader.join(10)
        assert streams["api"][-2:] == ["data: [DONE]", "(ended)"], streams["api"][-3:]  # ended, not cut off
        assert len(streams["api"]) < 3000, "the reply ran to its end: the stop did not reach the model"
        assert streams["heartbeat"][-1] == "(ended)", streams["heartbeat"][-3:]
        assert not [line for line in uvicorn_log.lines if "timeout graceful shutdown exceeded" in line]
    finally:
        server.should_exit = True
        thread.join(15)
        services.registry.close()


def _read(client: httpx.Client, request: httpx.Request, lines: list[str]) -> None:
    """The stream's non-empty lines, then "(ended)" when the server ended it, or the error."""
    try:
        response = client.send(request, stream=True)
        lines.extend(line for line in response.iter_lines() if line)
        lines.append("(ended)")
    except httpx.HTTPError as exc:
        lines.append(f"(error: {exc!r})")

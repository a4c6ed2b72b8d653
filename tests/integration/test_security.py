"""Safe server defaults, probed over HTTP on a real server: file routes, monitoring, body size,
queue bounds, error details, health.

The logs and caches are placed *inside* Gradio's upload folder, which Gradio serves by default, so
the refusals below come from our blocked paths and not from the files merely being elsewhere; a
control file beside them is served, which shows the probes reach a route that does serve files.
"""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path
from urllib.parse import quote

import gradio as gr
import httpx
import pytest
from gradio.utils import get_upload_folder

from tests.apps import start_app
from tests.servers import RunningServer
from webui.config import Settings

SECRET = "vote-secret-" + secrets.token_hex(4)


@pytest.fixture(scope="module")
def exposed_dirs():
    base = Path(get_upload_folder()) / f"arena-test-{secrets.token_hex(6)}"
    logs, cache = base / "logs", base / "cache"
    for folder in (logs, cache):
        folder.mkdir(parents=True)
    (logs / "2026-11-02-conv.json").write_text(f'{{"type": "leftvote", "text": "{SECRET}"}}\n')
    (cache / "weights.safetensors").write_text(SECRET)
    (base / "control.txt").write_text("served")
    yield base
    import shutil

    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def arena(tiny_model_dir, tmp_path_factory, exposed_dirs):
    from tests.tiny import THREE, tiny_models

    models = tiny_models(tmp_path_factory.mktemp("models"), tiny_model_dir, THREE)
    settings = Settings(
        models_file=models,
        log_dir=exposed_dirs / "logs",
        cache_dir=exposed_dirs / "cache",
        queue_timeout_s=5.0,
        max_request_mb=0.05,
    )
    running = start_app(settings)
    yield running
    running.stop()


def _file_probes(base: Path) -> dict[str, str]:
    log_file = base / "logs" / "2026-11-02-conv.json"
    return {
        "etc-passwd": "/gradio_api/file=/etc/passwd",
        "dot-dot": "/gradio_api/file=../../../../../../etc/passwd",
        "encoded-dot-dot": "/gradio_api/file=" + quote("../../../../../../etc/passwd", safe=""),
        "log-absolute": f"/gradio_api/file={log_file}",
        "log-dot-dot": f"/gradio_api/file={base}/cache/../logs/{log_file.name}",
        "log-case": f"/gradio_api/file={str(log_file).upper()}" if str(log_file).upper() != str(log_file) else "",
        "log-dir": f"/gradio_api/file={base / 'logs'}",
        "cache": f"/gradio_api/file={base / 'cache' / 'weights.safetensors'}",
        "legacy-route": f"/file={log_file}",
        "legacy-slash-route": f"/gradio_api/file/{log_file}",
        "remote-url": "/gradio_api/file=http://127.0.0.1:9/secret",
        "remote-url-https": "/gradio_api/file=https://example.com/x.png",
    }


def test_control_file_in_the_upload_folder_is_served(arena: RunningServer, exposed_dirs: Path) -> None:
    response = httpx.get(f"{arena.url}/gradio_api/file={exposed_dirs / 'control.txt'}")
    assert response.status_code == 200 and response.text == "served"


@pytest.mark.parametrize("probe", list(_file_probes(Path("/x"))))
def test_file_probes_are_refused(arena: RunningServer, exposed_dirs: Path, probe: str) -> None:
    path = _file_probes(exposed_dirs)[probe]
    if not path:
        pytest.skip("case-insensitive probe not applicable")
    response = httpx.get(arena.url + path)
    assert response.status_code in (403, 404), f"{probe}: {response.status_code} {response.text[:200]}"
    assert SECRET not in response.text and "root:" not in response.text
    if probe.startswith("remote-url"):  # refused by us before Gradio would fetch it
        assert response.json() == {"error": "File not allowed."}


def test_monitoring_endpoints_are_off(arena: RunningServer) -> None:
    for path in ("/monitoring", "/monitoring/summary", "/gradio_api/monitoring/summary"):
        response = httpx.get(arena.url + path)
        assert response.status_code in (403, 404), f"{path}: {response.status_code}"


def test_healthz_reports_every_model(arena: RunningServer) -> None:
    body = httpx.get(f"{arena.url}/healthz").json()
    assert body["status"] == "ok"
    assert set(body["models"]) == set(arena.services.registry.names())
    assert {m["state"] for m in body["models"].values()} == {"ready"}
    assert {m["problem"] for m in body["models"].values()} == {None}  # a remote that went down says why here


def test_oversized_bodies_are_refused_before_they_are_read(arena: RunningServer) -> None:
    big = b"x" * 100_000  # max_request_mb=0.05 -> 52,428 bytes
    response = httpx.post(
        f"{arena.url}/gradio_api/queue/join", content=big, headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json() == {"error": "Request too large: at most 0.05 MB."}

    def chunks():
        for _ in range(10):
            yield b"y" * 10_000

    chunked = httpx.post(
        f"{arena.url}/gradio_api/queue/join",
        content=chunks(),  # no Content-Length
        headers={"content-type": "application/json"},
    )
    assert chunked.status_code == 413
    small = httpx.post(f"{arena.url}/gradio_api/queue/join", json={"data": [], "fn_index": 99999, "session_hash": "s"})
    assert small.status_code != 413


def test_errors_are_generic_and_the_queue_is_bounded(arena: RunningServer) -> None:
    blocks = arena.app.state.blocks
    assert blocks.show_error is False
    assert blocks.enable_monitoring is False
    assert blocks.api_open is False
    # the three tiny entries are variants of one set of weights: 1 x max_concurrency 2
    assert blocks._queue.default_concurrency_limit == 2
    assert blocks._queue.max_size == 8


def test_full_queue_is_refused_at_once(tiny_model_dir, tmp_path, monkeypatch) -> None:
    """A UI whose one event blocks: with room for one waiting event, the third request gets 503 at
    once (the browser shows Gradio's "This application is currently busy. Please try again.")."""
    from tests.tiny import THREE, tiny_models

    release = threading.Event()

    def slow(text: str) -> str:
        release.wait(30)
        return text

    def build_ui(services, board=None):  # the app hands over the leaderboard view it keeps
        with gr.Blocks() as blocks:
            box = gr.Textbox()
            box.submit(slow, box, box, api_name="slow")
        return blocks

    monkeypatch.setattr("webui.ui.build_ui", build_ui)
    models = tiny_models(tmp_path, tiny_model_dir, THREE)
    settings = Settings(
        models_file=models, log_dir=tmp_path / "logs", cache_dir=tmp_path / "cache", queue_size=1, max_concurrency=1
    )
    running = start_app(settings, load=False)
    http = httpx.Client(base_url=running.url, timeout=10)
    try:
        http.get("/")  # the page's session cookie: a request naming a session needs it (test_session_binding.py)
        join = "/gradio_api/queue/join"
        fn_index = next(iter(running.app.state.blocks.fns))
        codes = []
        for i in range(2):
            r = http.post(join, json={"data": ["hi"], "fn_index": fn_index, "session_hash": f"s{i}"})
            codes.append(r.status_code)
            if i == 0:  # wait until the first one is running, so that the second one waits
                queue = running.app.state.blocks._queue
                deadline = time.monotonic() + 10
                while not queue.active_jobs or not any(queue.active_jobs):
                    assert time.monotonic() < deadline, "first event never started"
                    time.sleep(0.02)
        full = http.post(join, json={"data": ["hi"], "fn_index": fn_index, "session_hash": "s9"})
        assert codes == [200, 200]
        assert full.status_code == 503
        assert "Queue is full" in full.json()["detail"]
    finally:
        release.set()
        http.close()
        running.stop()


def test_uploads_are_off(arena: RunningServer) -> None:
    """The app has no upload component, so /gradio_api/upload (up to 2 MB from anyone, served back
    by /file=) is refused, and nothing lands in Gradio's upload folder."""
    marker = f"uploaded-{secrets.token_hex(6)}"
    before = {p.name for p in Path(get_upload_folder()).rglob("*")}
    for path in ("/gradio_api/upload", "/gradio_api/upload?upload_id=x"):
        response = httpx.post(arena.url + path, files={"files": (f"{marker}.txt", marker.encode())})
        assert response.status_code == 403, f"{path}: {response.status_code} {response.text[:200]}"
        assert response.json() == {"error": "Uploads are off: this app has no upload component."}
    after = {p.name for p in Path(get_upload_folder()).rglob("*")}
    assert not [name for name in after - before if marker in name]
    progress = httpx.get(arena.url + "/gradio_api/upload_progress", params={"upload_id": "x"})
    assert progress.status_code == 403

"""--share: the link is opened with Gradio's own tunnel helper once the server listens; without
internet (as here) the app keeps serving and says clearly why there is no link."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port, wait_for
from webui.server.share import ShareError, local_target, open_share_link, share_when_ready

ROOT = Path(__file__).resolve().parents[2]


def _blocks() -> types.SimpleNamespace:
    return types.SimpleNamespace(share_token="tok", share=False, share_url=None)


def test_tunnel_address_becomes_an_https_link_and_marks_the_blocks_shared() -> None:
    calls = []

    def tunnel(host, port, token, server, cert):
        calls.append((host, port, token))
        return "http://0123abcd.gradio.live"

    blocks = _blocks()
    assert open_share_link(blocks, "0.0.0.0", 7861, tunnel) == "https://0123abcd.gradio.live"
    assert calls == [("127.0.0.1", 7861, "tok")]  # a wildcard listen address is reached on loopback
    assert blocks.share and blocks.share_url == "https://0123abcd.gradio.live"
    assert local_target("192.168.1.5") == "192.168.1.5"


def test_unreachable_share_service_gives_a_clear_message(monkeypatch) -> None:
    """The real gradio.networking.setup_tunnel, pointed at a closed local port instead of
    api.gradio.app so that the outcome does not depend on this machine's network."""
    import gradio.networking

    closed = free_port()
    monkeypatch.setattr(gradio.networking, "GRADIO_API_SERVER", f"http://127.0.0.1:{closed}/v3/tunnel-request")
    monkeypatch.setattr(gradio.networking, "GRADIO_SHARE_SERVER_ADDRESS", None)
    blocks = _blocks()
    with pytest.raises(ShareError) as caught:
        open_share_link(blocks, "127.0.0.1", 7860)
    message = str(caught.value)
    assert message.startswith("Could not create a share link (Could not get share link from Gradio API Server.")
    assert "--share needs internet access" in message
    assert "still running locally at http://127.0.0.1:7860" in message
    assert not blocks.share


def test_share_is_skipped_on_a_space(caplog) -> None:
    assert share_when_ready(object(), _blocks(), "0.0.0.0", 7860, on_space=True) is None
    assert "ignored on a Hugging Face Space" in caplog.text


class StartingServer:
    """A uvicorn.Server stand-in that counts how often `started` is read."""

    def __init__(self) -> None:
        self.up, self.should_exit, self.looks = False, False, 0

    @property
    def started(self) -> bool:
        self.looks += 1
        return self.up


def test_share_waits_for_the_server_before_opening(caplog) -> None:
    server = StartingServer()
    opened = []

    def tunnel(*args):
        assert server.up, "tunnel opened before the server listened"
        opened.append(args)
        return "https://x.gradio.live"

    caplog.set_level(logging.INFO, logger="webui.server.share")
    thread = share_when_ready(server, _blocks(), "127.0.0.1", 7860, tunnel=tunnel)
    # Nothing may happen while the server is not up: let the thread find it down a few times.
    wait_for(lambda: server.looks >= 3, 10, "the share thread never looked at the server")
    assert not opened
    server.up = True
    thread.join(10)
    assert opened and "public share link: https://x.gradio.live" in caplog.text


def test_app_py_share_without_internet_keeps_serving(tiny_models_file: Path, tmp_path: Path) -> None:
    """`python app.py --share` end to end. The share service address is a closed local port and
    HF_HOME is empty (no cached tunnel client), so this fails the same way with or without a network."""
    port = free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "HF_HOME": str(tmp_path / "hf"),
        "GRADIO_SHARE_SERVER_ADDRESS": f"127.0.0.1:{free_port()}",
        "PYTHONUNBUFFERED": "1",
    }
    log = tmp_path / "app.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "app.py"),
                "--share",
                "--no-preload",
                "--port",
                str(port),
                "--models",
                str(tiny_models_file),
                "--log-dir",
                str(tmp_path / "logs"),
                "--cache-dir",
                str(tmp_path / "cache"),
            ],
            cwd=tmp_path,
            env={**env, "PYTHONPATH": str(ROOT)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 90
            while "Could not create a share link" not in log.read_text(errors="replace"):
                assert proc.poll() is None, f"app.py exited:\n{log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"no share outcome logged:\n{log.read_text()[-3000:]}"
                time.sleep(0.2)
            text = log.read_text()
            assert "--share needs internet access" in text
            assert f"still running locally at http://127.0.0.1:{port}" in text
            assert "makes the app public to anyone with the link, without a login" in text
            health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
            assert health.status_code == 200 and set(health.json()["models"]) == {"tiny-a", "tiny-b", "tiny-fschat"}
        finally:
            proc.terminate()
            proc.wait(20)

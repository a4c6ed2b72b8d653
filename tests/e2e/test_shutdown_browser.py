"""A stop (SIGTERM) of the real server while a page is open in Chromium and two replies stream to it:
the process is gone within --shutdown-grace-s and a margin, the replies end as stopped (in the log,
with their text so far), the vote the page saw acknowledged is on disk, and uvicorn never had to cut
a connection off: the open streams ended by themselves. Before, the open tab held the server up for
as long as it stayed open (issue 37)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.servers import free_port, wait_models_ready
from tests.tiny import tiny_models

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
GRACE_S = 5.0
# Two long replies (end-of-sequence ignored, 3000 tokens), so that they still stream at the stop.
LONG = {"context_length": 4096, "sampling": {"ignore_eos": True, "max_new_tokens": 3000}}
ENTRIES = ({"name": "long-a", **LONG}, {"name": "long-b", "dtype": "fp32", **LONG})


@pytest.fixture
def app(tiny_model_dir: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    models = tiny_models(tmp_path, tiny_model_dir, ENTRIES)
    port = free_port()
    output = tmp_path / "server.log"
    # PYTHONPATH: the package this test imports, whichever checkout installed the environment
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "webui", "--port", str(port), "--models", str(models)]
    command += ["--log-dir", str(tmp_path / "logs"), "--shutdown-grace-s", str(GRACE_S)]
    with output.open("wb") as out:
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_models_ready("the app", proc, port, output)
        yield proc, port, tmp_path
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_stop_with_an_open_page_ends_its_streams_and_exits(
    app: tuple[subprocess.Popen[bytes], int, Path], browser: Browser
) -> None:
    proc, port, tmp_path = app
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(f"http://127.0.0.1:{port}/?tab=side_by_side")
    expect(page.locator("#sbs-chat-a")).to_contain_text("Model A: long-a", timeout=20_000)
    expect(page.locator("#sbs-chat-b")).to_contain_text("Model B: long-b")

    # A vote the page sees acknowledged (after a Stop: votes on stopped replies are allowed).
    _send_and_wait_for_streams(page, "hello")
    page.keyboard.press("Escape")
    for pane in ("a", "b"):
        expect(page.locator(f"#sbs-chat-{pane}")).to_contain_text("stopped", timeout=15_000)
    page.locator("#sbs-vote-a").click()
    expect(page.locator("#sbs-vote-a")).to_be_disabled(timeout=10_000)  # the server has it

    _send_and_wait_for_streams(page, "hello again")
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(GRACE_S + 10)  # what this test is about: the open page no longer holds the server
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server still runs {GRACE_S + 10:.0f} s after SIGTERM with a page open")
    output = (tmp_path / "server.log").read_text()
    assert code == 0, output[-3000:]
    assert "stopping: 1 generation(s) stopped" in output, output[-3000:]
    assert "timeout graceful shutdown exceeded" not in output, "uvicorn had to cut a connection off"
    assert "Traceback" not in output, output[-3000:]

    records = [json.loads(line) for day in (tmp_path / "logs").glob("*-conv.json") for line in day.open()]
    votes = [r for r in records if r["type"] == "leftvote"]
    assert len(votes) == 1, "the acknowledged vote is not on disk"
    last = [r for r in records if r["type"] == "chat" and r["state"]["messages"][-2][1] == "hello again"]
    assert sorted(r["model"] for r in last) == ["long-a", "long-b"], "a stopped reply was not recorded"
    for record in last:
        assert record["finish_reason"] == "cancelled", record["finish_reason"]
        assert record["state"]["messages"][-1][1], "the text so far is kept"
    page.close()


def _send_and_wait_for_streams(page: Page, text: str) -> None:
    box = page.locator("#sbs-input textarea")
    expect(box).to_be_editable()
    box.fill(text)
    box.press("Enter")
    for pane in ("a", "b"):  # both replies stream (the cursor is on screen)
        expect(page.locator(f"#sbs-chat-{pane} .bot").last).to_contain_text("▌", timeout=20_000)

"""The issue's "done when", on the real demo models (SmolLM2 and Gemma 3 270M) through gradio_client:
a battle streams in both panes at once, Stop stops both models, and the vote reveals the names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gradio_client import Client

from tests.uiapp import RunningUI, generate_threads, serve, wait_for
from webui.config import Settings
from webui.engine.registry import Registry
from webui.records.events import NullRecorder
from webui.services import build_services

pytestmark = pytest.mark.demo
DEMO = ("SmolLM2-135M-Instruct", "Gemma-3-270M (base)")


@pytest.fixture(scope="module")
def demo_ui(demo_registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> RunningUI:
    root = tmp_path_factory.mktemp("ui-demo")
    settings = Settings(
        log_dir=root / "logs", cache_dir=demo_registry.settings.cache_dir, rate_messages=0, rate_votes=0
    )
    running = serve(build_services(settings, registry=demo_registry, recorder=NullRecorder()))
    yield running
    running.server.should_exit = True
    running.thread.join(15)


def latest(frames: list[Any], i: int) -> list:
    """Pane i's messages as they stand: the newest update that carried them, as a bare value while
    the replies stream or in an update dict (the others left the pane unchanged)."""
    for frame in reversed(frames):
        if isinstance(frame[i], list):
            return frame[i]
        if isinstance(frame[i], dict) and "value" in frame[i]:
            return frame[i]["value"]
    return []


def text(update: dict | list) -> str:
    value = (update.get("value") if isinstance(update, dict) else update) or []
    return json.dumps(value[-1]["content"], ensure_ascii=False) if value else ""


def streaming_both(frames: list[Any]) -> bool:
    panes = [latest(frames, i) for i in (0, 1)]
    return all(len(text(p)) > 40 and "▌" in text(p) for p in panes)


def test_demo_battle_streams_both_panes_at_once_stops_and_reveals(demo_ui: RunningUI, tmp_path: Path) -> None:
    client = Client(demo_ui.url, verbose=False, download_files=False)
    job = client.submit("Tell me a long story about a lighthouse keeper and the sea.", api_name="/battle_send")
    # Both replies are on their way at the same moment: each pane shows text and the cursor.
    wait_for(
        lambda: job.outputs() and streaming_both(job.outputs()), 120, "the two panes never streamed at the same time"
    )
    assert len(generate_threads()) == 2
    stopped = client.predict(api_name="/battle_stop")
    job.result(timeout=60)
    wait_for(lambda: not generate_threads(), 15, "Stop left a model generating")
    assert all("stopped" in text(stopped[i]) for i in (0, 1)), "both partial replies stay, marked as stopped"
    assert not any(name in json.dumps(job.outputs()) for name in DEMO)
    assert "leaderboard leaves out" in stopped[3], "the voter is told the vote will not count"

    revealed = client.predict(api_name="/battle_vote_a")
    assert all(name in revealed[2] for name in DEMO), "the vote reveals both names"
    client.close()

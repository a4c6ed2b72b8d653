"""The bench's UI path (bench/serving/ui_client.py, bench/serving/gradio_path.py) against the real app: it speaks
Gradio's queue protocol as the page does, so a change in the app or in Gradio that breaks it must
fail here rather than turn into missing figures in a bench run."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.serving.gradio_path import DIRECT, SIDE_BY_SIDE, GradioDriver
from bench.serving.paths import Request
from tests.uiapp import RunningUI, start_ui, ui_settings


@pytest.fixture(scope="module")
def ui(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> RunningUI:
    running = start_ui(ui_settings(tmp_path_factory.mktemp("ui-bench"), tiny_model_dir))
    yield running
    running.stop()


def test_a_direct_chat_turn_streams_to_its_statistics(ui: RunningUI) -> None:
    driver = GradioDriver(ui.url)
    sample = driver.sample(Request("long-a", "hello", 40))  # long-a ignores EOS: exactly 40 tokens
    assert sample.error is None and sample.tokens == 40 and sample.counted_by == "ui-stats"
    assert sample.text and "▌" not in sample.text and "tokens" not in sample.text, "the reply, without cursor or stats"
    assert 0 < sample.ttft_s <= sample.chunk_times[-1] <= sample.total_s
    assert sample.chunk_times == sorted(sample.chunk_times) and len(sample.chunk_times) >= 2, "it streamed"
    assert sample.server_ttft_s is not None
    assert ui.recorder.chats[-1].conversation.messages[0] == ("user", "hello")


def test_each_turn_is_a_new_conversation_in_a_session_of_its_own(ui: RunningUI) -> None:
    driver = GradioDriver(ui.url)
    before = len(ui.recorder.chats)
    for _ in range(2):
        assert driver.sample(Request("long-b", "again", 8)).tokens == 8
    first, second = ui.recorder.chats[before:]
    assert len(second.conversation.messages) == 2, "the second turn did not continue the first"
    assert first.conversation.conv_id != second.conversation.conv_id


def test_side_by_side_turn_times_each_pane(ui: RunningUI) -> None:
    wall, panes = GradioDriver(ui.url).turn(SIDE_BY_SIDE, ["long-a", "long-b"], Request("long-a", "hi", 12))
    assert [p.tokens for p in panes] == [12, 12]
    assert all(p.ttft_s is not None and p.end_s is not None and p.end_s <= wall for p in panes)


def test_a_refusal_is_an_error_not_a_reply(ui: RunningUI) -> None:
    long = "x" * (ui.services.settings.max_input_chars + 1)
    sample = GradioDriver(ui.url).sample(Request("long-a", long, 4))
    assert sample.error is not None and "refused" in sample.error and "characters" in sample.error
    with pytest.raises(RuntimeError, match="refused"):
        GradioDriver(ui.url).turn(DIRECT, ["no-such-model"], Request("x", "hi", 4))

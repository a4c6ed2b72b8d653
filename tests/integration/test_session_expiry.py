"""Gradio keeps a copy of every component's config for each session (docs/deploy.md, "Sessions")
for as long as the process lives; the app removes sessions idle for
`--session-idle-min` (and their binding to a browser secret), so memory comes back at idle.
A session still in use stays."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from gradio_client import Client

from tests.uiapp import RunningUI, start_ui, ui_settings, wait_for

IDLE_MIN = 0.05  # 3 s


@pytest.fixture(scope="module")
def ui(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningUI]:
    settings = replace(ui_settings(tmp_path_factory.mktemp("expiry"), tiny_model_dir), session_idle_min=IDLE_MIN)
    running = start_ui(settings)
    yield running
    running.stop()


def test_idle_sessions_are_removed_and_busy_ones_kept(ui: RunningUI) -> None:
    holder = ui.app.state.blocks.state_holder
    book = ui.app.state.sessions
    idle = [Client(ui.url, verbose=False, download_files=False) for _ in range(3)]
    busy = Client(ui.url, verbose=False, download_files=False)
    try:
        for client in [*idle, busy]:
            client.predict(api_name="/direct_clear")
        hashes = [c.session_hash for c in idle]
        assert all(h in holder.session_data for h in [*hashes, busy.session_hash])
        assert all(h in book for h in hashes)
        deadline = time.monotonic() + 30
        while any(h in holder.session_data for h in hashes):
            assert time.monotonic() < deadline, "idle sessions were never removed"
            busy.predict(api_name="/direct_clear")  # in use all along
            time.sleep(0.3)
        assert not any(h in book for h in hashes), "their bindings went with them"
        assert busy.session_hash in holder.session_data and busy.session_hash in book
        # a removed session's page that comes back starts afresh (same cookie, new state)
        idle[0].predict(api_name="/direct_clear")
        assert idle[0].session_hash in holder.session_data
    finally:
        for client in [*idle, busy]:
            client.close()


def test_the_sweep_leaves_nothing_when_everything_is_idle(ui: RunningUI) -> None:
    holder = ui.app.state.blocks.state_holder
    client = Client(ui.url, verbose=False, download_files=False)
    client.predict(api_name="/direct_clear")
    client.close()
    wait_for(
        lambda: not holder.session_data and not len(ui.app.state.sessions),
        30,
        f"sessions left: {list(holder.session_data)}",
    )

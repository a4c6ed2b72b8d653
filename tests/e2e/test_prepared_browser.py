"""A replay's queued pair as a battle in a real browser (docs/judge.md, "--queue K"): the Battle
tab offers it only while one waits; before the vote the page shows the stored prompt and replies
and nothing that tells the models apart (no name, no fingerprint, no speed); one turn only; the
vote by key reveals them and takes the pair off the queue."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.tiny import tiny_models
from tests.uiapp import RunningUI, start_ui, ui_settings
from webui.records.prepared import PreparedPair, PreparedPairs, write_pairs

pytestmark = pytest.mark.browser
PAIR = PreparedPair(
    pair_id="pair-browser",
    source="replay-browser",
    prompt="Name a primary colour.",
    models=("tiny-a", "tiny-b"),
    replies=("STORED-RED is one of them.", "STORED-BLUE, and also red and yellow."),
    fingerprints=("fp-7a1c0de", "fp-9b2beef"),
)


@pytest.fixture(scope="module")
def ui(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> RunningUI:
    settings = ui_settings(tmp_path_factory.mktemp("prepared-browser"), tiny_model_dir)
    tiny_models(settings.models_file.parent, tiny_model_dir)  # two models: no long ones to load
    running = start_ui(settings)
    yield running
    running.stop()


@pytest.fixture
def page(browser: Browser) -> Page:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    yield context.new_page()
    context.close()


def test_a_prepared_question_is_a_blind_one_turn_battle(ui: RunningUI, page: Page) -> None:
    page.goto(ui.url)
    expect(page.locator("#battle-status")).to_contain_text("ready", timeout=20_000)
    button = page.locator("#battle-prepared")
    expect(button).to_be_hidden()
    write_pairs(ui.services.settings.log_dir, PAIR.source, [PAIR])
    expect(button).to_be_visible(timeout=20_000)  # the app reads the folder again within seconds

    button.click()
    for reply in PAIR.replies:
        expect(page.locator("#battle-panes")).to_contain_text(reply, timeout=20_000)
    expect(page.locator("#battle-vote-a")).to_be_enabled(timeout=10_000)
    expect(page.locator("#battle-chat-a")).to_contain_text(PAIR.prompt)
    html = page.content()
    leaks = [t for t in (*PAIR.models, *PAIR.fingerprints, "tokens/s") if t in html]
    assert leaks == [], f"{leaks} on the page before the vote"
    expect(page.locator("#battle-input textarea")).to_be_disabled()  # the replies exist for one turn

    page.locator("body").click()
    page.keyboard.press("1")
    reveal = page.locator("#battle-reveal")
    expect(reveal).to_contain_text("Model A was", timeout=10_000)
    vote = ui.recorder.votes[-1]
    left = vote.conversations[0].model_name
    expect(reveal).to_contain_text(f"Model A was {left}")
    assert vote.extra["prepared"] == PAIR.pair_id and vote.kind == "leftvote"
    assert PreparedPairs(ui.services.settings.log_dir).pending() == []
    expect(button).to_be_hidden(timeout=20_000)

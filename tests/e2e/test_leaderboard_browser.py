"""The Leaderboard tab in headless Chromium, on a simulated log, at a desktop window (1400x900)
and on a phone (390x844): the table's column headers wrap between words, never inside one
(Gradio's own header style let a narrow column split "Rating" into "Ratin/g").

Screenshots go to test-artifacts/ (gitignored) for a person to look at.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.e2e.test_browser import PHONE, shot
from tests.uiapp import RunningUI, start_ui, ui_settings
from webui.leaderboard.simulate import simulate

pytestmark = pytest.mark.browser
DESKTOP = {"width": 1400, "height": 900}

# Each word of each header cell of the table: its characters' line tops, one per character. A word
# whose characters sit on more than one line was broken inside.
BROKEN_WORDS = """(table) => {
  const broken = [];
  for (const header of document.querySelectorAll(`#${table} th .header`)) {
    const walker = document.createTreeWalker(header, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/\\S+/g)) {
        const tops = new Set();
        for (let i = word.index; i < word.index + word[0].length; i++) {
          const range = document.createRange();
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          tops.add(Math.round(range.getBoundingClientRect().top));
        }
        if (tops.size > 1) broken.push(word[0]);
      }
    }
  }
  return broken;
}"""


@pytest.fixture(scope="module")
def ui(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> RunningUI:
    settings = ui_settings(tmp_path_factory.mktemp("ui-leaderboard"), tiny_model_dir)
    simulate(settings.log_dir, battles=600, seed=1, days=2)  # ten models, style columns, a preliminary one
    running = start_ui(settings)
    yield running
    running.stop()


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_leaderboard_headers_break_only_between_words(ui: RunningUI, browser: Browser, device: str) -> None:
    options = {"viewport": DESKTOP} if device == "desktop" else \
        {"viewport": PHONE, "is_mobile": True, "has_touch": True, "device_scale_factor": 2}
    context = browser.new_context(**options)
    page: Page = context.new_page()
    try:
        page.goto(ui.url + "?tab=leaderboard")
        table = page.locator("#leaderboard-table")
        expect(table).to_contain_text("granite-3-8b", timeout=60_000)  # the board was built and shown
        expect(table.locator("th .header").first).to_have_text("Rank")
        # Gradio sizes the columns after a render (a ResizeObserver): wait until every header has its width.
        page.wait_for_function("""() => [...document.querySelectorAll('#leaderboard-table th.header-cell')]
                                   .every((th) => th.style.width !== '')""")
        # then the layout settles: poll until no word is broken, and fail below if one stays broken
        with contextlib.suppress(PlaywrightTimeout):
            page.wait_for_function(f"() => ({BROKEN_WORDS})('leaderboard-table').length === 0", timeout=10_000)
        shot(page, f"leaderboard-{device}")
        headers = table.locator("th .header").all_inner_texts()
        assert {"Rating", "Battles", "Losses", "95% CI (style)", "P(above next)", "More battles (next)",
                "First token (s)", "Tokens/s"} <= set(headers)
        expect(page.get_by_text("Most useful next comparison:")).to_be_visible()
        assert page.evaluate(BROKEN_WORDS, "leaderboard-table") == []
    finally:
        context.close()

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
    options = (
        {"viewport": DESKTOP}
        if device == "desktop"
        else {"viewport": PHONE, "is_mobile": True, "has_touch": True, "device_scale_factor": 2}
    )
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
        assert {
            "Rating",
            "Battles",
            "Losses",
            "95% CI (style)",
            "P(above next)",
            "More battles (next)",
            "First token (s)",
            "Tokens/s",
        } <= set(headers)
        expect(page.get_by_text("Most useful next comparison:")).to_be_visible()
        assert page.evaluate(BROKEN_WORDS, "leaderboard-table") == []
    finally:
        context.close()


# The element inside the board's frame that scrolls sideways: how wide its content is, how wide it
# shows, and where its right edge lies on the screen.
BOARD_SCROLL = """() => {
  const frame = document.querySelector('#leaderboard-table');
  const scroller = [frame, ...frame.querySelectorAll('*')].find((el) =>
    ['auto', 'scroll'].includes(getComputedStyle(el).overflowX) && el.scrollWidth > el.clientWidth);
  return scroller ? {content: scroller.scrollWidth, shown: scroller.clientWidth,
                     right: scroller.getBoundingClientRect().right} : null;
}"""
# What runs off the right of the screen other than inside something that scrolls sideways (Gradio's
# container clips the page, so a row too wide is cut off rather than widening it).
CUT_OFF = """() => {
  const cut = [];
  for (const el of document.body.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0 || box.right <= window.innerWidth + 1) continue;
    if (el.closest('.visually-hidden')) continue;  // Gradio measures the tab names off-screen
    let up = el.parentElement;
    while (up && !['auto', 'scroll'].includes(getComputedStyle(up).overflowX)) up = up.parentElement;
    if (!up) cut.push(`${el.tagName}#${el.id}.${el.className} (right edge ${Math.round(box.right)} px)`);
  }
  return cut.slice(0, 5);
}"""


def _settled(page: Page) -> None:
    """Wait (a while) for nothing to be cut off: on a first load the layout can still be moving
    (fonts, the status timer's first answer) when the tab's status is filled in; the assertion that
    follows reports what is still cut off."""
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(f"() => ({CUT_OFF})().length === 0", timeout=10_000)


def test_every_tab_fits_a_phone(ui: RunningUI, browser: Browser) -> None:
    """At 390 px nothing widens the page (the board scrolls sideways inside its own frame, the panes
    in their own row), and under the message box the buttons keep to two lines: Send beside the box,
    Stop / Regenerate / New round on one line (Gradio stacked all four, a full-width line each)."""
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)
    page: Page = context.new_page()
    try:
        for tab, ready in (("battle", "#battle-status"), ("side_by_side", "#sbs-status"), ("direct", "#direct-status")):
            page.goto(f"{ui.url}?tab={tab}")
            expect(page.locator(ready)).to_contain_text("ready", timeout=30_000)
            if tab == "side_by_side":
                page.locator("#sbs-panes-count label").filter(has_text="4 panes").click()
                expect(page.locator("#sbs-chat-d")).to_be_visible()
            _settled(page)
            assert page.evaluate(CUT_OFF) == [], f"{tab}: cut off at the right"
            prefix = {"side_by_side": "sbs"}.get(tab, tab)
            restart = "#battle-new" if tab == "battle" else f"#{prefix}-clear"
            boxes = [page.locator(s).bounding_box() for s in (f"#{prefix}-stop", f"#{prefix}-regen", restart)]
            assert len({round(box["y"]) for box in boxes}) == 1, f"{tab}: the controls wrapped: {boxes}"
            send, text = page.locator(f"#{prefix}-send").bounding_box(), page.locator(f"#{prefix}-input").bounding_box()
            assert send["x"] > text["x"] + text["width"] - 1, f"{tab}: Send is not beside the message box"
        page.goto(f"{ui.url}?tab=leaderboard")
        expect(page.locator("#leaderboard-table")).to_contain_text("granite-3-8b", timeout=60_000)
        expect(page.get_by_text("Most useful next comparison:")).to_be_visible()
        board = page.evaluate(BOARD_SCROLL)
        assert board is not None, "the board's table does not scroll sideways inside its frame"
        assert board["right"] <= PHONE["width"], f"the board's frame runs off the screen: {board}"
        _settled(page)
        assert page.evaluate(CUT_OFF) == [], "leaderboard: cut off at the right"
        shot(page, "leaderboard-phone-fits")
        page.goto(f"{ui.url}?tab=about")
        expect(page.locator("#about-text")).to_be_visible()
        _settled(page)
        assert page.evaluate(CUT_OFF) == [], "about: cut off at the right"
    finally:
        context.close()

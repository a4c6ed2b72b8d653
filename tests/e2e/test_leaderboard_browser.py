"""The Leaderboard tab in headless Chromium, on a simulated log, at a desktop window (1400x900)
and on a phone (390x844): the default table's few columns all on the screen, "More columns" for
the rest, and the column headers wrapping between words, never inside one (Gradio's own header
style let a narrow column split "Rating" into "Ratin/g").

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
from webui.leaderboard.board.display import COMPACT_COLUMNS, DISPLAY_COLUMNS
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


# Each header cell of the table, and each cell of its preliminary rows: its text and where its box
# lies across the screen.
CELLS = """() => {
  const box = (el) => { const r = el.getBoundingClientRect(); return {text: el.innerText.trim(), left: r.left, right: r.right}; };
  const table = document.querySelector('#leaderboard-table');
  return {
    headers: [...table.querySelectorAll('th .header')].map(box),
    notes: [...table.querySelectorAll('td')].filter((td) => td.textContent.trim() === 'preliminary').map(box),
  };
}"""


def _device(browser: Browser, device: str) -> Page:
    options = (
        {"viewport": DESKTOP}
        if device == "desktop"
        else {"viewport": PHONE, "is_mobile": True, "has_touch": True, "device_scale_factor": 2}
    )
    return browser.new_context(**options).new_page()


def _headers_sized(page: Page, count: int) -> None:
    """Gradio sizes the columns after a render (a ResizeObserver): wait until the table has `count`
    headers, each with its width; then until no word is broken (asserted by the caller)."""
    page.wait_for_function(
        f"""() => {{ const ths = [...document.querySelectorAll('#leaderboard-table th.header-cell')];
                  return ths.length === {count} && ths.every((th) => th.style.width !== ''); }}"""
    )
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(f"() => ({BROKEN_WORDS})('leaderboard-table').length === 0", timeout=10_000)


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_the_compact_board_fits_the_screen_and_more_columns_show_the_rest(
    ui: RunningUI, browser: Browser, device: str
) -> None:
    """The default table is COMPACT_COLUMNS, every one of them on the screen at 1400 px and at 390 px
    (with 19 columns the note, Elo and battles were off-screen on a desktop, and a phone showed
    only rank, model and fingerprint); "More columns" brings the rest. Headers wrap between words,
    never inside one (Gradio's own header style split "Rating" into "Ratin/g")."""
    page = _device(browser, device)
    width = (DESKTOP if device == "desktop" else PHONE)["width"]
    try:
        page.goto(ui.url + "?tab=leaderboard")
        table = page.locator("#leaderboard-table")
        expect(table).to_contain_text("granite-3-8b", timeout=60_000)  # the board was built and shown
        _headers_sized(page, len(COMPACT_COLUMNS))
        shot(page, f"leaderboard-{device}")
        cells = page.evaluate(CELLS)
        assert [h["text"] for h in cells["headers"]] == COMPACT_COLUMNS
        off = [c for c in cells["headers"] + cells["notes"] if c["left"] < 0 or c["right"] > width + 1]
        assert cells["notes"] and not off, f"off the screen at {width} px: {off}"
        assert page.evaluate(BOARD_SCROLL) is None, "the compact board scrolls sideways"
        assert page.evaluate(BROKEN_WORDS, "leaderboard-table") == []
        expect(page.get_by_text("Most useful next comparison:")).to_be_visible()

        page.locator("#leaderboard-more input").check()
        _headers_sized(page, len(DISPLAY_COLUMNS))
        shot(page, f"leaderboard-{device}-more")
        assert table.locator("th .header").all_inner_texts() == DISPLAY_COLUMNS
        assert page.evaluate(BROKEN_WORDS, "leaderboard-table") == []
        page.locator("#leaderboard-more input").uncheck()
        _headers_sized(page, len(COMPACT_COLUMNS))
    finally:
        page.context.close()


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
        page.locator("#leaderboard-more input").check()  # every column: wider than a phone
        expect(page.locator("#leaderboard-table th .header")).to_have_count(len(DISPLAY_COLUMNS))
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

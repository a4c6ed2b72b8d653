"""The screenshots in docs/ui.md and the README, taken on the real demo models in headless Chromium:

    HF_HUB_OFFLINE=1 .venv/bin/python -m tests.e2e.docs_screenshots [OUT_DIR]   # default docs/screenshots

Not a test (the journeys are asserted in test_browser.py and test_leaderboard_browser.py on the
tiny model; pytest collects only test_*.py); it runs the same steps with models that write real
text, and saves small palette PNGs (a few tens of KB each). The Leaderboard tab shows a simulated
log of 3,000 battles (`webui.leaderboard.simulate`; the votes cast here are not recorded). Emoji
need a colour emoji font (Debian: fonts-noto-color-emoji); without one they show as empty boxes.
"""

from __future__ import annotations

import contextlib
import re
import sys
import tempfile
from pathlib import Path

from PIL import Image
from playwright.sync_api import FloatRect, Page, expect, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.apps import start_app
from tests.e2e.conftest import CHROMIUM_ARGS
from tests.e2e.test_browser import PHONE, choose, panes, send, set_number
from tests.uiapp import RunningUI
from webui.config import Settings
from webui.leaderboard.board.view import COMPACT_COLUMNS
from webui.leaderboard.simulate import simulate
from webui.records.events import NullRecorder

ROOT = Path(__file__).resolve().parents[2]
SMOL, GEMMA = "SmolLM2-135M-Instruct", "Gemma-3-270M (base)"
DESKTOP = {"width": 1280, "height": 900}
WIDE = {"width": 1400, "height": 900}  # the width docs/ui.md's "How it looks" checks the board at


def save(page: Page, out: Path, name: str, *, full_page: bool = False, clip: FloatRect | None = None) -> None:
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page, clip=clip)
    image = Image.open(path).convert("RGB")
    # 256 colours: with 64 the colour emoji on the chosen (orange) vote button merged into it
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {path.stat().st_size // 1024} KB")


def scroll_to(page: Page, selector: str, block: str) -> None:
    """Scroll the page so that `selector` sits at the viewport's `block` (start, center or end)."""
    page.locator(selector).evaluate(f"el => el.scrollIntoView({{block: '{block}'}})")


def battle(page: Page, url: str, out: Path) -> None:
    page.goto(url)
    expect(page.locator("#battle-status")).to_contain_text("2 models ready", timeout=60_000)
    send(page, "battle", "In one sentence: why is the sea salty?")
    expect(page.locator("#battle-vote-a")).to_be_enabled(timeout=300_000)
    save(page, out, "battle-before-vote")
    own_settings(page, out)
    send(page, "battle", "x" * 12_001)
    expect(page.get_by_text("the limit is 12,000")).to_be_visible(timeout=10_000)
    toast_shown(page)
    save(page, out, "refusal")
    for close in page.locator("[data-testid=toast-close]").all():
        close.click()
    page.locator("#battle-input textarea").fill("")
    page.locator("#battle-input textarea").press("Escape")
    page.keyboard.press("1")
    expect(page.locator("#battle-reveal")).to_contain_text("Model A was", timeout=10_000)
    chosen(page, "battle", "a")
    scroll_to(page, "#battle-votes", "end")  # the names, the settings, and the vote cast under them
    save(page, out, "battle-revealed")


def toast_shown(page: Page) -> None:
    """Wait until the notice in the corner has faded in whole: its own opacity times its ancestors'.
    (Waiting for its running animations to end can return before the fade has begun.)"""
    page.wait_for_function(
        """() => { const body = document.querySelector('[data-testid=toast-body]');
                   let opacity = body ? 1 : 0;
                   for (let el = body; el; el = el.parentElement) opacity *= parseFloat(getComputedStyle(el).opacity);
                   return opacity > 0.99; }"""
    )


def own_settings(page: Page, out: Path) -> None:
    """Both panes' Parameters before the vote: no numbers, only a note that each model uses its own
    settings (the panes' replies above them); closed again, and the page back at its top."""
    for pane in "ab":
        page.locator(f"#battle-{pane}-params button").first.click()
        expect(page.locator(f"#battle-{pane}-own-note")).to_contain_text("the model's own settings")
    scroll_to(page, "#battle-b-params", "end")
    page.wait_for_timeout(500)  # the accordions' opening
    save(page, out, "battle-parameters-own")
    for pane in "ab":
        page.locator(f"#battle-{pane}-params button").first.click()
    page.evaluate("window.scrollTo(0, 0)")


def chosen(page: Page, prefix: str, vote: str) -> None:
    """Wait until the vote just cast is marked as chosen, its note is shown and the other buttons
    have faded (a CSS transition)."""
    expect(page.locator(f"#{prefix}-vote-{vote}")).to_have_class(re.compile(r"\barena-chosen\b"))
    expect(page.locator(f"#{prefix}-notice")).to_contain_text("recorded")
    page.wait_for_timeout(600)


def finish_or_stop(page: Page, prefix: str, seconds: float) -> None:
    """Let the replies end on their own (the votes open), or Stop them after `seconds` (a base model
    may ramble)."""
    vote = expect(page.locator(f"#{prefix}-vote-a"))
    try:
        vote.to_be_enabled(timeout=seconds * 1000)
    except AssertionError:
        stop(page, prefix)
        vote.to_be_enabled(timeout=30_000)


def stop_after(page: Page, prefix: str, panes_on_show: str, seconds: float) -> None:
    """Let the replies stream a while, then Stop them all (the machine may be slow and the models
    talkative)."""
    for letter in panes_on_show:
        expect(page.locator(f"#{prefix}-chat-{letter} .bot")).to_contain_text(" ", timeout=120_000)
    page.wait_for_timeout(seconds * 1000)
    stop(page, prefix)


def stop(page: Page, prefix: str) -> None:
    """Stop the replies, unless they ended meanwhile (a click on a Stop that turns grey under it
    would wait for it to come back); with the button covered (a chooser's list), by the key Esc."""
    button = page.locator(f"#{prefix}-stop")
    with contextlib.suppress(PlaywrightTimeout):
        button.click(timeout=5_000)
    if button.is_enabled():
        page.keyboard.press("Escape")
    expect(button).to_be_disabled(timeout=30_000)


def side_by_side(page: Page, url: str, out: Path) -> None:
    page.goto(url + "?tab=side_by_side")
    expect(page.locator("#sbs-chat-b")).to_contain_text(f"Model B: {GEMMA}", timeout=60_000)
    send(page, "sbs", "Name one colour of the rainbow. Answer with one word.")
    finish_or_stop(page, "sbs", 60)
    page.click("#sbs-vote-b")
    chosen(page, "sbs", "b")
    scroll_to(page, "#sbs-panes", "start")  # the names, the replies and the vote cast under them
    save(page, out, "side-by-side-vote")
    page.click("#sbs-clear")
    expect(page.locator("#sbs-chat-a .bot")).to_have_count(0)
    panes(page, 3)
    for letter, model in (("a", SMOL), ("b", GEMMA), ("c", SMOL)):
        choose(page, f"sbs-model-{letter}", model, chat=f"sbs-chat-{letter}")
    set_number(page, "sbs-c-params", "sbs-c-temperature", 1)
    send(page, "sbs", "Name three uses of a lighthouse.")
    stop_after(page, "sbs", "abc", 12)
    scroll_to(page, "#sbs-panes", "start")
    save(page, out, "side-by-side-3-panes")
    panes(page, 4)
    for letter, model in zip("abcd", (SMOL, GEMMA, SMOL, GEMMA), strict=True):
        choose(page, f"sbs-model-{letter}", model, chat=f"sbs-chat-{letter}")
    send(page, "sbs", "Tell me a long story about a lighthouse keeper.")
    for letter in "abcd":
        expect(page.locator(f"#sbs-chat-{letter} .bot")).to_contain_text("▌", timeout=120_000)
    page.wait_for_timeout(6000)
    page.keyboard.press("Escape")
    for letter in "abcd":
        expect(page.locator(f"#sbs-chat-{letter}")).to_contain_text("stopped", timeout=30_000)
    scroll_to(page, "#sbs-panes", "start")  # the panes' names above the replies
    save(page, out, "side-by-side-4-panes-stopped")


def phone(page: Page, url: str, out: Path) -> None:
    page.goto(url)
    expect(page.locator("#battle-status")).to_contain_text("2 models ready", timeout=60_000)
    send(page, "battle", "In one sentence: why is the sky blue?")
    expect(page.locator("#battle-vote-a")).to_be_enabled(timeout=300_000)
    page.wait_for_timeout(500)
    save(page, out, "phone-battle")
    page.goto(url + "?tab=side_by_side")
    expect(page.locator("#sbs-chat-b")).to_contain_text(f"Model B: {GEMMA}", timeout=60_000)
    send(page, "sbs", "Name a colour.")
    stop_after(page, "sbs", "ab", 8)
    page.wait_for_timeout(500)
    save(page, out, "phone-side-by-side")


def leaderboard(page: Page, url: str, out: Path, name: str) -> None:
    """The Leaderboard tab from the top of the page (the tab names, the summary, "More columns") to
    the foot of its default (compact) table, once Gradio has sized the table's columns (after a
    render)."""
    page.goto(url + "?tab=leaderboard")
    table = page.locator("#leaderboard-table")
    expect(table).to_contain_text("granite-3-8b", timeout=120_000)
    page.wait_for_function(
        f"""() => {{ const ths = [...document.querySelectorAll('#leaderboard-table th.header-cell')];
                  return ths.length === {len(COMPACT_COLUMNS)} && ths.every((th) => th.style.width !== ''); }}"""
    )
    page.wait_for_timeout(800)
    page.evaluate("window.scrollTo(0, 0)")
    box = table.bounding_box()
    assert box is not None, "the board's table is not on the page"
    width = page.viewport_size["width"] if page.viewport_size else 1400
    save(page, out, name, full_page=True, clip={"x": 0, "y": 0, "width": width, "height": box["y"] + box["height"] + 8})


def start(tmp: Path) -> RunningUI:
    # Short battles: a busy 2-core machine writes a few tokens a second.
    settings = Settings(log_dir=tmp / "logs", rate_messages=0, rate_votes=0, battle_max_new_tokens=48)
    simulate(settings.log_dir, battles=3000, seed=1, days=3)  # for the Leaderboard tab
    return RunningUI.of(start_app(settings, load_timeout_s=900, recorder=NullRecorder()))


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else ROOT / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        ui = start(Path(tmp))
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            desktop = browser.new_context(viewport=DESKTOP).new_page()
            battle(desktop, ui.url, out)
            side_by_side(desktop, ui.url, out)
            leaderboard(browser.new_context(viewport=WIDE).new_page(), ui.url, out, "leaderboard")
            mobile = browser.new_context(
                viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2
            ).new_page()
            phone(mobile, ui.url, out)
            leaderboard(mobile, ui.url, out, "phone-leaderboard")
        finally:
            browser.close()
            ui.stop()


if __name__ == "__main__":
    main(sys.argv[1:])

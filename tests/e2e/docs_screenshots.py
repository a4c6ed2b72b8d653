"""The screenshots in docs/ui.md and the README, taken on the real demo models in headless Chromium:

    HF_HUB_OFFLINE=1 .venv/bin/python -m tests.e2e.docs_screenshots [OUT_DIR]   # default docs/screenshots

Not a test (the journeys are asserted in test_browser.py on the tiny model); it runs the same steps
with models that write real text, and saves small palette PNGs (a few tens of KB each).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from PIL import Image
from playwright.sync_api import Page, expect, sync_playwright

from tests.apps import start_app
from tests.e2e.conftest import CHROMIUM_ARGS
from tests.e2e.test_browser import PHONE, choose, panes, send, set_number
from tests.uiapp import RunningUI
from webui.config import Settings
from webui.records.events import NullRecorder

ROOT = Path(__file__).resolve().parents[2]
SMOL, GEMMA = "SmolLM2-135M-Instruct", "Gemma-3-270M (base)"


def save(page: Page, out: Path, name: str, *, full_page: bool = False) -> None:
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    image = Image.open(path).convert("RGB")
    image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {path.stat().st_size // 1024} KB")


def battle(page: Page, url: str, out: Path) -> None:
    page.goto(url)
    expect(page.locator("#battle-status")).to_contain_text("2 models ready", timeout=60_000)
    send(page, "battle", "In one sentence: why is the sea salty?")
    expect(page.locator("#battle-vote-a")).to_be_enabled(timeout=300_000)
    save(page, out, "battle-before-vote")
    send(page, "battle", "x" * 12_001)
    expect(page.get_by_text("the limit is 12,000")).to_be_visible(timeout=10_000)
    page.wait_for_timeout(400)
    save(page, out, "refusal")
    for close in page.locator("[data-testid=toast-close]").all():
        close.click()
    page.locator("#battle-input textarea").fill("")
    page.locator("#battle-input textarea").press("Escape")
    page.keyboard.press("1")
    expect(page.locator("#battle-reveal")).to_contain_text("Model A was", timeout=10_000)
    page.locator("#battle-reveal").scroll_into_view_if_needed()
    save(page, out, "battle-revealed")


def stop_after(page: Page, prefix: str, panes_on_show: str, seconds: float) -> None:
    """Let the replies stream a while, then Stop them all (the machine may be slow and the models
    talkative)."""
    for letter in panes_on_show:
        expect(page.locator(f"#{prefix}-chat-{letter} .bot")).to_contain_text(" ", timeout=120_000)
    page.wait_for_timeout(seconds * 1000)
    if page.locator(f"#{prefix}-stop").is_enabled():
        page.click(f"#{prefix}-stop")
    expect(page.locator(f"#{prefix}-stop")).to_be_disabled(timeout=30_000)


def side_by_side(page: Page, url: str, out: Path) -> None:
    page.goto(url + "?tab=side_by_side")
    expect(page.locator("#sbs-chat-b")).to_contain_text(f"Model B: {GEMMA}", timeout=60_000)
    panes(page, 3)
    for letter, model in (("a", SMOL), ("b", GEMMA), ("c", SMOL)):
        choose(page, f"sbs-model-{letter}", model, chat=f"sbs-chat-{letter}")
    set_number(page, "sbs-c-params", "sbs-c-temperature", 1)
    send(page, "sbs", "Name three uses of a lighthouse.")
    stop_after(page, "sbs", "abc", 12)
    page.locator("#sbs-panes").scroll_into_view_if_needed()
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


def start(tmp: Path) -> RunningUI:
    # Short battles: a busy 2-core machine writes a few tokens a second.
    settings = Settings(log_dir=tmp / "logs", rate_messages=0, rate_votes=0, battle_max_new_tokens=48)
    return RunningUI.of(start_app(settings, load_timeout_s=900, recorder=NullRecorder()))


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else ROOT / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        ui = start(Path(tmp))
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            desktop = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            battle(desktop, ui.url, out)
            side_by_side(desktop, ui.url, out)
            mobile = browser.new_context(
                viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2
            ).new_page()
            phone(mobile, ui.url, out)
        finally:
            browser.close()
            ui.stop()


if __name__ == "__main__":
    main(sys.argv[1:])

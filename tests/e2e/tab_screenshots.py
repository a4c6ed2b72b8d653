"""Full-page screenshots of every tab at a phone's width (390x844) and a desktop's (1400x900), on
the tiny test models and a simulated log (with a snapshot of an earlier one, so that the board shows
its changes), for a person to look at (docs/ui.md, "How it looks"):

    HF_HUB_OFFLINE=1 .venv/bin/python -m tests.e2e.tab_screenshots [OUT_DIR]   # default /tmp/shots

Not a test: test_leaderboard_browser.py asserts what these showed to be wrong and was fixed.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

from tests.e2e.conftest import CHROMIUM_ARGS
from tests.e2e.test_browser import PHONE, panes, send
from tests.tiny import build_tiny_model
from tests.uiapp import RunningUI, start_ui, ui_settings
from webui.leaderboard.simulate import simulate

SIZES = {
    "phone": {"viewport": PHONE, "is_mobile": True, "has_touch": True},
    "desktop": {"viewport": {"width": 1400, "height": 900}},
}


def tabs(page: Page, url: str, save: Callable[[str], None]) -> None:
    page.goto(url)
    expect(page.locator("#battle-status")).to_contain_text("ready", timeout=30_000)
    save("battle-empty")
    send(page, "battle", "hello what is the capital of france, tell me about it in detail please")
    expect(page.locator("#battle-vote-a")).to_be_enabled(timeout=30_000)
    save("battle")
    page.goto(url + "?tab=side_by_side")
    expect(page.locator("#sbs-status")).to_contain_text("ready", timeout=30_000)
    send(page, "sbs", "hello there")
    expect(page.locator("#sbs-stop")).to_be_disabled(timeout=30_000)
    save("sbs-2")
    for count in (3, 4):
        panes(page, count)
        save(f"sbs-{count}")
    page.goto(url + "?tab=direct")
    expect(page.locator("#direct-status")).to_contain_text("ready", timeout=30_000)
    send(page, "direct", "hello there")
    expect(page.locator("#direct-stop")).to_be_disabled(timeout=30_000)
    save("direct")
    page.goto(url + "?tab=leaderboard")
    expect(page.locator("#leaderboard-table")).to_contain_text("granite", timeout=60_000)
    save("leaderboard")
    page.goto(url + "?tab=about")
    expect(page.locator("#about-text")).to_be_visible()
    save("about")


def start(tmp: Path) -> RunningUI:
    settings = ui_settings(tmp, build_tiny_model(tmp / "model"))
    simulate(tmp / "earlier", battles=2000, seed=2, days=2)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "webui.leaderboard",
            str(tmp / "earlier"),
            "--snapshot",
            str(settings.log_dir / "snapshots"),
        ],
        check=True,
        capture_output=True,
    )
    simulate(settings.log_dir, battles=3000, seed=1, days=3)
    return start_ui(settings)


def main(argv: list[str]) -> None:
    out = Path(argv[0] if argv else "/tmp/shots")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        ui = start(Path(tmp))
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            for size, options in SIZES.items():
                page = browser.new_context(**options).new_page()

                def save(name: str, page: Page = page, size: str = size) -> None:
                    page.wait_for_timeout(800)  # Gradio sizes the table's columns after a render
                    page.screenshot(path=str(out / f"{size}-{name}.png"), full_page=True)
                    print(out / f"{size}-{name}.png")

                tabs(page, ui.url, save)
                page.context.close()
        finally:
            browser.close()
            ui.stop()


if __name__ == "__main__":
    main(sys.argv[1:])

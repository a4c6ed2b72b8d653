"""Three journeys in headless Chromium (Debian's, driven by Playwright; FIELD-NOTES.md):

1. a battle: send, both replies stream, no model name on the page, vote, names revealed, input locked;
2. side by side with Stop mid-stream (both generate threads end), then a tab closed mid-reply;
3. a prompt (and a reply) carrying <img onerror> and <script> renders inert, Markdown and LaTeX render.

Screenshots go to test-artifacts/ (gitignored) for a person to look at.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.uiapp import NAMES, RunningUI, generate_threads, start_ui, ui_settings, wait_for

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def ui(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> RunningUI:
    running = start_ui(ui_settings(tmp_path_factory.mktemp("ui-browser"), tiny_model_dir))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser() -> Browser:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture()
def page(browser: Browser) -> Page:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.dialogs = []  # type: ignore[attr-defined]
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    context.close()


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def send(page: Page, prefix: str, text: str) -> None:
    box = page.locator(f"#{prefix}-input textarea")
    expect(box).to_be_editable()
    box.fill(text)
    box.press("Enter")


def choose(page: Page, dropdown: str, name: str, chat: str | None = None) -> None:
    """Pick a model in a Gradio dropdown, as a person would, and (given the pane's chat) wait until
    the server took it: the pane's label names it, and its defaults are in the controls."""
    field = page.locator(f"#{dropdown} input")
    expect(field).not_to_have_value("", timeout=20_000)  # the status timer filled the choices
    field.click()
    options = field.get_attribute("aria-controls")  # this dropdown's own list (another may linger)
    page.locator(f'[id="{options}"] li[aria-label="{name}"]').click()
    expect(field).to_have_value(name)
    if chat is not None:
        expect(page.locator(f"#{chat}")).to_contain_text(name)


def test_battle_with_a_vote_and_the_reveal(ui: RunningUI, page: Page) -> None:
    page.goto(ui.url)
    expect(page.locator("#battle-status")).to_contain_text("ready", timeout=20_000)
    limit = ui.services.settings.max_input_chars
    assert page.locator("#battle-input textarea").get_attribute("maxlength") is None, "no silent cut"
    send(page, "battle", "x" * (limit + 1))
    expect(page.get_by_text(f"the limit is {limit:,}")).to_be_visible(timeout=10_000)
    send(page, "battle", "hello what is the capital of france")
    expect(page.locator("#battle-vote-a")).to_be_enabled(timeout=30_000)
    for pane in ("a", "b"):
        expect(page.locator(f"#battle-chat-{pane}")).to_contain_text("tokens/s")
    shot(page, "battle-before-vote")
    html = page.content()
    assert [name for name in NAMES if name in html] == [], "a model name is on the page before the vote"
    assert "Model A" in html and "Model B" in html

    page.click("#battle-vote-a")
    reveal = page.locator("#battle-reveal")
    expect(reveal).to_contain_text("Model A was", timeout=10_000)
    pair = [c.model_name for c in ui.recorder.votes[-1].conversations]
    expect(reveal).to_contain_text(f"Model A was {pair[0]} and Model B was {pair[1]}")
    expect(page.locator("#battle-chat-a")).to_contain_text(f"Model A: {pair[0]}")
    expect(page.locator("#battle-input textarea")).to_be_disabled()
    expect(page.locator("#battle-vote-b")).to_be_disabled()
    shot(page, "battle-revealed")

    page.click("#battle-new")
    expect(page.locator("#battle-input textarea")).to_be_editable()
    expect(reveal).to_have_text("")


LONG = {"generate:long-a", "generate:long-b"}


def long_threads() -> set[str]:
    """This test's generate threads only: a thread of an earlier test still winding down must not
    make the counts wrong."""
    return {t.name for t in generate_threads()} & LONG


def test_side_by_side_stop_mid_stream_and_a_closed_tab(ui: RunningUI, page: Page) -> None:
    page.goto(ui.url + "?tab=side_by_side")
    # Both dropdowns are filled at once on load; both panes take their model (one session, no race).
    expect(page.locator("#sbs-chat-a")).to_contain_text("Model A: tiny-a", timeout=20_000)
    expect(page.locator("#sbs-chat-b")).to_contain_text("Model B: tiny-b")
    choose(page, "sbs-model-a", "long-a", chat="sbs-chat-a")
    choose(page, "sbs-model-b", "long-b", chat="sbs-chat-b")
    send(page, "sbs", "hello")
    wait_for(lambda: long_threads() == LONG, 30, "both panes should generate at once")
    for pane in ("a", "b"):  # both stream, visibly
        expect(page.locator(f"#sbs-chat-{pane} .bot")).to_contain_text("▌", timeout=10_000)
    page.click("#sbs-stop")
    for pane in ("a", "b"):
        expect(page.locator(f"#sbs-chat-{pane}")).to_contain_text("stopped", timeout=15_000)
    wait_for(lambda: not long_threads(), 10, "Stop left a generate thread running")
    expect(page.locator("#sbs-vote-a")).to_be_enabled()
    shot(page, "side-by-side-stopped")

    send(page, "sbs", "hello again")
    wait_for(lambda: long_threads() == LONG, 30, "the second message did not start")
    page.close()  # the tab goes away mid-reply
    wait_for(lambda: not long_threads(), 30, "closing the tab did not stop generation on the server")


def test_html_in_a_prompt_and_a_reply_renders_inert(ui: RunningUI, page: Page) -> None:
    page.goto(ui.url + "?tab=direct")
    choose(page, "direct-model", "echo")  # replies with the prompt: the same payload from the model
    payload = ('<img src=x onerror="window.__xss=1;alert(1)"> <script>window.__xss=2;alert(2)</script> '
               '**bold** and $$x^2 + y^2$$\n```python\nprint("hi")\n```')
    send(page, "direct", payload)
    expect(page.locator("#direct-vote-up")).to_be_enabled(timeout=20_000)
    chat = page.locator("#direct-chat")
    expect(chat.locator(".bot")).to_contain_text("tokens")
    assert page.dialogs == [], "a script ran"  # type: ignore[attr-defined]
    assert page.evaluate("window.__xss") is None
    assert chat.locator("[onerror], script").count() == 0
    assert chat.locator("strong").count() >= 2, "Markdown renders (prompt and reply)"
    assert chat.locator("pre code").count() >= 2, "code blocks render"
    assert chat.locator(".katex").count() >= 2, "LaTeX renders"
    shot(page, "direct-html-inert")

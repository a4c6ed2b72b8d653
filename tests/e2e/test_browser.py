"""Journeys in headless Chromium (Debian's, driven by Playwright; FIELD-NOTES.md), on a desktop
(1280x1000) and a phone (390x844):

1. a battle: a refused message is shown once and the chat stays; the replies come without counts
   or speeds; no 🗑 in the panes; votes look disabled until they are not; Esc then the key 1 votes;
   the names and the settings each model used are revealed; before that, the parameters say the
   models use their own settings, without numbers;
2. side by side: Enter while the replies stream says why nothing happens, Esc stops both, and a
   closed tab stops the models;
3. three panes, each with its own parameters (and no vote keys); four panes streaming at once,
   one Stop for all;
4. on a phone: the page does not jump to the message box, the panes sit in a row that swipes, and
   after a send the replies and the vote buttons are in view without scrolling;
5. direct chat: the flag stays available after a thumb, and the thumbs say what they mean;
   a vote cast stays marked as chosen, with a note (side by side and battle too);
6. a prompt (and a reply) carrying <img onerror> and <script> renders inert, Markdown and LaTeX render.

Screenshots go to test-artifacts/ (gitignored) for a person to look at.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.uiapp import NAMES, RunningUI, generate_threads, start_ui, ui_settings, wait_for

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def ui(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> RunningUI:
    running = start_ui(ui_settings(tmp_path_factory.mktemp("ui-browser"), tiny_model_dir))
    yield running
    running.stop()


def _page(browser: Browser, **options) -> Page:
    context = browser.new_context(**options)
    page = context.new_page()
    page.dialogs = []  # type: ignore[attr-defined]
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    return page


@pytest.fixture
def page(browser: Browser) -> Page:
    page = _page(browser, viewport={"width": 1280, "height": 1000})
    yield page
    page.context.close()


@pytest.fixture
def phone(browser: Browser) -> Page:
    page = _page(browser, viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)
    yield page
    page.context.close()


def shot(page: Page, name: str, *, full_page: bool = True) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


def send(page: Page, prefix: str, text: str) -> None:
    box = page.locator(f"#{prefix}-input textarea")
    expect(box).to_be_editable()
    box.fill(text)
    box.press("Enter")


def choose(page: Page, dropdown: str, name: str, chat: str | None = None) -> None:
    """Pick a model in a Gradio dropdown, as a person would, and (given the pane's chat) wait until
    the server took it: the pane's label names it."""
    field = page.locator(f"#{dropdown} input")
    expect(field).not_to_have_value("", timeout=20_000)  # the status timer filled the choices
    field.click()
    options = field.get_attribute("aria-controls")  # this dropdown's own list (another may linger)
    page.locator(f'[id="{options}"] li[aria-label="{name}"]').click()
    expect(field).to_have_value(name)
    if chat is not None:
        expect(page.locator(f"#{chat}")).to_contain_text(name)


def set_number(page: Page, accordion: str, control: str, value: int) -> None:
    """Open a pane's Parameters and type a value into one control. The model's defaults, loaded by
    a choice made just before, may land after the typing (or the controls may still be mounting in
    the accordion just opened): type again until the value holds."""
    field = page.locator(f"#{control} input[type=number]")
    if not field.is_visible():
        page.locator(f"#{accordion} button").first.click()
        expect(field).to_be_visible()
    slider = page.locator(f"#{control} input[type=range]")
    for _ in range(5):
        field.fill(str(value))
        field.press("Tab")  # the slider takes the number when the field loses the focus
        if _holds(page, slider, str(value)):
            return
    expect(slider).to_have_value(str(value))


def _holds(page: Page, field: Any, value: str, within_s: float = 3.0, for_s: float = 0.5) -> bool:
    """Whether `field` shows `value` within `within_s` and keeps it, looked at all along, for `for_s`
    (a late update overwrites it at a moment nothing on the page marks)."""
    deadline = time.monotonic() + within_s
    while field.input_value() != value:
        if time.monotonic() > deadline:
            return False
        page.wait_for_timeout(50)
    kept_until = time.monotonic() + for_s
    while time.monotonic() < kept_until:
        if field.input_value() != value:
            return False
        page.wait_for_timeout(50)
    return True


def panes(page: Page, count: int) -> None:
    page.locator("#sbs-panes-count label").filter(has_text=f"{count} panes").click()
    letters = "abcd"
    for i in range(4):
        chat = expect(page.locator(f"#sbs-chat-{letters[i]}"))
        if i < count:
            chat.to_be_visible()
        else:
            chat.to_be_hidden()


def toast_settled(page: Page) -> None:
    """Wait for the toasts' slide-in to end (not for their countdown bars, which run until they close)."""
    page.locator(".toast-wrap").first.evaluate(
        "wrap => Promise.all(wrap.getAnimations({subtree: true})"
        ".filter((a) => !a.effect.target.classList.contains('timer')).map((a) => a.finished))"
    )


def in_view(page: Page, selector: str, slack_px: float = 0) -> bool:
    """Whether the element lies inside the viewport from top to bottom (`slack_px` for rounding)."""
    box = page.locator(selector).bounding_box()
    height = page.viewport_size["height"]
    return box is not None and box["y"] >= -slack_px and box["y"] + box["height"] <= height


def opacity(page: Page, selector: str) -> float:
    return float(page.locator(selector).evaluate("el => getComputedStyle(el).opacity"))


def expect_chosen(page: Page, prefix: str, chosen: str, note: str) -> None:
    """The vote just cast stays marked (bright, ticked) while the other disabled ones grey out, and
    a note says which vote was recorded."""
    button = page.locator(f"#{prefix}-vote-{chosen}")
    expect(button).to_be_disabled()  # one vote per turn
    expect(button).to_have_class(re.compile(r"\barena-chosen\b"))
    expect(button).to_have_css("opacity", "1")
    assert button.evaluate("el => getComputedStyle(el, '::before').content") == '"✓ "'
    for greyed in page.locator(f"#{prefix}-votes button:disabled:not(.arena-chosen)").all():
        expect(greyed).to_have_css("opacity", re.compile(r"0\.[0-4]\d*"))  # (it fades: polled)
    expect(page.locator(f"#{prefix}-notice")).to_contain_text(note)


def test_battle_refusal_reply_vote_by_key_and_reveal(ui: RunningUI, page: Page) -> None:
    page.goto(ui.url)
    expect(page.locator("#battle-status")).to_contain_text("ready", timeout=20_000)
    expect(page.locator("#battle-vote-a")).to_be_disabled()
    assert opacity(page, "#battle-vote-a") < 0.5, "a disabled vote button must look disabled"
    send(page, "battle", "hello what is the capital of france")
    expect(page.locator("#battle-vote-a")).to_be_enabled(timeout=30_000)
    expect(page.locator("#battle-vote-a")).to_have_css("opacity", "1")
    for pane in ("a", "b"):
        chat = page.locator(f"#battle-chat-{pane}")
        expect(chat.locator(".bot")).to_contain_text("length limit reached")  # one cap for both panes
        assert "tokens" not in chat.inner_text(), "no counts or speeds before the vote"
    for pane in ("a", "b"):  # no 🗑 in a battle's panes: it discarded the battle without a word
        header = page.locator(f"#battle-chat-{pane} .top-panel")
        expect(header.locator("button[aria-label='Copy conversation']")).to_be_visible()
        expect(header.locator("button[aria-label='Clear']")).to_have_count(1)  # Gradio draws it ...
        expect(header.locator("button[aria-label='Clear']")).to_be_hidden()  # ... and the page hides it
    html = page.content()
    assert [name for name in NAMES if name in html] == [], "a model name is on the page before the vote"
    assert "Model A" in html and "Model B" in html

    # A refusal: shown once, and the conversation stays in both panes, with no error badge over it.
    limit = ui.services.settings.max_input_chars
    assert page.locator("#battle-input textarea").get_attribute("maxlength") is None, "no silent cut"
    send(page, "battle", "x" * (limit + 1))
    expect(page.get_by_text(f"the limit is {limit:,}")).to_have_count(1, timeout=10_000)
    expect(page.get_by_text(f"the limit is {limit:,}")).to_be_visible()
    toast_settled(page)  # for the screenshot
    for pane in ("a", "b"):
        chat = page.locator(f"#battle-chat-{pane}")
        expect(chat).to_contain_text("hello what is the capital of france")
        expect(chat.get_by_text("Error", exact=True)).to_have_count(0)
    shot(page, "battle-refusal", full_page=False)

    page.locator("#battle-input textarea").press("Escape")  # nothing to stop: leaves the box
    page.keyboard.press("1")  # A is better
    reveal = page.locator("#battle-reveal")
    expect(reveal).to_contain_text("Model A was", timeout=10_000)
    pair = [c.model_name for c in ui.recorder.votes[-1].conversations]
    assert ui.recorder.votes[-1].kind == "leftvote"
    expect(reveal).to_contain_text(f"Model A was {pair[0]} and Model B was {pair[1]}")
    expect(reveal).to_contain_text("max_new_tokens")  # the settings each model used
    expect(page.locator("#battle-chat-a")).to_contain_text(f"Model A: {pair[0]}")
    expect(page.locator("#battle-chat-a")).to_contain_text("tokens/s")
    expect(page.locator("#battle-input textarea")).to_be_disabled()
    expect(page.locator("#battle-vote-b")).to_be_disabled()
    expect_chosen(page, "battle", "a", "Vote recorded: 👈 A is better")
    shot(page, "battle-revealed")

    page.click("#battle-new")
    expect(page.locator("#battle-input textarea")).to_be_editable()
    expect(reveal).to_have_text("")


def test_battle_parameters_say_the_models_own_settings_are_used(ui: RunningUI, page: Page) -> None:
    """Before the vote the panel shows no numbers the models do not use: it says the model's own
    settings are used; unticking the box shows the controls, which are then the ones used."""
    page.goto(ui.url)
    expect(page.locator("#battle-status")).to_contain_text("ready", timeout=20_000)
    page.locator("#battle-a-params button").first.click()
    note = page.locator("#battle-a-own-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("the model's own settings")
    expect(page.locator("#battle-a-own input")).to_be_checked()
    panel = page.locator("#battle-a-params")
    for kind in ("number", "range", "text"):
        expect(panel.locator(f"input[type={kind}]:visible")).to_have_count(0)
    expect(panel.locator("textarea:visible")).to_have_count(0)
    panel.scroll_into_view_if_needed()
    shot(page, "battle-parameters-own", full_page=False)
    page.locator("#battle-a-own input").uncheck()
    expect(page.locator("#battle-a-top-p input[type=number]")).to_be_editable()
    expect(note).to_be_hidden()
    shot(page, "battle-parameters-chosen", full_page=False)
    page.locator("#battle-a-own input").check()
    expect(page.locator("#battle-a-top-p")).to_be_hidden()
    expect(note).to_be_visible()


def long_threads() -> list[str]:
    """This test's generate threads only (the long models'): a thread of an earlier test still
    winding down must not make the counts wrong."""
    return [t.name for t in generate_threads() if t.name.startswith("generate:long-")]


def test_side_by_side_enter_explains_esc_stops_and_a_closed_tab(ui: RunningUI, page: Page) -> None:
    page.goto(ui.url + "?tab=side_by_side")
    # Both dropdowns are filled at once on load; both panes take their model (one session, no race).
    expect(page.locator("#sbs-chat-a")).to_contain_text("Model A: tiny-a", timeout=20_000)
    expect(page.locator("#sbs-chat-b")).to_contain_text("Model B: tiny-b")
    choose(page, "sbs-model-a", "long-a", chat="sbs-chat-a")
    choose(page, "sbs-model-b", "long-b", chat="sbs-chat-b")
    send(page, "sbs", "hello")
    wait_for(lambda: len(long_threads()) == 2, 30, "both panes should generate at once")
    for pane in ("a", "b"):  # both stream, visibly
        expect(page.locator(f"#sbs-chat-{pane} .bot")).to_contain_text("▌", timeout=10_000)
    # Enter while the replies stream: told why nothing happens. (force: two long replies re-rendering
    # keep a loaded machine's page too busy for Playwright's actionability checks; the box is enabled.)
    box = page.locator("#sbs-input textarea")
    box.fill("one more thing", force=True)
    box.press("Enter")
    expect(page.locator("#sbs-notice")).to_contain_text("still coming")
    page.keyboard.press("Escape")
    for pane in ("a", "b"):
        expect(page.locator(f"#sbs-chat-{pane}")).to_contain_text("stopped", timeout=15_000)
        expect(page.locator(f"#sbs-chat-{pane}")).not_to_contain_text("▌")
    wait_for(lambda: not long_threads(), 10, "Stop left a generate thread running")
    expect(page.locator("#sbs-vote-a")).to_be_enabled()
    expect(page.locator("#sbs-input textarea")).to_have_value("one more thing")  # the typed message is kept
    shot(page, "side-by-side-stopped")

    send(page, "sbs", "hello again")
    wait_for(lambda: len(long_threads()) == 2, 30, "the second message did not start")
    page.close()  # the tab goes away mid-reply
    wait_for(lambda: not long_threads(), 30, "closing the tab did not stop generation on the server")


def test_three_panes_each_with_its_own_parameters(ui: RunningUI, page: Page) -> None:
    page.goto(ui.url + "?tab=side_by_side")
    expect(page.locator("#sbs-chat-b")).to_contain_text("Model B: tiny-b", timeout=20_000)
    keys = page.locator("#sbs-keys")
    expect(keys).to_contain_text("1 A is better")
    panes(page, 3)
    expect(keys).to_contain_text("Esc")
    expect(keys).not_to_contain_text("better")  # three panes have no votes, so no vote keys
    lengths = {"a": ("long-a", 5), "b": ("long-b", 9), "c": ("long-a", 13)}
    for letter, (model, tokens) in lengths.items():
        choose(page, f"sbs-model-{letter}", model, chat=f"sbs-chat-{letter}")
        set_number(page, f"sbs-{letter}-params", f"sbs-{letter}-max-new-tokens", tokens)
    expect(page.locator("#sbs-votes")).to_be_hidden()
    send(page, "sbs", "hello")
    for letter, (model, tokens) in lengths.items():
        expect(page.locator(f"#sbs-chat-{letter} .bot")).to_contain_text(f"{tokens} tokens", timeout=30_000)
        expect(page.locator(f"#sbs-chat-{letter}")).to_contain_text(f"Model {letter.upper()}: {model}")
    expect(page.locator("#sbs-notice")).to_contain_text("two panes to vote")
    shot(page, "side-by-side-3-panes")


def test_four_panes_stream_at_once_and_one_stop_stops_them_all(ui: RunningUI, page: Page) -> None:
    page.goto(ui.url + "?tab=side_by_side")
    expect(page.locator("#sbs-chat-b")).to_contain_text("Model B: tiny-b", timeout=20_000)
    panes(page, 4)
    for letter, model in zip("abcd", ("long-a", "long-b", "long-a", "long-b"), strict=True):
        choose(page, f"sbs-model-{letter}", model, chat=f"sbs-chat-{letter}")
    send(page, "sbs", "hello")
    wait_for(lambda: len(long_threads()) == 4, 30, "the four panes should generate at once")
    for letter in "abcd":
        expect(page.locator(f"#sbs-chat-{letter} .bot")).to_contain_text("▌", timeout=10_000)
    shot(page, "side-by-side-4-panes")
    page.click("#sbs-stop")
    for letter in "abcd":
        expect(page.locator(f"#sbs-chat-{letter}")).to_contain_text("stopped", timeout=15_000)
    wait_for(lambda: not long_threads(), 10, "Stop left a generate thread running")


def test_phone_keeps_the_replies_and_the_vote_in_view(ui: RunningUI, phone: Page) -> None:
    phone.clock.install()  # the page's own timers, run at will below
    phone.goto(ui.url)
    expect(phone.locator("#battle-status")).to_contain_text("ready", timeout=20_000)
    phone.wait_for_function("window.__arenaPage === true")  # the page script has run
    phone.clock.run_for(1000)  # past the moment it would focus the message box (400 ms on a desktop)
    assert phone.evaluate("window.scrollY") == 0, "the page jumped on load"
    assert phone.evaluate("document.activeElement.tagName") != "TEXTAREA", "the keyboard would open on load"
    a, b = (phone.locator(f"#battle-chat-{p}").bounding_box() for p in "ab")
    assert abs(a["y"] - b["y"]) < 2 and b["x"] > a["x"] + a["width"] / 2, "the panes sit in one row, not a stack"
    shot(phone, "phone-battle-start", full_page=False)
    send(phone, "battle", "hello what is the capital of france")
    expect(phone.locator("#battle-vote-a")).to_be_enabled(timeout=30_000)
    # The page scrolls smoothly to the panes: wait for the reply (2 px: rounding) and the votes to be in view.
    wait_for(lambda: in_view(phone, "#battle-chat-a", slack_px=2), 10, "the reply is not in view")
    wait_for(lambda: in_view(phone, "#battle-vote-a"), 10, "the vote buttons are not in view")
    shot(phone, "phone-battle", full_page=False)
    phone.locator("#battle-panes").evaluate("row => row.scrollTo({left: row.scrollWidth})")  # a swipe to B

    def b_in_view() -> bool:
        b = phone.locator("#battle-chat-b").bounding_box()
        return b["x"] >= 0 and b["x"] + b["width"] <= PHONE["width"]

    wait_for(b_in_view, 10, "pane B did not swipe into view")
    shot(phone, "phone-battle-b", full_page=False)


# The words inside the elements `selector` finds that were broken across lines (a break after a
# hyphen is a line break between words, as in a model's name).
BROKEN_WORDS = """(selector) => {
  const broken = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/[^\\s-]+/g)) {
        const tops = new Set();
        for (let i = word.index; i < word.index + word[0].length; i++) {
          const range = document.createRange();
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          const box = range.getBoundingClientRect();
          if (box.width > 0) tops.add(Math.round(box.top));
        }
        if (tops.size > 1) broken.push(word[0]);
      }
    }
  }
  return broken;
}"""


def test_phone_reaches_every_tab_and_reads_the_reveal_whole(ui: RunningUI, phone: Page) -> None:
    """At 390 px every tab's name is on the screen and opens its tab (Gradio put Leaderboard and
    About under "⋯"), and after a vote the settings table breaks between words, never inside one
    (it read "max_new_toke/ns"), in a box that scrolls sideways if it is wider than the screen."""
    phone.goto(ui.url)
    expect(phone.locator("#battle-status")).to_contain_text("ready", timeout=20_000)
    phone.wait_for_function("window.__arenaPage === true")  # the page's stylesheet is in
    expect(phone.get_by_role("button", name="More tabs")).to_have_count(0)
    names = {"battle": "Battle", "side_by_side": "Side by side", "direct": "Direct chat"}
    names |= {"leaderboard": "Leaderboard", "about": "About"}
    for tab, name in names.items():
        button = phone.get_by_role("tab", name=re.compile(name))
        expect(button).to_be_visible()
        box = button.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], f"{name}: off the screen: {box}"
        button.click()
        expect(button).to_have_attribute("aria-selected", "true")
        if tab == "about":
            expect(phone.locator("#about-text")).to_be_visible()
        elif tab == "leaderboard":
            expect(phone.locator("#leaderboard-table")).to_be_visible()
    shot(phone, "phone-tabs", full_page=False)

    phone.get_by_role("tab", name=re.compile("Battle")).click()
    send(phone, "battle", "hello what is the capital of france")
    expect(phone.locator("#battle-vote-a")).to_be_enabled(timeout=30_000)
    phone.click("#battle-vote-a")
    table = phone.locator("#battle-reveal table")
    expect(table).to_contain_text("repetition_penalty", timeout=10_000)
    table.scroll_into_view_if_needed()
    shot(phone, "phone-battle-revealed", full_page=False)
    assert phone.evaluate(BROKEN_WORDS, "#battle-reveal th, #battle-reveal td") == []
    frame = table.bounding_box()
    assert frame["x"] >= 0 and frame["x"] + frame["width"] <= PHONE["width"] + 1, f"the table runs off: {frame}"


def test_phone_side_by_side(ui: RunningUI, phone: Page) -> None:
    phone.goto(ui.url + "?tab=side_by_side")
    expect(phone.locator("#sbs-chat-a")).to_contain_text("Model A: tiny-a", timeout=20_000)
    expect(phone.locator("#sbs-chat-b")).to_contain_text("Model B: tiny-b")
    send(phone, "sbs", "hello")
    expect(phone.locator("#sbs-vote-a")).to_be_enabled(timeout=30_000)
    row = phone.locator("#sbs-panes")
    assert row.evaluate("r => r.scrollWidth > r.clientWidth"), "the panes swipe"
    shot(phone, "phone-side-by-side", full_page=False)
    phone.click("#sbs-vote-b")
    expect_chosen(phone, "sbs", "b", "Vote recorded: 👉 B is better")
    assert ui.recorder.votes[-1].kind == "rightvote"
    shot(phone, "phone-side-by-side-voted", full_page=False)


def test_direct_chat_thumbs_say_what_they_mean_and_flag_stays_open(ui: RunningUI, page: Page) -> None:
    page.goto(ui.url + "?tab=direct")
    choose(page, "direct-model", "tiny-a")
    expect(page.locator("#direct-vote-up")).to_contain_text("Good")
    expect(page.locator("#direct-vote-down")).to_contain_text("Bad")
    send(page, "direct", "hello")
    expect(page.locator("#direct-vote-up")).to_be_enabled(timeout=20_000)
    page.click("#direct-vote-up")
    expect_chosen(page, "direct", "up", "Vote recorded: 👍 Good")
    expect(page.locator("#direct-vote-down")).to_be_disabled()
    expect(page.locator("#direct-vote-flag")).to_be_enabled()
    shot(page, "direct-voted", full_page=False)
    page.click("#direct-vote-flag")
    wait_for(lambda: ui.recorder.votes and ui.recorder.votes[-1].kind == "flag", 10, "the flag was not recorded")
    expect_chosen(page, "direct", "flag", "Votes recorded: 👍 Good · ⚑ Flag")
    expect_chosen(page, "direct", "up", "Votes recorded: 👍 Good · ⚑ Flag")
    send(page, "direct", "hello again")  # a new turn: nothing chosen, nothing recorded yet
    expect(page.locator("#direct-vote-up")).to_be_enabled(timeout=20_000)
    expect(page.locator("#direct-votes .arena-chosen")).to_have_count(0)
    expect(page.locator("#direct-notice")).not_to_contain_text("recorded")


def test_html_in_a_prompt_and_a_reply_renders_inert(ui: RunningUI, page: Page) -> None:
    page.goto(ui.url + "?tab=direct")
    choose(page, "direct-model", "echo")  # replies with the prompt: the same payload from the model
    payload = (
        '<img src=x onerror="window.__xss=1;alert(1)"> <script>window.__xss=2;alert(2)</script> '
        '**bold** and $$x^2 + y^2$$\n```python\nprint("hi")\n```'
    )
    send(page, "direct", payload)
    expect(page.locator("#direct-vote-up")).to_be_enabled(timeout=20_000)
    chat = page.locator("#direct-chat")
    expect(chat.locator(".bot")).to_contain_text("tokens")
    # at least two of each (prompt and reply); the reply's last render may land after its statistics
    expect(chat.locator("strong").nth(1), "Markdown renders").to_be_attached()
    expect(chat.locator("pre code").nth(1), "code blocks render").to_be_attached()
    expect(chat.locator(".katex").nth(1), "LaTeX renders").to_be_attached()
    # and with everything rendered, nothing ran
    assert page.dialogs == [], "a script ran"  # type: ignore[attr-defined]
    assert page.evaluate("window.__xss") is None
    assert chat.locator("[onerror], script").count() == 0
    shot(page, "direct-html-inert")

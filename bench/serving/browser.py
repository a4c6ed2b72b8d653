"""7. In a browser: what a person sees, against the engine alone.

The same request as the overhead section, typed into Direct chat in headless Chromium (Debian's,
driven by Playwright, as the browser tests do; nothing is downloaded) and pressed Enter on. The page
itself notes, with `performance.now()`, when Enter went down, when the reply's bubble first shows
text, and when its statistics line appears (a MutationObserver on the chat); the tokens come from
that line. Each run is paired with the engine alone (raw) on the same request, end-of-sequence
honoured as in the UI, so that both make the same greedy text.

The bench's copy of the models file gives every entry greedy defaults (temperature 0, top_p 1,
top_k off, repetition penalty 1, the section's length), which the page loads into the controls when
the model is chosen: nobody types into a slider. Chromium shares the machine's cores with the
server and the engines, as it would on a laptop running the arena for itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report import Column, Table, number, seconds, text
from bench.serving.context import BenchContext, PathUnavailable
from bench.serving.paths import Request, Sample, run_raw
from bench.stats import median, rate, ratio
from tests.e2e.conftest import CHROMIUM_ARGS  # the browser tests' flags: no sandbox, no network

CHROMIUM = Path("/usr/bin/chromium")
# Runs in the page before Enter: the times of Enter, the first text and the statistics line.
WATCH = """() => {
  const marks = window.__bench = {};
  const box = document.querySelector("#direct-input textarea");
  box.addEventListener("keydown", (e) => { if (e.key === "Enter") marks.sent = performance.now(); },
                       {capture: true, once: true});
  const chat = document.getElementById("direct-chat");
  new MutationObserver((_, observer) => {
    const bots = chat.querySelectorAll(".bot");
    const last = bots[bots.length - 1];
    if (!last || marks.sent === undefined) return;
    const shown = last.innerText.replace("▌", "").trim();
    if (shown && marks.first === undefined) marks.first = performance.now();
    const stats = shown.match(/(\\d+) tokens ·/);
    if (stats) { marks.done = performance.now(); marks.tokens = Number(stats[1]); observer.disconnect(); }
  }).observe(chat, {subtree: true, childList: true, characterData: true});
}"""


def run(ctx: BenchContext) -> dict[str, Any]:
    cfg = ctx.config
    result: dict[str, Any] = {"tokens": cfg.overhead_tokens, "repeats": cfg.overhead_repeats, "models": {}}
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {**result, "unavailable": "playwright is not installed (`make test` installs it)"}
    if not CHROMIUM.exists():
        return {**result, "unavailable": f"no {CHROMIUM} (scripts/install-browser.sh installs Debian's Chromium)"}
    try:
        url = ctx.server().url
    except PathUnavailable as exc:
        return {**result, "unavailable": str(exc)}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for name in ctx.local_names:
                result["models"][name] = _model(ctx, browser, url, name)
        finally:
            browser.close()
    return result


def _model(ctx: BenchContext, browser: Any, url: str, name: str) -> dict[str, Any]:
    cfg = ctx.config
    request = Request(name, cfg.prompt, cfg.overhead_tokens, ignore_eos=False)  # the UI cannot ignore EOS
    backend = ctx.backend(name)
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        _open(page, url, name, cfg.overhead_tokens)
        _turn(page, cfg.prompt)  # warm-up, as every path gets
        run_raw(backend, request)
        shown, raw = [], []
        for _ in range(cfg.overhead_repeats):
            shown.append(_turn(page, cfg.prompt))
            raw.append(run_raw(backend, request))
    finally:
        page.close()
    return _summary(shown, raw)


def _open(page: Any, url: str, name: str, tokens: int) -> None:
    """Direct chat with `name` chosen, as a person would pick it from the list, and its (greedy)
    defaults in the controls."""
    page.goto(url + "?tab=direct")
    field = page.locator("#direct-model input")
    page.wait_for_function("() => document.querySelector('#direct-model input')?.value", timeout=60_000)
    if field.input_value() != name:
        field.click()
        page.locator(f'[id="{field.get_attribute("aria-controls")}"] li[aria-label="{name}"]').click()
    page.wait_for_function(f"() => document.querySelector('#direct-model input').value === {name!r}")
    page.locator("#direct-params button").first.click()  # the controls are drawn when their accordion opens
    value = "(id) => document.querySelector(`#${id} input[type=number]`)?.value"
    page.wait_for_function(
        f"() => ({value})('direct-temperature') === '0' && ({value})('direct-max-new-tokens') === '{tokens}'",
        timeout=30_000,
    )
    page.locator("#direct-params button").first.click()  # closed again, as the page starts


def _turn(page: Any, prompt: str) -> dict[str, Any]:
    """One message in a cleared chat: the page's own times, from Enter."""
    if page.locator("#direct-chat .bot").count():  # (Clear on an empty chat would cancel the send below)
        page.click("#direct-clear")
        page.wait_for_function("() => !document.querySelector('#direct-chat .bot')")
    page.evaluate(WATCH)
    box = page.locator("#direct-input textarea")
    box.fill(prompt)
    box.press("Enter")
    page.wait_for_function("() => window.__bench.done !== undefined", timeout=300_000)
    marks = page.evaluate("() => window.__bench")
    return {
        "first_s": (marks["first"] - marks["sent"]) / 1000,
        "total_s": (marks["done"] - marks["sent"]) / 1000,
        "tokens": marks["tokens"],
    }


def _summary(shown: list[dict[str, Any]], raw: list[Sample]) -> dict[str, Any]:
    ui_rate = median([rate(s["tokens"], s["total_s"]) for s in shown])
    raw_rate = median([s.tokens_per_s for s in raw if s.error is None])
    raw_first = median([s.ttft_s for s in raw if s.error is None and s.ttft_s is not None])
    first = median([s["first_s"] for s in shown])
    return {
        "first_text_s": first,
        "raw_first_token_s": raw_first,
        "first_over_raw_s": None if first is None or raw_first is None else first - raw_first,
        "tokens": median([s["tokens"] for s in shown]),
        "raw_tokens": median([s.tokens for s in raw]),
        "tokens_per_s": ui_rate,
        "raw_tokens_per_s": raw_rate,
        "ratio_to_raw": ratio(ui_rate, raw_rate),
        "total_s": median([s["total_s"] for s in shown]),
        "runs": shown,
        "raw": [s.as_dict() for s in raw],
    }


def tables(result: dict[str, Any]) -> list[Table]:
    rows: list[dict[str, Any]] = [{"model": m, **r} for m, r in result["models"].items()]
    if result.get("unavailable"):
        rows.append({"model": "all", "note": result["unavailable"]})
    columns = [
        Column("model", "model"),
        Column("tokens", "tokens", number(0)),
        Column("first_text_s", "first text on screen", seconds),
        Column("raw_first_token_s", "engine alone: first token", seconds),
        Column("first_over_raw_s", "later by", seconds),
        Column("tokens_per_s", "tokens/s on screen", number(1)),
        Column("raw_tokens_per_s", "engine alone: tokens/s", number(1)),
        Column("ratio_to_raw", "ratio", number(3)),
        Column("total_s", "Enter → statistics", seconds),
        Column("note", "note", text),
    ]
    notes = [
        f"Direct chat in headless Chromium (1280x1000), up to {result['tokens']} new tokens, greedy, median of "
        f"{result['repeats']} runs, each paired with the engine alone on the same request.",
        "Times are the page's own (performance.now()): from Enter to the first text in the reply's bubble, and "
        "to its statistics line; tokens/s = the statistics line's tokens / (Enter → statistics line).",
    ]
    return [Table("7. In a browser: from Enter to text on screen", columns, rows, notes)]

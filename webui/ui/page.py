"""The page's own stylesheet and keyboard shortcuts, installed by one invisible component.

Gradio 6 takes page CSS and JavaScript only at launch or mount time, which belongs to the server;
an HTML component's `js_on_load` runs once when the page starts, so the UI brings its own:

* panes side by side on a wide screen; on a narrow one a row that swipes from pane to pane (each
  pane most of the screen wide), rather than a stack in which the votes end up far below;
* on a narrow screen Send beside the message box and the controls on one line, not a stack;
* disabled vote buttons that look disabled, and the vote just cast marked as chosen;
* no 🗑 (clear) icon in a battle's chat panes;
* leaderboard tables whose columns share the screen (a phone's too), their headers wrapping
  between words, never inside one;
* on a phone narrower page margins, and the reveal's settings table broken between words only;
* keys: Esc stops the replies (or, with nothing to stop, leaves the message box), and 1-4 vote
  when the focus is not in a text field;
* on a desktop the message box gets the focus without scrolling; a phone keeps the top of the page.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import gradio as gr

NARROW = "(max-width: 767px)"
CHOSEN = "arena-chosen"  # the class of a vote button once its vote is cast

CSS = """
.arena-panes { gap: 12px; }
.arena-pane { min-width: 220px; }
.arena-votes button:disabled, .arena-controls button:disabled {
  opacity: 0.38; filter: grayscale(1); cursor: not-allowed; box-shadow: none;
}
.arena-votes button:not(:disabled) {
  border: 2px solid var(--color-accent); font-weight: 600;
}
/* The vote just cast: disabled like the others (one vote per turn) but filled and bright, so that
   the voter sees which one was taken. */
.arena-votes button.CHOSEN:disabled { opacity: 1; filter: none; cursor: default; font-weight: 600; }
.arena-votes button.CHOSEN::before { content: "✓ "; }
/* Gradio draws a 🗑 in every chat's header (no option turns it off); a battle's panes hide it, since
   it discarded the battle without a word: New round ends a battle. Found by its English label, or
   in another language by the trash can's lid in its icon. */
.arena-no-clear .top-panel button[aria-label="Clear"],
.arena-no-clear .top-panel button:has(svg rect[x="12"][y="2"][width="8"]) { display: none !important; }
.arena-notice p { margin: 0; }
.arena-keys { opacity: 0.7; font-size: var(--text-sm); }
/* Gradio's header text breaks anywhere (word-break: break-word), so the table's layout squeezed columns
   to one letter's width and split "Rating" into "Ratin/g"; breaking between words makes the longest
   word a column's narrowest width (a table too wide for the screen scrolls sideways instead). */
.arena-board th .header { word-break: normal; overflow-wrap: normal; hyphens: none; }
/* Gradio sizes a table's columns from one hidden row of its longest values, kept on one line, so a
   table never narrowed below them. Wrapping there lets the board's columns share the screen as a
   table's do; a model's name breaks anywhere (at a hyphen first), the other cells only between
   words. (Only the board's table: the others' cells do not wrap, and would be cut short.) */
#leaderboard-table .sizing-body td { white-space: normal !important; }
#leaderboard-table .sizing-body td:nth-child(2), #leaderboard-table .body-cell:nth-child(2) .wrap {
  overflow-wrap: anywhere;
}
#leaderboard-table .sizing-body td:nth-child(2) > .cell-wrap { min-width: 6em; }
/* Gradio's Markdown tables break words anywhere, so on a phone the reveal's narrow first column read
   "max_new_toke/ns" and "setti/ng": its cells break between words, and a table wider than the
   screen scrolls sideways in its own box. */
.arena-reveal table { display: block; max-width: 100%; overflow-x: auto; border: none !important; padding: 0 !important; }
.arena-reveal th, .arena-reveal td { word-break: normal; overflow-wrap: normal; }
@media NARROW {
  /* a phone's 390 px: Gradio's 32 px margins each side were a sixth of the board's width */
  .gradio-container > .main { padding-inline: var(--size-2) !important; }
  .arena-board .cell-wrap, .arena-board th .header { font-size: var(--text-sm) !important; }
  .arena-board .sizing-body td { padding: 0 !important; }
  .arena-board .cell-wrap { padding: var(--size-1) var(--size-1-5) !important; }
  .arena-panes { flex-wrap: nowrap !important; overflow-x: auto; scroll-snap-type: x mandatory;
                 overscroll-behavior-x: contain; padding-bottom: 4px; }
  .arena-panes > .arena-pane { flex: 0 0 86% !important; min-width: 86% !important; scroll-snap-align: start; }
  .arena-panes > .arena-pane:only-child { flex-basis: 100% !important; min-width: 100% !important; }
  .arena-chat .bubble-wrap { max-height: 46vh; }
  .arena-intro, .arena-keys { display: none; }
  .arena-votes button { min-width: 40% !important; }
  /* three votes (Direct chat) fit one row; two of four per row left Flag alone on a second one */
  .arena-votes:has(> button:nth-of-type(3):last-of-type) > button { min-width: 28% !important; }
  /* Gradio wraps a row's children below 160px each: the message box, Send and the three controls
     each took a full-width line (four lines of buttons under the box). Send stays beside the box,
     Stop / Regenerate / New round share one line. */
  .arena-send { flex-wrap: nowrap !important; }
  .arena-send > .form { min-width: 0 !important; }
  .arena-send > button { flex: 0 0 auto !important; min-width: 0 !important; padding-inline: 14px; }
  .arena-send textarea::placeholder { font-size: var(--text-sm); }  /* one line beside Send */
  .arena-controls.row { flex-wrap: nowrap !important; gap: 8px; }
  .arena-controls.row > button { flex: 1 1 auto !important; min-width: 0 !important; padding-inline: 6px;
                                 white-space: nowrap; font-size: var(--text-md); }
}
""".replace("NARROW", NARROW).replace("CHOSEN", CHOSEN)

_JS = """
const ARENA = ARENA_CONFIG;
if (!window.__arenaPage) {
  window.__arenaPage = true;
  const style = document.createElement("style");
  style.textContent = ARENA.css;
  document.head.appendChild(style);
  const shown = (el) => el && el.offsetParent !== null;
  const usable = (ids) => ids.map((id) => document.getElementById(id)).find((el) => shown(el) && !el.disabled);
  const typing = (el) => el && (["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName) || el.isContentEditable);
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "Escape") {
      const stop = usable(ARENA.stop);
      if (stop) { stop.click(); event.preventDefault(); }
      else if (typing(document.activeElement)) document.activeElement.blur();
      return;
    }
    if (typing(document.activeElement) || !(event.key in ARENA.votes)) return;
    const vote = usable(ARENA.votes[event.key]);
    if (vote) { vote.click(); event.preventDefault(); }
  });
  if (!window.matchMedia(ARENA.narrow).matches && window.matchMedia("(hover: hover)").matches) {
    setTimeout(() => {
      const box = ARENA.message_boxes.map((id) => document.querySelector(`#${id} textarea`)).find(shown);
      if (box && !typing(document.activeElement)) box.focus({ preventScroll: true });
    }, 400);
  }
}
"""


def page_script(stop_ids: Sequence[str], vote_keys: Mapping[str, Sequence[str]], input_ids: Sequence[str]) -> str:
    config = {
        "css": CSS,
        "stop": list(stop_ids),
        "votes": {k: list(v) for k, v in vote_keys.items()},
        # Not "inputs": gradio takes a quoted word of js_on_load that names one of gr.HTML's
        # arguments for a custom event, puts it in the page's config, and fails to copy that.
        "message_boxes": list(input_ids),
        "narrow": NARROW,
    }
    return _JS.replace("ARENA_CONFIG", json.dumps(config))


def install(stop_ids: Sequence[str], vote_keys: Mapping[str, Sequence[str]], input_ids: Sequence[str]) -> gr.HTML:
    """The invisible component whose `js_on_load` installs the stylesheet and the keys."""
    return gr.HTML(
        "", elem_id="arena-page", container=False, padding=False, js_on_load=page_script(stop_ids, vote_keys, input_ids)
    )


def send_script(prefix: str) -> str:
    """Runs in the browser when Enter or Send is pressed, before the server hears of it. While the
    replies stream the send event is still pending, so Gradio drops a second one without a word:
    this says why. On a phone it also puts the keyboard away and the panes in view, so that the
    replies do not stream off-screen."""
    return f"""() => {{
  const stop = document.getElementById("{prefix}-stop");
  if (stop && !stop.disabled) {{
    return "⏳ The replies are still coming: wait for them, or press Stop (Esc).";
  }}
  if (window.matchMedia("{NARROW}").matches) {{
    if (document.activeElement) document.activeElement.blur();
    const panes = document.getElementById("{prefix}-panes");
    if (panes) panes.scrollIntoView({{ block: "start", behavior: "smooth" }});
  }}
  return "";
}}"""

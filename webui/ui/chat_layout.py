"""One chat tab's components, built and arranged: Battle (two anonymous panes), Side by side (two to
four named panes) or Direct chat (one pane).

Guarantee: this module builds components and nothing else. It connects no event (the parameter
controls carry their own "model's own settings" toggle, webui.ui.common.param_controls) and reads
no model: in a battle no component holds a model name or a model's defaults before the vote.
Every component is a named field of `ChatLayout`, so wiring code names what it connects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gradio as gr

from webui.arena.rules import PANE_COUNTS, PANE_LABELS
from webui.records.events import Mode
from webui.types import PAIR_VOTES, SINGLE_VOTES, Vote
from webui.ui.common import Controls, chat_pane, param_controls

PANE_LETTERS = "abcd"
TAG_NONE = "No tag"  # the tag menu's first choice (the value "": the battle is not tagged)


@dataclass(frozen=True)
class Kind:
    """What sets one chat tab apart: its mode, names, intro, votes and restart button."""

    mode: Mode
    prefix: str  # elem_id and api_name prefix
    intro: str
    votes: tuple[Vote, ...]
    restart: tuple[str, str]  # (button text, api_name suffix)

    @property
    def counts(self) -> tuple[int, ...]:
        return PANE_COUNTS[self.mode]

    @property
    def max_panes(self) -> int:
        return max(self.counts)

    @property
    def anonymous(self) -> bool:
        return self.mode == "battle"


KINDS = {
    "battle": Kind(
        "battle",
        "battle",
        "Ask anything: two anonymous models answer side by side. Vote for the better "
        "answer to see who they are. Conversations and votes are recorded (see About).",
        PAIR_VOTES,
        ("🎲 New round", "new_round"),
    ),
    "side_by_side": Kind(
        "side_by_side",
        "sbs",
        "Pick two to four models; each pane has its own parameters and "
        "shows the exact prompt. With two panes you can vote.",
        PAIR_VOTES,
        ("🗑 Clear", "clear"),
    ),
    "direct": Kind("direct", "direct", "Chat with one model.", SINGLE_VOTES, ("🗑 Clear", "clear")),
}


@dataclass(frozen=True)
class PaneTop:
    """A pane's column: its model (not in a battle), its chat and its own Regenerate."""

    column: gr.Column
    chat: gr.Chatbot
    dropdown: gr.Dropdown | None
    regen: gr.Button | None


@dataclass(frozen=True)
class PaneUI(PaneTop):
    """The whole pane: the top, then (below the message box) its settings and exact prompt."""

    settings: gr.Column
    controls: Controls
    prompt: gr.Code | None


@dataclass(frozen=True)
class ChatLayout:
    """Every component of one chat tab, top to bottom as the page shows them."""

    kind: Kind
    status: gr.Markdown  # the models' status (the app's timer fills it)
    state: gr.State  # the tab's session (webui.arena.rules.Session)
    sink: gr.HTML  # invisible: where the events' progress and error states go
    count: gr.Radio | None  # how many panes (side by side only)
    panes: tuple[PaneUI, ...]
    reveal: gr.Markdown | None  # who the models were (battle only)
    notice: gr.Markdown
    vote_row: gr.Row
    votes: tuple[gr.Button, ...]  # one per kind.votes, in that order
    text: gr.Textbox
    send: gr.Button
    stop: gr.Button
    regen: gr.Button  # every pane on show
    restart: gr.Button  # New round / Clear
    prepared: gr.Button | None  # a battle on a prepared pair (battle only; shown while one waits)
    keys: gr.Markdown  # the keyboard shortcuts, the vote keys only while there are votes
    same: gr.Checkbox | None  # "Model A's parameters for every pane" (several panes only)
    tag: gr.Dropdown | None = None  # the visitor's category tag (a battle with --visitor-tags only)

    @property
    def dropdowns(self) -> list[gr.Dropdown]:
        return [p.dropdown for p in self.panes if p.dropdown is not None]

    @property
    def chats(self) -> list[gr.Chatbot]:
        return [p.chat for p in self.panes]

    @property
    def prompts(self) -> list[gr.Code]:
        return [p.prompt for p in self.panes if p.prompt is not None]

    @property
    def pane_regens(self) -> list[gr.Button]:
        return [p.regen for p in self.panes if p.regen is not None]


def lay_out(kind: Kind, tags: Sequence[str] = ()) -> ChatLayout:
    """Build one chat tab's components inside the current Blocks context; `tags`: the declared
    categories a visitor may tag a battle with before voting (none: no tag menu)."""
    p = kind.prefix
    gr.Markdown(kind.intro, elem_classes=["arena-intro"])
    status = gr.Markdown(elem_id=f"{p}-status")
    state = gr.State(None)
    sink = gr.HTML(visible=False)
    count = None
    if len(kind.counts) > 1:
        count = gr.Radio(
            [(f"{n} panes", n) for n in kind.counts],
            value=kind.counts[0],
            label="Panes",
            elem_id=f"{p}-panes-count",
        )
    with gr.Row(elem_id=f"{p}-panes", elem_classes=["arena-panes"]):
        tops = [_pane_column(kind, i) for i in range(kind.max_panes)]
    reveal = gr.Markdown(elem_id=f"{p}-reveal", elem_classes=["arena-reveal"]) if kind.anonymous else None
    notice = gr.Markdown(elem_id=f"{p}-notice", elem_classes=["arena-notice"])
    tag = None
    if kind.anonymous and tags:  # the menu holds the operator's names alone: nothing about the models
        tag = gr.Dropdown(
            [(TAG_NONE, ""), *((name, name) for name in tags)],
            value="",
            label="What is this battle about? (optional; kept with your vote)",
            elem_id=f"{p}-tag",
        )
    with gr.Row(elem_id=f"{p}-votes", elem_classes=["arena-votes"]) as vote_row:
        votes = tuple(
            gr.Button(vote.button, interactive=False, elem_id=f"{p}-vote-{vote.api_name}", size="md")
            for vote in kind.votes
        )
    with gr.Row(equal_height=True, elem_classes=["arena-send"]):
        text = gr.Textbox(
            label="Message",
            show_label=False,
            placeholder="Type a message and press Enter",
            scale=8,
            lines=1,
            elem_id=f"{p}-input",
            elem_classes=["arena-input"],
        )
        send = gr.Button("Send", variant="primary", scale=1, elem_id=f"{p}-send")
    with gr.Row(elem_classes=["arena-controls"]):
        stop = gr.Button("⏹ Stop", variant="stop", interactive=False, elem_id=f"{p}-stop")
        regen = gr.Button("🔄 Regenerate", interactive=False, elem_id=f"{p}-regen")
        restart = gr.Button(kind.restart[0], elem_id="battle-new" if kind.anonymous else f"{p}-clear")
        prepared = (
            gr.Button("❓ A prepared question", visible=False, elem_id=f"{p}-prepared") if kind.anonymous else None
        )
    keys = gr.Markdown(keys_text(kind, votes=True), elem_id=f"{p}-keys", elem_classes=["arena-keys"])
    same = None
    if kind.max_panes > 1:
        same = gr.Checkbox(False, label="Use Model A's parameters for every pane", elem_id=f"{p}-same")
    with gr.Row(elem_classes=["arena-panes", "arena-settings"]):
        panes = tuple(_pane_settings(kind, i, top, sink) for i, top in enumerate(tops))
    return ChatLayout(
        kind=kind,
        status=status,
        state=state,
        sink=sink,
        count=count,
        panes=panes,
        reveal=reveal,
        notice=notice,
        vote_row=vote_row,
        votes=votes,
        text=text,
        send=send,
        stop=stop,
        regen=regen,
        restart=restart,
        prepared=prepared,
        keys=keys,
        same=same,
        tag=tag,
    )


def keys_text(kind: Kind, *, votes: bool) -> str:
    """The keys line under the controls; the vote keys only while the votes are on show (three or
    four panes have none)."""
    line = "Keys: **Enter** sends · **Esc** stops the replies (or leaves the box)"
    if votes:
        line += "".join(f" · **{vote.key}** {vote.button.split(' ', 1)[1]}" for vote in kind.votes)
    return line


def _suffix(kind: Kind, i: int) -> str:
    return f"-{PANE_LETTERS[i]}" if kind.max_panes > 1 else ""


def _label(kind: Kind, i: int) -> str:
    return PANE_LABELS[i] if kind.max_panes > 1 else "Chat"


def _pane_column(kind: Kind, i: int) -> PaneTop:
    suffix, label = _suffix(kind, i), _label(kind, i)
    with gr.Column(visible=i < kind.counts[0], min_width=220, elem_classes=["arena-pane"]) as column:
        dropdown = None
        if not kind.anonymous:
            # Choices come from the status timer, never from the page config; custom values are
            # allowed so that the handler (not Gradio) answers for a name that is not ready.
            dropdown = gr.Dropdown(
                choices=[],
                value=None,
                label=label if kind.max_panes > 1 else "Model",
                allow_custom_value=True,
                elem_id=f"{kind.prefix}-model{suffix}",
            )
        # A battle ends by New round only (it says what it discards): no 🗑 in its panes' headers.
        chat = chat_pane(label, f"{kind.prefix}-chat{suffix}", clearable=not kind.anonymous)
        regen = None
        if kind.max_panes > 1:
            regen = gr.Button(
                f"🔄 Regenerate {label.split()[-1]}",
                interactive=False,
                size="sm",
                elem_id=f"{kind.prefix}-regen{suffix}",
                elem_classes=["arena-controls"],
            )
    return PaneTop(column=column, chat=chat, dropdown=dropdown, regen=regen)


def _pane_settings(kind: Kind, i: int, top: PaneTop, sink: gr.HTML) -> PaneUI:
    suffix, label = _suffix(kind, i), _label(kind, i)
    with gr.Column(visible=i < kind.counts[0], min_width=220, elem_classes=["arena-pane"]) as column:
        controls = param_controls(label, anonymous=kind.anonymous, elem_prefix=f"{kind.prefix}{suffix}", sink=sink)
        prompt = None
        if not kind.anonymous:
            with gr.Accordion(f"Show prompt · {label}", open=False):
                prompt = gr.Code(
                    value="",
                    language=None,
                    interactive=False,
                    wrap_lines=True,
                    label="The exact prompt the template produced",
                    elem_id=f"{kind.prefix}-prompt{suffix}",
                )
    return PaneUI(
        column=top.column,
        chat=top.chat,
        dropdown=top.dropdown,
        regen=top.regen,
        settings=column,
        controls=controls,
        prompt=prompt,
    )

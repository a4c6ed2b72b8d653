"""What one chat tab's components show, drawn from the session alone: the chats, the prompts, the
notice, the message box and every button's state, for each event of the tab to send.

Guarantee: every update is drawn from the session (and, for the pane count, the count) alone, as
{component: value}; nothing in a battle carries a model name before the vote (every message comes
from the rules or is generic; the pair lives in the server-side session, gr.State, never in a
component). A handler's stream of sessions goes to the page as what changed only
(`webui.ui.common.Delta`), the last update whole. This module connects no event.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.arena import rules as arena
from webui.arena.rules import Session
from webui.ui import views
from webui.ui.chat_layout import ChatLayout, keys_text
from webui.ui.common import Delta, in_order
from webui.ui.page import CHOSEN

if TYPE_CHECKING:
    from webui.config import Settings


class ChatView:
    """One laid-out tab's outputs: `outputs` (what most events update, in order) and the updates
    for them, for one pane, or for a change of pane count."""

    def __init__(self, layout: ChatLayout, settings: Settings) -> None:
        self.ui, self.settings = layout, settings
        ui = layout
        self.outputs = [
            ui.state,
            *ui.chats,
            *ui.prompts,
            *([ui.reveal] if ui.reveal else []),
            ui.notice,
            *ui.votes,
            ui.text,
            ui.send,
            ui.stop,
            ui.regen,
            *ui.pane_regens,
        ]
        # Sent as bare values in every streamed update (webui.ui.common.Delta): all but the session,
        # and the notice and the message box, which the page changes itself.
        self.bare = [i for i, c in enumerate(self.outputs) if all(c is not x for x in (ui.state, ui.notice, ui.text))]

    def draw(self, session: Session | None, clear_text: bool = False) -> list[Any]:
        """Every output of `self.outputs`, from the session alone."""
        return in_order(self.outputs, self.shown(session, clear_text))

    def stream(self, sessions: Any, *, clear_first: bool = False) -> Iterator[list[Any]]:
        """The handler's sessions as updates: the first complete, then the chats, prompts and
        buttons as bare values and nothing else that did not change (webui.ui.common.Delta), and
        the one after the run ended complete again (what a gradio_client caller gets as the
        result). `sessions` is a handler's generator of sessions: it is closed here, whatever ends
        the stream."""
        delta = Delta()
        with contextlib.closing(sessions):  # a closed tab closes this generator: the handler's must close now
            for n, current in enumerate(sessions):
                values = self.draw(current, clear_text=clear_first and n == 0)
                if current.busy:
                    yield delta(values, bare=self.bare)
                else:
                    yield delta.whole(values)

    def shown(self, session: Session | None, clear_text: bool = False) -> dict[Any, Any]:
        """{component of `self.outputs`: update}."""
        busy = session is not None and session.busy
        revealed = session is not None and session.revealed
        prepared = session is not None and session.prepared is not None  # one turn: its replies were stored
        box: dict[str, Any] = {
            "interactive": not revealed and not prepared,
            "placeholder": "Press “New round” to start another battle"
            if revealed or prepared
            else "Type a message and press Enter",
        }
        if clear_text:
            box["value"] = ""
        ui = self.ui
        shown: dict[Any, Any] = {
            ui.state: session,
            ui.notice: views.vote_note(
                session,
                drop_stopped=self.settings.leaderboard_drop_stopped,
                counts_named=self.settings.leaderboard_include_named,
            ),
            ui.text: gr.update(**box),
            ui.send: _button(ui.send, not busy and not revealed and not prepared),
            ui.stop: _button(ui.stop, busy),
            **self._vote_updates(session),
            **self._regens(session),
        }
        shown.update((pane.chat, self._chat(session, i)) for i, pane in enumerate(ui.panes))
        shown.update((pane.prompt, self._prompt(session, i)) for i, pane in enumerate(ui.panes) if pane.prompt)
        if ui.reveal is not None:
            shown[ui.reveal] = views.reveal_markdown(session)
        return shown

    def pane(self, session: Session | None, i: int) -> dict[Any, Any]:
        """A model chooser's updates: pane `i` only (another pane's chooser, answering at the same
        moment, must not overwrite its label), and the buttons that depend on every pane."""
        pane = self.ui.panes[i]
        shown: dict[Any, Any] = {
            self.ui.state: session,
            pane.chat: self._chat(session, i),
            **self._vote_updates(session),
        }
        if pane.prompt is not None:
            shown[pane.prompt] = self._prompt(session, i)
        regens = self._regens(session)
        shown.update((button, regens[button]) for button in (self.ui.regen, pane.regen) if button is not None)
        return shown

    def pane_count(self, count: int) -> dict[Any, Any]:
        """Which panes (and their settings) show, and whether the votes do."""
        votes = count <= 2
        shown: dict[Any, Any] = {
            self.ui.vote_row: gr.update(visible=votes),
            self.ui.keys: keys_text(self.ui.kind, votes=votes),
        }
        for i, pane in enumerate(self.ui.panes):
            shown[pane.column] = shown[pane.settings] = gr.update(visible=i < count)
        return shown

    def _vote_updates(self, session: Session | None) -> dict[gr.Button, Any]:
        """Each vote button: enabled while that vote can be cast, and once cast, marked as the
        chosen one (a filled button the stylesheet keeps bright while the others grey out)."""
        chosen = views.chosen_votes(session)
        return {
            button: _vote_button(button, arena.can_vote(session, vote.kind), chosen=vote in chosen)
            for button, vote in zip(self.ui.votes, self.ui.kind.votes, strict=True)
        }

    def _regens(self, session: Session | None) -> dict[gr.Button, Any]:
        """Regenerate (every pane on show) and each pane's own: after a reply, not while busy, not
        after a battle's vote."""
        idle = session is not None and not session.busy and not session.revealed
        replied = session.panes if session is not None and idle else ()
        started = [i < len(replied) and bool(replied[i].turns) for i in range(len(self.ui.panes))]
        own = {pane.regen: _button(pane.regen, started[i]) for i, pane in enumerate(self.ui.panes) if pane.regen}
        return {self.ui.regen: _button(self.ui.regen, any(started)), **own}

    def _chat(self, session: Session | None, i: int) -> dict[str, Any]:
        pane = session.panes[i] if session is not None and i < len(session.panes) else None
        anonymous = session is not None and session.anonymous
        return gr.update(
            value=views.chat_messages(pane, anonymous=anonymous) if pane else [],
            label=views.pane_label(session, i, self.ui.kind.mode),
        )

    def _prompt(self, session: Session | None, i: int) -> str:
        return views.last_prompt(session.panes[i]) if session is not None and i < len(session.panes) else ""


def _button(button: gr.Button, interactive: bool) -> dict[str, Any]:
    """A button's update with its text as the value, so that an unchanged button can go to the page
    as its bare value (webui.ui.common.Delta)."""
    return gr.update(value=button.value, interactive=interactive)


def _vote_button(button: gr.Button, interactive: bool, *, chosen: bool) -> dict[str, Any]:
    return {
        **_button(button, interactive),
        "variant": "primary" if chosen else "secondary",
        "elem_classes": [CHOSEN] if chosen else [],
    }

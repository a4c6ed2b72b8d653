"""What a chat tab shows (webui.ui.chat_view), without a server: a battle's components name no model
before the vote, a model chooser redraws its own pane only, and a closed stream closes the
handler's generator."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import gradio as gr

from webui.arena.rules import Owner, Session, new_session
from webui.config import Settings
from webui.ui.chat_layout import KINDS, lay_out
from webui.ui.chat_view import ChatView

ME = Owner("tab-1")


def chat_view(mode: str) -> ChatView:
    with gr.Blocks():
        layout = lay_out(KINDS[mode])  # type: ignore[index]
    return ChatView(layout, Settings())


def test_a_battle_names_no_model_before_the_vote_and_both_after() -> None:
    view = chat_view("battle")
    session = new_session("battle", ME)
    session.panes[0].model, session.panes[1].model = "secret-alpha", "secret-beta"

    def drawn() -> str:  # everything but the session, which stays on the server (gr.State)
        return json.dumps({str(c): v for c, v in view.shown(session).items() if c is not view.ui.state}, default=str)

    assert "secret" not in drawn()
    session.revealed = True
    assert "secret-alpha" in drawn() and "secret-beta" in drawn()


def test_a_model_chooser_redraws_its_own_pane_and_no_other() -> None:
    view = chat_view("side_by_side")
    session = new_session("side_by_side", ME, panes=2)
    shown = view.pane(session, 1)
    assert view.ui.panes[1].chat in shown
    assert view.ui.panes[0].chat not in shown  # the other chooser, answering at the same moment, keeps its label
    assert view.ui.regen in shown and all(vote in shown for vote in view.ui.votes)


def test_closing_the_stream_closes_the_handlers_generator() -> None:
    view = chat_view("direct")
    session = new_session("direct", ME)
    session.running = threading.Event()  # busy: a run is on, so the stream never ends by itself
    closed: list[bool] = []

    def handler() -> Iterator[Session]:
        try:
            while True:
                yield session
        finally:
            closed.append(True)

    sessions = handler()  # the caller's reference: only an explicit close ends it now
    updates = view.stream(sessions)
    next(updates)
    next(updates)
    updates.close()  # what Gradio does when the tab is closed or Stop cancels the event
    assert closed == [True]

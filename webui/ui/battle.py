"""The Battle tab: two anonymous models, drawn when the first message is sent. Wiring only.

Nothing here may carry a model name before the vote: the panes are "Model A" / "Model B", there is
no model dropdown, the parameter controls hold no model defaults, and every message comes from the
rules or is generic. The pair lives in the server-side session (gr.State), never in a component.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.arena import rules as arena
from webui.arena.handlers import Handlers
from webui.arena.rules import PANE_LABELS, Session
from webui.ui import views
from webui.ui.common import (
    PAIR_VOTE_BUTTONS,
    STREAMING,
    chat_pane,
    client_of,
    guarded,
    owner_of,
    param_controls,
    split_settings,
    wire_mirror,
)

if TYPE_CHECKING:
    from webui.services import Services

MODE = "battle"
REGENERATE = (((0, 1), "🔄 Regenerate", ""), ((0,), "🔄 A", "_a"), ((1,), "🔄 B", "_b"))


def build_battle_tab(services: Services, handlers: Handlers) -> BattleTab:
    """Lay out and wire the tab; the app's timer keeps `.status` current, its load event fills `.state`."""
    return BattleTab(services, handlers)


class BattleTab:
    def __init__(self, services: Services, handlers: Handlers) -> None:
        self.settings = services.settings
        self.handlers = handlers
        self._layout()
        self.outputs = [self.state, *self.chats, self.reveal, *self.votes, self.text, self.send, self.stop,
                        *self.regens]
        self.param_inputs = [self.same, *self.controls[0].inputs, *self.controls[1].inputs]
        running = self._wire_generation()
        self._wire_the_rest(running)

    def _layout(self) -> None:
        gr.Markdown("Ask anything: two anonymous models answer side by side. Vote for the better answer "
                    "to see who they are. Conversations and votes are recorded (see About).")
        self.status = gr.Markdown(elem_id="battle-status")
        self.state = gr.State(None)
        self.chats, self.controls = [], []
        with gr.Row():
            for i, label in enumerate(PANE_LABELS):
                with gr.Column():
                    self.chats.append(chat_pane(label, f"battle-chat-{'ab'[i]}"))
                    self.controls.append(param_controls(label, anonymous=True, elem_prefix=f"battle-{'ab'[i]}"))
        self.same = gr.Checkbox(False, label="Use Model A's parameters for both panes", elem_id="battle-same")
        self.reveal = gr.Markdown(elem_id="battle-reveal")
        with gr.Row():
            self.votes = [gr.Button(text, interactive=False, elem_id=f"battle-vote-{key}") for _, text, key in PAIR_VOTE_BUTTONS]
        with gr.Row():
            self.text = gr.Textbox(show_label=False, placeholder="Type a message and press Enter", scale=8, lines=1,
                                   elem_id="battle-input", autofocus=True)
            self.send = gr.Button("Send", variant="primary", scale=1, elem_id="battle-send")
        with gr.Row():
            self.stop = gr.Button("⏹ Stop", variant="stop", interactive=False, elem_id="battle-stop")
            self.regens = [gr.Button(label, interactive=False, elem_id=f"battle-regen{suffix.replace('_', '-')}")
                           for _, label, suffix in REGENERATE]
            self.new_round = gr.Button("🎲 New round", elem_id="battle-new")
        wire_mirror(self.same, self.controls[0], self.controls[1], api_name="battle_same_params")

    def view(self, session: Session | None, clear_text: bool = False) -> list[Any]:
        """Every output, from the session alone: pane labels stay "Model A"/"Model B" until the vote."""
        busy = session is not None and session.busy
        revealed = session is not None and session.revealed
        started = session is not None and any(p.turns for p in session.panes)
        panes = [gr.update(value=views.chat_messages(session.panes[i]) if session else [],
                           label=views.pane_label(session, i, MODE)) for i in range(2)]
        box: dict[str, Any] = {"interactive": not revealed, "placeholder": "Press “New round” to start another battle"
                               if revealed else "Type a message and press Enter"}
        if clear_text:
            box["value"] = ""
        return [session, *panes, views.reveal_markdown(session),
                *[gr.update(interactive=arena.can_vote(session))] * len(self.votes), gr.update(**box),
                gr.update(interactive=not busy and not revealed), gr.update(interactive=busy),
                *[gr.update(interactive=started and not busy and not revealed)] * len(self.regens)]

    def _wire_generation(self) -> list[Any]:
        """Send and the three Regenerate buttons: generators that redraw after every change."""
        settings, handlers, controls = self.settings, self.handlers, self.controls

        @guarded
        def on_send(request: gr.Request, session: Session | None, message: str, same: bool, *values: Any):
            stream = handlers.send(session, MODE, message, split_settings(values, controls), owner_of(request),
                                   client_of(request, settings), same_settings=bool(same))
            for n, current in enumerate(stream):
                yield self.view(current, clear_text=n == 0)

        def regenerate(panes: tuple[int, ...]):
            @guarded
            def on_regenerate(request: gr.Request, session: Session | None, same: bool, *values: Any):
                for current in handlers.regenerate(session, panes, split_settings(values, controls),
                                                   owner_of(request), client_of(request, settings),
                                                   same_settings=bool(same)):
                    yield self.view(current)
            return on_regenerate

        running = [gr.on([self.send.click, self.text.submit], on_send, [self.state, self.text, *self.param_inputs],
                         self.outputs, api_name="battle_send", **STREAMING)]
        for button, (panes, _, suffix) in zip(self.regens, REGENERATE, strict=True):
            running.append(button.click(regenerate(panes), [self.state, *self.param_inputs], self.outputs,
                                        api_name=f"battle_regenerate{suffix}", **STREAMING))
        return running

    def _wire_the_rest(self, running: list[Any]) -> None:
        """Stop, the votes and New round: quick handlers, never queued behind a generation."""
        settings, handlers = self.settings, self.handlers

        @guarded
        def on_stop(session: Session | None, request: gr.Request) -> list[Any]:
            return self.view(handlers.stop(session, owner_of(request)))

        # Not queued: Stop must work even when a busy server's queue is full of waiting messages.
        self.stop.click(on_stop, [self.state], self.outputs, api_name="battle_stop", cancels=running,
                        queue=False, show_progress="hidden")

        def voter(kind: str):
            @guarded
            def on_vote(session: Session | None, request: gr.Request) -> list[Any]:
                return self.view(handlers.vote(session, kind, owner_of(request), client_of(request, settings)))
            return on_vote

        for button, (kind, _, key) in zip(self.votes, PAIR_VOTE_BUTTONS, strict=True):
            button.click(voter(kind), [self.state], self.outputs, api_name=f"battle_vote_{key}", concurrency_limit=None)

        @guarded
        def on_new_round(session: Session | None, request: gr.Request) -> list[Any]:
            return self.view(handlers.new_round(session, MODE, owner_of(request)), clear_text=True)

        # The chat panes' own trash icon means the same as New round (else only the browser's copy
        # would be cleared, and the next reply would bring the old conversation back).
        gr.on([self.new_round.click, *(chat.clear for chat in self.chats)], on_new_round, [self.state], self.outputs,
              api_name="battle_new_round", cancels=running, concurrency_limit=None)

"""The Battle tab: two anonymous models, drawn when the first message is sent. Wiring only.

Nothing here may carry a model name before the vote: the panes are "Model A" / "Model B", there is
no model dropdown, the parameter controls hold no model defaults, and every message comes from the
rules or is generic. The pair lives in the server-side session (gr.State), never in a component.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gradio as gr

from webui import arena, views
from webui.arena import PAIR_VOTES, PANE_LABELS, Session
from webui.handlers import Handlers
from webui.ui.common import (
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
    from webui.server import Services

MODE = "battle"
VOTE_BUTTONS = (("leftvote", "👈 A is better", "a"), ("rightvote", "👉 B is better", "b"),
                ("tievote", "🤝 Tie", "tie"), ("bothbad_vote", "👎 Both are bad", "bad"))
assert {k for k, _, _ in VOTE_BUTTONS} == set(PAIR_VOTES)


def build_battle_tab(services: Services, handlers: Handlers) -> gr.Markdown:
    """Lay out and wire the tab; returns the status line that the app's timer keeps current."""
    settings = services.settings
    gr.Markdown("Ask anything: two anonymous models answer side by side. Vote for the better answer "
                "to see who they are. Conversations and votes are recorded (see About).")
    status = gr.Markdown(elem_id="battle-status")
    state = gr.State(None)
    chats, controls = [], []
    with gr.Row():
        for i, label in enumerate(PANE_LABELS):
            with gr.Column():
                chats.append(chat_pane(label, f"battle-chat-{'ab'[i]}"))
                controls.append(param_controls(label, anonymous=True, elem_prefix=f"battle-{'ab'[i]}"))
    same = gr.Checkbox(False, label="Use Model A's parameters for both panes", elem_id="battle-same")
    reveal = gr.Markdown(elem_id="battle-reveal")
    with gr.Row():
        votes = [gr.Button(text, interactive=False, elem_id=f"battle-vote-{key}") for _, text, key in VOTE_BUTTONS]
    with gr.Row():
        text = gr.Textbox(show_label=False, placeholder="Type a message and press Enter", scale=8, lines=1,
                          max_length=settings.max_input_chars, elem_id="battle-input", autofocus=True)
        send = gr.Button("Send", variant="primary", scale=1, elem_id="battle-send")
    with gr.Row():
        stop = gr.Button("⏹ Stop", variant="stop", interactive=False, elem_id="battle-stop")
        regens = [gr.Button(label, interactive=False, elem_id=f"battle-regen{suffix}")
                  for label, suffix in (("🔄 Regenerate", ""), ("🔄 A", "-a"), ("🔄 B", "-b"))]
        new_round = gr.Button("🎲 New round", elem_id="battle-new")
    wire_mirror(same, controls[0], controls[1], api_name="battle_same_params")

    outputs = [state, *chats, reveal, *votes, text, send, stop, *regens]
    param_inputs = [same, *controls[0].inputs, *controls[1].inputs]

    def view(session: Session | None, clear_text: bool = False) -> list[Any]:
        busy = session is not None and session.busy
        revealed = session is not None and session.revealed
        started = session is not None and any(p.turns for p in session.panes)
        panes = [gr.update(value=views.chat_messages(session.panes[i]) if session else [],
                           label=views.pane_label(session, i, MODE)) for i in range(2)]
        box = {"interactive": not revealed,
               "placeholder": "Press “New round” to start another battle" if revealed else "Type a message and press Enter"}
        if clear_text:
            box["value"] = ""
        return [session, *panes, views.reveal_markdown(session),
                *[gr.update(interactive=arena.can_vote(session))] * len(votes), gr.update(**box),
                gr.update(interactive=not busy and not revealed), gr.update(interactive=busy),
                *[gr.update(interactive=started and not busy and not revealed)] * len(regens)]

    @guarded
    def on_send(request: gr.Request, session: Session | None, message: str, same_value: bool, *values: Any):
        pane_settings = split_settings(values, controls)
        stream = handlers.send(session, MODE, message, pane_settings, owner_of(request, settings),
                               client_of(request, settings), same_settings=bool(same_value))
        for n, current in enumerate(stream):
            yield view(current, clear_text=n == 0)

    def regenerate(panes: tuple[int, ...]):
        @guarded
        def on_regenerate(request: gr.Request, session: Session | None, same_value: bool, *values: Any):
            stream = handlers.regenerate(session, panes, split_settings(values, controls),
                                         owner_of(request, settings), client_of(request, settings),
                                         same_settings=bool(same_value))
            for current in stream:
                yield view(current)
        return on_regenerate

    running = [gr.on([send.click, text.submit], on_send, [state, text, *param_inputs], outputs,
                     api_name="battle_send", **STREAMING)]
    for button, panes, name in zip(regens, ((0, 1), (0,), (1,)), ("", "_a", "_b"), strict=True):
        running.append(button.click(regenerate(panes), [state, *param_inputs], outputs,
                                    api_name=f"battle_regenerate{name}", **STREAMING))

    @guarded
    def on_stop(session: Session | None, request: gr.Request) -> list[Any]:
        return view(handlers.stop(session, owner_of(request, settings)))

    stop.click(on_stop, [state], outputs, api_name="battle_stop", cancels=running, concurrency_limit=None,
               show_progress="hidden")

    def voter(kind: str):
        @guarded
        def on_vote(session: Session | None, request: gr.Request) -> list[Any]:
            return view(handlers.vote(session, kind, owner_of(request, settings), client_of(request, settings)))
        return on_vote

    for button, (kind, _, key) in zip(votes, VOTE_BUTTONS, strict=True):
        button.click(voter(kind), [state], outputs, api_name=f"battle_vote_{key}", concurrency_limit=None)

    @guarded
    def on_new_round(session: Session | None, request: gr.Request) -> list[Any]:
        return view(handlers.new_round(session, MODE, owner_of(request, settings)), clear_text=True)

    # The chat panes' own trash icon means the same as New round (else only the browser's copy
    # would be cleared, and the next reply would bring the old conversation back).
    gr.on([new_round.click, *(chat.clear for chat in chats)], on_new_round, [state], outputs,
          api_name="battle_new_round", cancels=running, concurrency_limit=None)
    return status

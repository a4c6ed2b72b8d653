"""The named tabs: Side by side (two models you pick) and Direct chat (one model). Wiring only.

Each pane has a model dropdown listing every model with its status; only ready models can be
chosen (the handler refuses the others and the dropdown goes back). Choosing another model clears
that pane and loads the model's defaults from the models file into its parameter controls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui import arena, views
from webui.arena import PAIR_VOTES, PANE_LABELS, SINGLE_VOTES, Refused, Session
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

PAIR_BUTTONS = (("leftvote", "👈 A is better", "a"), ("rightvote", "👉 B is better", "b"),
                ("tievote", "🤝 Tie", "tie"), ("bothbad_vote", "👎 Both are bad", "bad"))
SINGLE_BUTTONS = (("upvote", "👍", "up"), ("downvote", "👎", "down"), ("flag", "⚑ Flag", "flag"))
assert {k for k, _, _ in PAIR_BUTTONS} == set(PAIR_VOTES) and {k for k, _, _ in SINGLE_BUTTONS} == set(SINGLE_VOTES)


@dataclass
class NamedTab:
    """What the app-level status timer updates."""

    status: gr.Markdown
    dropdowns: list[gr.Dropdown]


def build_named_tab(services: Services, handlers: Handlers, mode: str) -> NamedTab:
    settings = services.settings
    prefix = "sbs" if mode == "side_by_side" else "direct"
    n = 2 if mode == "side_by_side" else 1
    status = gr.Markdown(elem_id=f"{prefix}-status")
    state = gr.State(None)
    dropdowns, chats, controls, prompts = [], [], [], []
    with gr.Row():
        for i in range(n):
            label = PANE_LABELS[i] if n == 2 else "Chat"
            suffix = f"-{'ab'[i]}" if n == 2 else ""
            with gr.Column():
                dropdowns.append(gr.Dropdown(choices=[], value=None, label=f"Model{' ' + 'AB'[i] if n == 2 else ''}",
                                             allow_custom_value=True, elem_id=f"{prefix}-model{suffix}"))
                chats.append(chat_pane(label, f"{prefix}-chat{suffix}"))
                controls.append(param_controls(label, anonymous=False, elem_prefix=f"{prefix}{suffix}"))
                with gr.Accordion("Show prompt", open=False):
                    prompts.append(gr.Code(value="", language=None, interactive=False, wrap_lines=True,
                                           label="The exact prompt the template produced", elem_id=f"{prefix}-prompt{suffix}"))
    same = None
    if n == 2:
        same = gr.Checkbox(False, label="Use Model A's parameters for both panes", elem_id=f"{prefix}-same")
        wire_mirror(same, controls[0], controls[1], api_name=f"{prefix}_same_params")
    buttons = PAIR_BUTTONS if n == 2 else SINGLE_BUTTONS
    with gr.Row():
        votes = [gr.Button(text, interactive=False, elem_id=f"{prefix}-vote-{key}") for _, text, key in buttons]
    with gr.Row():
        text = gr.Textbox(show_label=False, placeholder="Type a message and press Enter", scale=8,
                          max_length=settings.max_input_chars, elem_id=f"{prefix}-input")
        send = gr.Button("Send", variant="primary", scale=1, elem_id=f"{prefix}-send")
    with gr.Row():
        stop = gr.Button("⏹ Stop", variant="stop", interactive=False, elem_id=f"{prefix}-stop")
        regen_sets = [(0, 1), (0,), (1,)] if n == 2 else [(0,)]
        regens = [gr.Button("🔄 Regenerate" if len(p) == n else f"🔄 {'AB'[p[0]]}", interactive=False,
                            elem_id=f"{prefix}-regen" + ("" if len(p) == n else f"-{'ab'[p[0]]}")) for p in regen_sets]
        clear = gr.Button("🗑 Clear", elem_id=f"{prefix}-clear")

    outputs = [state, *chats, *prompts, *votes, text, send, stop, *regens]
    param_inputs = [*([same] if same is not None else []), *(c for ctl in controls for c in ctl.inputs)]

    def view(session: Session | None, clear_text: bool = False) -> list[Any]:
        busy = session is not None and session.busy
        started = session is not None and any(p.turns for p in session.panes)
        panes = [gr.update(value=views.chat_messages(session.panes[i]) if session else [],
                           label=views.pane_label(session, i, mode)) for i in range(n)]
        shown = [views.last_prompt(session.panes[i]) if session else "" for i in range(n)]
        box = gr.update(value="") if clear_text else gr.update()
        return [session, *panes, *shown, *[gr.update(interactive=arena.can_vote(session))] * len(votes), box,
                gr.update(interactive=not busy), gr.update(interactive=busy),
                *[gr.update(interactive=started and not busy)] * len(regens)]

    def unpack(values: tuple[Any, ...]) -> tuple[bool, list]:
        same_value = bool(values[0]) if same is not None else False
        return same_value, split_settings(values[1 if same is not None else 0:], controls)

    @guarded
    def on_send(request: gr.Request, session: Session | None, message: str, *values: Any):
        models, rest = values[:n], values[n:]
        same_value, pane_settings = unpack(rest)
        stream = handlers.send(session, mode, message, pane_settings, owner_of(request, settings),
                               client_of(request, settings), models=list(models), same_settings=same_value)
        for k, current in enumerate(stream):
            yield view(current, clear_text=k == 0)

    def regenerate(panes: tuple[int, ...]):
        @guarded
        def on_regenerate(request: gr.Request, session: Session | None, *values: Any):
            same_value, pane_settings = unpack(values)
            for current in handlers.regenerate(session, panes, pane_settings, owner_of(request, settings),
                                               client_of(request, settings), same_settings=same_value):
                yield view(current)
        return on_regenerate

    running = [gr.on([send.click, text.submit], on_send, [state, text, *dropdowns, *param_inputs], outputs,
                     api_name=f"{prefix}_send", **STREAMING)]
    for button, panes in zip(regens, regen_sets, strict=True):
        name = "" if len(panes) == n else f"_{'ab'[panes[0]]}"
        running.append(button.click(regenerate(panes), [state, *param_inputs], outputs,
                                    api_name=f"{prefix}_regenerate{name}", **STREAMING))

    @guarded
    def on_stop(session: Session | None, request: gr.Request) -> list[Any]:
        return view(handlers.stop(session, owner_of(request, settings)))

    stop.click(on_stop, [state], outputs, api_name=f"{prefix}_stop", cancels=running, concurrency_limit=None,
               show_progress="hidden")

    def voter(kind: str):
        @guarded
        def on_vote(session: Session | None, request: gr.Request) -> list[Any]:
            session = handlers.vote(session, kind, owner_of(request, settings), client_of(request, settings))
            gr.Info("Thanks, your vote was recorded.")
            return view(session)
        return on_vote

    for button, (kind, _, key) in zip(votes, buttons, strict=True):
        button.click(voter(kind), [state], outputs, api_name=f"{prefix}_vote_{key}", concurrency_limit=None)

    @guarded
    def on_clear(session: Session | None, request: gr.Request) -> list[Any]:
        return view(handlers.new_round(session, mode, owner_of(request, settings)), clear_text=True)

    # The chat panes' own trash icon clears the conversation on the server too.
    gr.on([clear.click, *(chat.clear for chat in chats)], on_clear, [state], outputs, api_name=f"{prefix}_clear",
          cancels=running, concurrency_limit=None)

    for i, dropdown in enumerate(dropdowns):
        dropdown.change(_chooser(handlers, settings, mode, i, view), [state, dropdown],
                        [*outputs, dropdown, *controls[i].fields], api_name=f"{prefix}_model{'_' + 'ab'[i] if n == 2 else ''}",
                        concurrency_limit=None, show_progress="hidden")
    return NamedTab(status, dropdowns)


def _chooser(handlers: Handlers, settings: Any, mode: str, index: int, view: Any):
    """The dropdown's change handler: select (clearing the pane and loading the model's defaults
    into the controls), or refuse and put the dropdown back."""

    @guarded
    def on_choose(session: Session | None, name: str | None, request: gr.Request) -> list[Any]:
        keep = [gr.skip()] * len(arena.PaneSettings.FIELDS)
        if not name:
            return [*view(session), gr.skip(), *keep]
        try:
            session, changed = handlers.choose_model(session, mode, index, name, owner_of(request, settings))
        except Refused as exc:
            gr.Warning(str(exc))
            previous = session.panes[index].model if session is not None else None
            return [*view(session), gr.update(value=previous), *keep]
        if not changed:
            return [*view(session), gr.skip(), *keep]
        return [*view(session), gr.skip(), *handlers.pane_defaults(name).values()]

    return on_choose

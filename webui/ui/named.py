"""The named tabs: Side by side (two models you pick) and Direct chat (one model). Wiring only.

Each pane has a model dropdown listing every model with its status; only ready models can be
chosen (the handler refuses the others and the dropdown goes back). Choosing another model clears
that pane and loads the model's defaults from the models file into its parameter controls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.arena import rules as arena
from webui.arena.handlers import Handlers
from webui.arena.rules import PANE_LABELS, Refused, Session
from webui.ui import views
from webui.ui.common import (
    PAIR_VOTE_BUTTONS,
    SINGLE_VOTE_BUTTONS,
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



@dataclass
class NamedTab:
    """What the app-level events update: the status timer, and the page load (which creates the
    session, so that two dropdowns set at once by the timer never each create their own)."""

    status: gr.Markdown
    dropdowns: list[gr.Dropdown]
    state: gr.State


def build_named_tab(services: Services, handlers: Handlers, mode: str) -> NamedTab:
    tab = NamedTabBuilder(services, handlers, mode)
    return NamedTab(tab.status, tab.dropdowns, tab.state)


class NamedTabBuilder:
    def __init__(self, services: Services, handlers: Handlers, mode: str) -> None:
        self.settings, self.handlers, self.mode = services.settings, handlers, mode
        self.prefix = "sbs" if mode == "side_by_side" else "direct"
        self.n = 2 if mode == "side_by_side" else 1
        self.buttons = PAIR_VOTE_BUTTONS if self.n == 2 else SINGLE_VOTE_BUTTONS
        self.regen_sets = [(0, 1), (0,), (1,)] if self.n == 2 else [(0,)]
        self._layout()
        self.outputs = [self.state, *self.chats, *self.prompts, *self.votes, self.text, self.send, self.stop,
                        *self.regens]
        self.param_inputs = [*([self.same] if self.same is not None else []),
                             *(c for ctl in self.controls for c in ctl.inputs)]
        running = self._wire_generation()
        self._wire_the_rest(running)
        self._wire_dropdowns()

    def _pane_suffix(self, i: int) -> str:
        return f"-{'ab'[i]}" if self.n == 2 else ""

    def _layout(self) -> None:
        prefix = self.prefix
        self.status = gr.Markdown(elem_id=f"{prefix}-status")
        self.state = gr.State(None)
        self.dropdowns, self.chats, self.controls, self.prompts = [], [], [], []
        with gr.Row():
            for i in range(self.n):
                self._layout_pane(i)
        self.same = None
        if self.n == 2:
            self.same = gr.Checkbox(False, label="Use Model A's parameters for both panes", elem_id=f"{prefix}-same")
            wire_mirror(self.same, self.controls[0], self.controls[1], api_name=f"{prefix}_same_params")
        with gr.Row():
            self.votes = [gr.Button(text, interactive=False, elem_id=f"{prefix}-vote-{key}") for _, text, key in self.buttons]
        with gr.Row():
            self.text = gr.Textbox(show_label=False, placeholder="Type a message and press Enter", scale=8,
                                   elem_id=f"{prefix}-input")
            self.send = gr.Button("Send", variant="primary", scale=1, elem_id=f"{prefix}-send")
        with gr.Row():
            self.stop = gr.Button("⏹ Stop", variant="stop", interactive=False, elem_id=f"{prefix}-stop")
            self.regens = [gr.Button("🔄 Regenerate" if len(p) == self.n else f"🔄 {'AB'[p[0]]}", interactive=False,
                                     elem_id=f"{prefix}-regen" + ("" if len(p) == self.n else self._pane_suffix(p[0])))
                           for p in self.regen_sets]
            self.clear = gr.Button("🗑 Clear", elem_id=f"{prefix}-clear")

    def _layout_pane(self, i: int) -> None:
        label = PANE_LABELS[i] if self.n == 2 else "Chat"
        suffix = self._pane_suffix(i)
        with gr.Column():
            # Choices come from the status timer, never from the page config; custom values are
            # allowed so that the handler (not Gradio) answers for a name that is not ready.
            self.dropdowns.append(gr.Dropdown(choices=[], value=None, label=label if self.n == 2 else "Model",
                                              allow_custom_value=True, elem_id=f"{self.prefix}-model{suffix}"))
            self.chats.append(chat_pane(label, f"{self.prefix}-chat{suffix}"))
            self.controls.append(param_controls(label, anonymous=False, elem_prefix=f"{self.prefix}{suffix}"))
            with gr.Accordion("Show prompt", open=False):
                self.prompts.append(gr.Code(value="", language=None, interactive=False, wrap_lines=True,
                                            label="The exact prompt the template produced",
                                            elem_id=f"{self.prefix}-prompt{suffix}"))

    def view(self, session: Session | None, clear_text: bool = False) -> list[Any]:
        busy = session is not None and session.busy
        started = session is not None and any(p.turns for p in session.panes)
        panes = [gr.update(value=views.chat_messages(session.panes[i]) if session else [],
                           label=views.pane_label(session, i, self.mode)) for i in range(self.n)]
        shown = [views.last_prompt(session.panes[i]) if session else "" for i in range(self.n)]
        box = gr.update(value="") if clear_text else gr.update()
        return [session, *panes, *shown, *[gr.update(interactive=arena.can_vote(session))] * len(self.votes), box,
                gr.update(interactive=not busy), gr.update(interactive=busy),
                *[gr.update(interactive=started and not busy)] * len(self.regens)]

    def _unpack(self, values: tuple[Any, ...]) -> tuple[bool, list]:
        """[same?, *pane controls] -> (same, one PaneSettings per pane)."""
        has_same = self.same is not None
        return (bool(values[0]) if has_same else False), split_settings(values[1 if has_same else 0:], self.controls)

    def _wire_generation(self) -> list[Any]:
        settings, handlers, mode, n = self.settings, self.handlers, self.mode, self.n

        @guarded
        def on_send(request: gr.Request, session: Session | None, message: str, *values: Any):
            same, pane_settings = self._unpack(values[n:])
            stream = handlers.send(session, mode, message, pane_settings, owner_of(request),
                                   client_of(request, settings), models=list(values[:n]), same_settings=same)
            for k, current in enumerate(stream):
                yield self.view(current, clear_text=k == 0)

        def regenerate(panes: tuple[int, ...]):
            @guarded
            def on_regenerate(request: gr.Request, session: Session | None, *values: Any):
                same, pane_settings = self._unpack(values)
                for current in handlers.regenerate(session, panes, pane_settings, owner_of(request),
                                                   client_of(request, settings), same_settings=same):
                    yield self.view(current)
            return on_regenerate

        running = [gr.on([self.send.click, self.text.submit], on_send,
                         [self.state, self.text, *self.dropdowns, *self.param_inputs], self.outputs,
                         api_name=f"{self.prefix}_send", **STREAMING)]
        for button, panes in zip(self.regens, self.regen_sets, strict=True):
            name = "" if len(panes) == n else f"_{'ab'[panes[0]]}"
            running.append(button.click(regenerate(panes), [self.state, *self.param_inputs], self.outputs,
                                        api_name=f"{self.prefix}_regenerate{name}", **STREAMING))
        return running

    def _wire_the_rest(self, running: list[Any]) -> None:
        settings, handlers, prefix = self.settings, self.handlers, self.prefix

        @guarded
        def on_stop(session: Session | None, request: gr.Request) -> list[Any]:
            return self.view(handlers.stop(session, owner_of(request)))

        # Not queued: Stop must work even when a busy server's queue is full of waiting messages.
        self.stop.click(on_stop, [self.state], self.outputs, api_name=f"{prefix}_stop", cancels=running,
                        queue=False, show_progress="hidden")

        def voter(kind: str):
            @guarded
            def on_vote(session: Session | None, request: gr.Request) -> list[Any]:
                session = handlers.vote(session, kind, owner_of(request), client_of(request, settings))
                gr.Info("Thanks, your vote was recorded.")
                return self.view(session)
            return on_vote

        for button, (kind, _, key) in zip(self.votes, self.buttons, strict=True):
            button.click(voter(kind), [self.state], self.outputs, api_name=f"{prefix}_vote_{key}", concurrency_limit=None)

        @guarded
        def on_clear(session: Session | None, request: gr.Request) -> list[Any]:
            return self.view(handlers.new_round(session, self.mode, owner_of(request)), clear_text=True)

        # The chat panes' own trash icon clears the conversation on the server too.
        gr.on([self.clear.click, *(chat.clear for chat in self.chats)], on_clear, [self.state], self.outputs,
              api_name=f"{prefix}_clear", cancels=running, concurrency_limit=None)

    def _wire_dropdowns(self) -> None:
        for i, dropdown in enumerate(self.dropdowns):
            name = f"{self.prefix}_model" + (f"_{'ab'[i]}" if self.n == 2 else "")
            dropdown.change(self._chooser(i), [self.state, dropdown], [*self.outputs, dropdown, *self.controls[i].fields],
                            api_name=name, concurrency_limit=None, show_progress="hidden")

    def _chooser(self, index: int):
        """The dropdown's change handler: select (clearing the pane and loading the model's defaults
        into the controls), or refuse and put the dropdown back."""
        handlers, mode = self.handlers, self.mode

        @guarded
        def on_choose(session: Session | None, name: str | None, request: gr.Request) -> list[Any]:
            keep = [gr.skip()] * len(arena.PaneSettings.FIELDS)
            if not name:
                return [*self.view(session), gr.skip(), *keep]
            try:
                session, changed = handlers.choose_model(session, mode, index, name, owner_of(request))
            except Refused as exc:
                gr.Warning(str(exc))
                previous = session.panes[index].model if session is not None else None
                return [*self.view(session), gr.update(value=previous), *keep]
            if not changed:
                return [*self.view(session), gr.skip(), *keep]
            return [*self.view(session), gr.skip(), *handlers.pane_defaults(name).values()]

        return on_choose

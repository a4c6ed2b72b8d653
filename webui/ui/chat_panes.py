"""One chat tab's pane events, wired: "same settings for every pane", each pane's model dropdown
and the pane count (side by side).

Guarantee: a chosen model clears its pane and loads the model's defaults into that pane's settings;
a refused choice puts the dropdown back and leaves the settings as they were; a dropdown answers
for its own pane only (another pane's chooser, answering at the same moment, keeps its label). What
each event shows comes from webui.ui.chat_view, drawn from the session alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from webui.arena import rules as arena
from webui.arena.handlers import Handlers
from webui.arena.rules import Refused, Session
from webui.errors import ArenaError
from webui.ui.chat_layout import PANE_LETTERS
from webui.ui.chat_view import ChatView
from webui.ui.common import INTERNAL, guarded, in_order, owner_of, progress_on, wire_mirror


class PaneEvents:
    """Wires the events that change one pane's model or settings, or how many panes show; each
    `wire_*` method connects its events once."""

    def __init__(self, handlers: Handlers, view: ChatView) -> None:
        self.handlers, self.view, self.ui = handlers, view, view.ui
        self.mode, self.prefix = view.ui.kind.mode, view.ui.kind.prefix

    def _events(self, **extra: Any) -> dict[str, Any]:
        return {**progress_on(self.ui.sink), **extra}

    def wire_same_settings(self) -> None:
        """Pane A's settings, mirrored into every other pane while "same settings" is ticked."""
        ui = self.ui
        if ui.same is not None:
            wire_mirror(
                ui.same,
                ui.panes[0].controls,
                [p.controls for p in ui.panes[1:]],
                api_name=f"{self.prefix}_same_params",
                sink=ui.sink,
            )

    def wire_choices(self) -> None:
        """The model dropdowns and the pane count, where the tab has them."""
        if self.ui.dropdowns:
            self._wire_dropdowns()
        if self.ui.count is not None:
            self._wire_count()

    def _wire_dropdowns(self) -> None:
        ui = self.ui
        for i, dropdown in enumerate(ui.dropdowns):
            name = f"{self.prefix}_model" + (f"_{PANE_LETTERS[i]}" if len(ui.dropdowns) > 1 else "")
            pane = ui.panes[i]
            outputs = [
                ui.state,
                pane.chat,
                *([pane.prompt] if pane.prompt else []),
                *ui.votes,
                ui.regen,
                *([pane.regen] if pane.regen else []),
                dropdown,
                *pane.controls.fields,
            ]
            dropdown.change(
                self._chooser(i, outputs),
                [ui.state, dropdown],
                outputs,
                api_name=name,
                concurrency_limit=None,
                **self._events(),
            )

    def _chooser(self, index: int, outputs: list[Any]) -> Callable[..., list[Any]]:
        """The dropdown's change handler: select (clearing the pane and loading the model's defaults
        into the controls), or refuse and put the dropdown back."""
        handlers, mode = self.handlers, self.mode
        pane = self.ui.panes[index]
        keep = [gr.skip()] * len(arena.PaneSettings.FIELDS)

        def answer(session: Session | None, dropdown: Any, controls: list[Any]) -> list[Any]:
            return in_order(
                outputs,
                {
                    **self.view.pane(session, index),
                    pane.dropdown: dropdown,
                    **dict(zip(pane.controls.fields, controls, strict=True)),
                },
            )

        @guarded
        def on_choose(session: Session | None, model: str | None, request: gr.Request) -> list[Any]:
            if not model:
                return answer(session, gr.skip(), keep)
            if session is not None and index >= len(session.panes):
                # A hidden pane takes its model when it is shown; its controls follow the dropdown now.
                return answer(session, gr.skip(), self._defaults(model, keep))
            try:
                session, changed = handlers.choose_model(session, mode, index, model, owner_of(request))
            except Refused as exc:
                gr.Warning(str(exc))
                previous = session.panes[index].model if session is not None else None
                return answer(session, gr.update(value=previous), keep)
            defaults = list(handlers.pane_defaults(model).values()) if changed else keep
            return answer(session, gr.skip(), defaults)

        return on_choose

    def _defaults(self, model: str, otherwise: list[Any]) -> list[Any]:
        try:
            return list(self.handlers.pane_defaults(model).values())
        except ArenaError:  # no such model: the handler says so when it is used
            return otherwise

    def _wire_count(self) -> None:
        """Side by side: 2, 3 or 4 panes; another number starts a new conversation."""
        handlers, mode, ui, view = self.handlers, self.mode, self.ui, self.view
        layout = [*(p.column for p in ui.panes), *(p.settings for p in ui.panes), ui.vote_row, ui.keys]
        assert ui.count is not None, "a tab with one pane count has no count to wire"

        @guarded
        def on_count(request: gr.Request, session: Session | None, count: int, *models: str | None) -> list[Any]:
            session, _ = handlers.set_pane_count(session, mode, count, owner_of(request), models=models)
            return in_order(outputs, {**view.pane_count(len(session.panes)), **view.shown(session)})

        outputs = [*layout, *view.outputs]
        ui.count.change(
            on_count,
            [ui.state, ui.count, *ui.dropdowns],
            outputs,
            api_name=f"{self.prefix}_panes",
            concurrency_limit=None,
            **self._events(**INTERNAL),
        )

"""The chat events' inputs by name, and what their values mean.

Guarantee: `InputNames` alone decides which named parameters Send and Regenerate take and in which
order (the API's positional order: a two-pane caller's positions are the same as before panes C
and D existed), and `parse` alone turns those values into what the handlers take, refusing a
malformed control value with the control's name. Both are pure: no component, no Gradio.
`named_components` is the one place a name meets its component.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webui.arena.rules import PaneSettings

if TYPE_CHECKING:
    from webui.ui.chat_layout import ChatLayout

LETTERS = "abcd"
MESSAGE, SAME, PANES = "message", "same_params", "panes"


@dataclass(frozen=True)
class PaneNames:
    """One pane's parameter names."""

    model: str | None  # its model dropdown (a battle has none)
    own: str | None  # its "use the model's own settings" box (battle only)
    fields: tuple[str, ...]  # its controls, in PaneSettings.FIELDS order

    @property
    def controls(self) -> list[str]:
        return [*([self.own] if self.own else []), *self.fields]


@dataclass(frozen=True)
class InputNames:
    """The names one chat tab's Send and Regenerate take: one pane is unprefixed ("model",
    "temperature"), several are lettered ("model_a", "a_temperature", ...)."""

    panes: tuple[PaneNames, ...]
    same: bool  # "Model A's parameters for every pane" (several panes)
    count: bool  # how many panes (side by side)

    @classmethod
    def of(cls, panes: int, *, models: bool, own: bool, count: bool) -> InputNames:
        def pane(i: int) -> PaneNames:
            head = "" if panes == 1 else f"{LETTERS[i]}_"
            model = None if not models else "model" if panes == 1 else f"model_{LETTERS[i]}"
            fields = tuple(f"{head}{name}" for name in PaneSettings.FIELDS)
            return PaneNames(model, f"{head}own_settings" if own else None, fields)

        return cls(tuple(pane(i) for i in range(panes)), same=panes > 1, count=count)

    def send(self) -> list[str]:
        """The message, panes A and B (models, then 'same parameters', then controls), then the
        pane count and panes C and D (models, then controls)."""
        return self._order(send=True)

    def regenerate(self) -> list[str]:
        """As `send`, without the message, the models and the pane count."""
        return self._order(send=False)

    def _order(self, *, send: bool) -> list[str]:
        first, extra = self.panes[:2], self.panes[2:]

        def models(panes: Sequence[PaneNames]) -> list[str]:
            return [p.model for p in panes if send and p.model]

        def controls(panes: Sequence[PaneNames]) -> list[str]:
            return [name for p in panes for name in p.controls]

        names = [MESSAGE] if send else []
        names += models(first) + ([SAME] if self.same else []) + controls(first)
        if extra:
            names += ([PANES] if send and self.count else []) + models(extra) + controls(extra)
        return names


@dataclass(frozen=True)
class ChatInputs:
    """What a Send or Regenerate asks for, in the handlers' terms."""

    settings: list[PaneSettings]  # one per pane of the tab, shown or not
    models: list[str | None]  # one per pane with a dropdown (none in a battle; None on Regenerate)
    same: bool
    message: Any = None  # Send only; the handler checks it
    panes: Any = None  # Send in side by side only; the handler checks it


def parse(names: InputNames, values: Mapping[str, Any]) -> ChatInputs:
    """{name: value} -> ChatInputs. A name left out reads as None (a gradio_client caller may leave
    parameters out), which the checks below or the handler refuse with its name."""
    settings = [
        PaneSettings.from_values(
            [values.get(f) for f in pane.fields], own_defaults=bool(pane.own and values.get(pane.own))
        )
        for pane in names.panes
    ]
    return ChatInputs(
        settings=settings,
        models=[values.get(p.model) for p in names.panes if p.model],
        same=bool(values.get(SAME, False)),
        message=values.get(MESSAGE),
        panes=values.get(PANES),
    )


def named_components(layout: ChatLayout) -> dict[str, Any]:
    """{name: component} for every name of the tab's `input_names`."""
    names = input_names(layout)
    out: dict[str, Any] = {MESSAGE: layout.text}
    if layout.same is not None:
        out[SAME] = layout.same
    if layout.count is not None:
        out[PANES] = layout.count
    for pane, ui in zip(names.panes, layout.panes, strict=True):
        if pane.model:
            out[pane.model] = ui.dropdown
        if pane.own:
            out[pane.own] = ui.controls.own
        out.update(zip(pane.fields, ui.controls.fields, strict=True))
    return out


def input_names(layout: ChatLayout) -> InputNames:
    kind = layout.kind
    return InputNames.of(kind.max_panes, models=not kind.anonymous, own=kind.anonymous, count=layout.count is not None)


def name_parameters(fn: Callable[..., Any], names: Sequence[str]) -> None:
    """Give an event handler that takes `*values` named parameters, so that the API page and
    `gradio_client` show (and accept as keywords) message, model_a, a_temperature, ... The first two
    parameters (the request and the session) stay as they are."""
    head = list(inspect.signature(fn).parameters.values())[:2]
    tail = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None) for name in names]
    fn.__signature__ = inspect.Signature([*head, *tail])  # type: ignore[attr-defined]

"""Pieces every chat tab uses: the chat pane, the parameter controls, who the caller is, the guard
that turns the rules' refusals into messages (and anything unexpected into a generic one), and the
update that leaves out whatever did not change."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr

from webui.access.clients import client_info
from webui.arena.rules import Owner, PaneSettings, Refused
from webui.config import Settings
from webui.records.events import ClientInfo
from webui.types import SamplingParams

log = logging.getLogger(__name__)
UNEXPECTED = "Something went wrong on the server. Please try again, or start a new round."
# One concurrency group for every streaming event of every tab, at the queue's default limit
# (webui.server.security.configure_queue sizes it to the models' generation slots): more would only wait
# inside the engine, where nobody sees a queue position.
GENERATION = "generation"
STREAMING: dict[str, Any] = {"concurrency_id": GENERATION, "concurrency_limit": "default"}
# Events that only keep the page in order (status timer, tab loads, settings toggles): callable by
# the page, not listed as API endpoints (docs/ui.md lists the documented ones).
INTERNAL: dict[str, Any] = {"api_visibility": "private"}
LATEX: list[dict[str, str | bool]] = [
    {"left": "$$", "right": "$$", "display": True},
    {"left": "\\[", "right": "\\]", "display": True},
    {"left": "\\(", "right": "\\)", "display": False},
    {"left": "$", "right": "$", "display": False},
]


def progress_on(sink: gr.Component) -> dict[str, Any]:
    """Event options: no progress shown, and the event's loading status kept on `sink` (an invisible
    component), never on its outputs: the page walks every progress target's subtree for every
    streamed update (docs/ui.md, "Streaming")."""
    return {"show_progress": "hidden", "show_progress_on": [sink]}


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Refused -> its message; anything else -> a generic message (the details go to the server
    log only: an exception text may name a model that must stay hidden)."""

    def translate(exc: Exception) -> Exception:
        if isinstance(exc, gr.Error):
            return exc
        if isinstance(exc, Refused):
            return gr.Error(str(exc), print_exception=False)
        log.exception("handler %s failed", fn.__name__)
        return gr.Error(UNEXPECTED, print_exception=False)

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def stream(*args: Any, **kwargs: Any) -> Any:
            try:
                yield from fn(*args, **kwargs)
            except Exception as exc:  # translated, never shown raw
                raise translate(exc) from None

        return stream

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # translated, never shown raw
            raise translate(exc) from None

    return call


def owner_of(request: gr.Request | None) -> Owner:
    return Owner(getattr(request, "session_hash", None))


def client_of(request: gr.Request | None, settings: Settings) -> ClientInfo:
    return client_info(request, settings)


# The message boxes deliberately have no max_length: a browser's maxlength cuts a long paste
# silently, while the handlers refuse it with a message that gives the limit.


def chat_pane(label: str, elem_id: str, *, clearable: bool = True) -> gr.Chatbot:
    """HTML in messages is sanitised in the browser (sanitize_html, and no custom tags kept), so a
    prompt or a reply carrying <script> or onerror= shows as text or nothing, and never runs.

    Gradio always draws a 🗑 (clear) icon in the chat's header; `clearable=False` hides it (the
    page's stylesheet, webui.ui.page): in a battle it would discard the battle without a word."""
    return gr.Chatbot(
        label=label,
        elem_id=elem_id,
        elem_classes=["arena-chat"] if clearable else ["arena-chat", "arena-no-clear"],
        height=420,
        sanitize_html=True,
        allow_tags=False,
        render_markdown=True,
        latex_delimiters=LATEX,
        buttons=["copy", "copy_all"],
        feedback_options=None,
        layout="bubble",
        placeholder="The reply appears here.",
    )


def in_order(outputs: Sequence[Any], shown: Mapping[Any, Any]) -> list[Any]:
    """An event's values in the order of its outputs, from {component: value}: the code says what
    goes where, and a component left out, or one the event does not output, fails here instead of
    drawing a value in the wrong place."""
    if len(shown) != len(outputs) or any(c not in shown for c in outputs):
        missing = [getattr(c, "elem_id", None) or type(c).__name__ for c in outputs if c not in shown]
        raise ValueError(f"values for {len(shown)} components, {len(outputs)} outputs; missing: {missing}")
    return [shown[c] for c in outputs]


class Delta:
    """One event run's updates, made cheap for Gradio to send: an output whose properties did not
    change goes as its bare value (Gradio diffs those; an update dict rebuilds the component), an
    unchanged one outside `bare` as `gr.skip()` (the page changes those itself). Values compare as
    plain data, a session (gr.State, changed in place) by identity; Gradio pops "value" out of the
    dicts it is given, so it gets copies. Why each form: docs/ui.md, "Streaming"."""

    def __init__(self) -> None:
        self.last: list[Any] | None = None

    def __call__(self, values: list[Any], bare: Collection[int] = ()) -> list[Any]:
        last, self.last = self.last, values
        if last is None:
            return self.full()
        out: list[Any] = []
        for i, (old, new) in enumerate(zip(last, values, strict=True)):
            if not _same(old, new):
                out.append(_changed(old, new))
            elif i in bare and (not _is_update(new) or "value" in new):
                out.append(new["value"] if _is_update(new) else new)
            else:
                out.append(gr.skip())
        return out

    def full(self) -> list[Any]:
        """The newest values, every one of them."""
        return [_copy(v) for v in self.last or []]

    def whole(self, values: list[Any]) -> list[Any]:
        """Every output as given, updates and all: the last update of a run, which a gradio_client
        caller gets as the result (a chat with its label, not a bare value)."""
        self.last = values
        return self.full()


def _changed(old: Any, new: Any) -> Any:
    """What to send for an output that changed from `old` to `new`: its bare value when only the
    value changed, else the update (a copy)."""
    if _is_update(old) and _is_update(new) and "value" in new:
        props = {k: v for k, v in new.items() if k != "value"}
        if props == {k: v for k, v in old.items() if k != "value"}:
            return new["value"]
    return _copy(new)


def _is_update(value: Any) -> bool:
    return isinstance(value, dict) and value.get("__type__") == "update"


def _copy(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value


def _same(old: Any, new: Any) -> bool:
    if old is new:
        return True
    if isinstance(new, (dict, list, str, int, float, bool)) or new is None:
        return type(old) is type(new) and old == new
    return False


Field = gr.Slider | gr.Number | gr.Textbox | gr.Checkbox  # a pane's parameter controls


@dataclass
class Controls:
    """One pane's parameter accordion. `own` (battle only) means: use the model's own settings."""

    own: gr.Checkbox | None
    fields: Sequence[Field]

    @property
    def inputs(self) -> list[Field]:
        return [*([self.own] if self.own is not None else []), *self.fields]


OWN_SETTINGS_NOTE = (
    "This pane uses the model's own settings: they are shown with its name after the vote. "
    "Untick the box to choose this pane's settings yourself."
)


def param_controls(title: str, *, anonymous: bool, elem_prefix: str, sink: gr.Component) -> Controls:
    """Sampling controls in an accordion. In a battle the models' own defaults cannot be shown
    (they would tell the models apart), so a checkbox chooses them, and while it is ticked the
    controls are hidden behind a note that says so: numbers that are not used are never shown."""
    d = SamplingParams()
    with gr.Accordion(f"Parameters · {title}", open=False, elem_id=f"{elem_prefix}-params"):
        own = note = None
        if anonymous:
            own = gr.Checkbox(
                True, label="Use the model's own settings (hidden until the vote)", elem_id=f"{elem_prefix}-own"
            )
            note = gr.Markdown(OWN_SETTINGS_NOTE, elem_id=f"{elem_prefix}-own-note")
        editable = not anonymous
        ids = {name: f"{elem_prefix}-{name.replace('_', '-')}" for name in PaneSettings.FIELDS}
        with gr.Column(visible=not anonymous, elem_id=f"{elem_prefix}-fields") as shown:
            fields = _fields(d, ids, editable)
    if own is not None and note is not None:

        def on_own(mine: bool) -> list[Any]:
            """The note while the model's own settings are used, the controls (editable) otherwise."""
            return [
                gr.update(visible=mine),
                gr.update(visible=not mine),
                *[gr.update(interactive=not mine)] * len(fields),
            ]

        own.change(
            on_own,
            own,
            [note, shown, *fields],
            api_name=f"{elem_prefix.replace('-', '_')}_own_settings",
            **progress_on(sink),
            **INTERNAL,
        )
    return Controls(own, fields)


def _fields(d: SamplingParams, ids: Mapping[str, str], editable: bool) -> list[Field]:
    return [
        gr.Slider(
            0.0,
            2.0,
            value=d.temperature,
            step=0.05,
            label="temperature (0 = greedy)",
            interactive=editable,
            elem_id=ids["temperature"],
        ),
        gr.Slider(0.05, 1.0, value=d.top_p, step=0.01, label="top_p", interactive=editable, elem_id=ids["top_p"]),
        gr.Slider(0, 200, value=d.top_k, step=1, label="top_k (0 = off)", interactive=editable, elem_id=ids["top_k"]),
        gr.Slider(
            1,
            4096,
            value=d.max_new_tokens,
            step=1,
            label="max_new_tokens",
            interactive=editable,
            elem_id=ids["max_new_tokens"],
        ),
        gr.Slider(
            0.5,
            2.0,
            value=d.repetition_penalty,
            step=0.05,
            label="repetition_penalty",
            interactive=editable,
            elem_id=ids["repetition_penalty"],
        ),
        gr.Number(value=-1, precision=0, label="seed (-1 = random)", interactive=editable, elem_id=ids["seed"]),
        gr.Textbox(
            value="",
            lines=2,
            label="system prompt",
            placeholder="(the model's own)",
            interactive=editable,
            elem_id=ids["system_prompt"],
        ),
    ]


def split_settings(values: Sequence[Any], controls: Sequence[Controls]) -> list[PaneSettings]:
    """The flat control values of several panes -> one PaneSettings per pane."""
    out, at = [], 0
    for c in controls:
        own = bool(values[at]) if c.own is not None else False
        at += 1 if c.own is not None else 0
        out.append(PaneSettings.from_values(list(values[at : at + len(c.fields)]), own_defaults=own))
        at += len(c.fields)
    return out


def mirror(same: bool, b_own: bool | None, *a_values: Any) -> list[Any]:
    """'Same parameters for every pane': another pane shows pane A's values and cannot be edited."""
    if same:
        return [gr.update(value=v, interactive=False) for v in a_values]
    has_own = len(a_values) == len(PaneSettings.FIELDS) + 1
    fields = [gr.update(interactive=not b_own if has_own else True)] * len(PaneSettings.FIELDS)
    return ([gr.update(interactive=True)] if has_own else []) + fields


def wire_mirror(same: gr.Checkbox, a: Controls, others: Sequence[Controls], api_name: str, sink: gr.Component) -> None:
    """Pane A's controls, mirrored into every other pane while `same` is ticked."""
    has_own = a.own is not None
    width = len(a.inputs)

    def run(same_value: bool, *values: Any) -> list[Any]:
        a_values, rest = values[:width], values[width:]
        out: list[Any] = []
        for k in range(len(others)):
            b_own = rest[k] if has_own else None
            out += mirror(same_value, b_own, *a_values)
        return out

    own_others = [c.own for c in others if c.own is not None]
    gr.on(
        [same.change] + [c.change for c in a.inputs],
        run,
        [same, *a.inputs, *own_others],
        [c for other in others for c in other.inputs],
        api_name=api_name,
        trigger_mode="always_last",
        **progress_on(sink),
        **INTERNAL,
    )

"""One chat tab, parameterised by its mode and panes: Battle (two anonymous panes), Side by side
(two to four named panes) and Direct chat (one pane). Wiring only: the handlers decide, the views
draw.

Nothing in a battle may carry a model name before the vote: its panes are "Model A" / "Model B",
there is no model dropdown, the parameter controls hold no model defaults, and every message comes
from the rules or is generic. The pair lives in the server-side session (gr.State), never in a
component.

Each event sends only what changed (`Delta`), and every event shows its progress, and so a refusal's
error state, on an invisible component: a refused message is shown once, as a notice, and the chat
stays as it was.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.arena import rules as arena
from webui.arena.handlers import Handlers
from webui.arena.rules import PANE_COUNTS, PANE_LABELS, Refused, Session
from webui.errors import ArenaError
from webui.records.events import Mode
from webui.types import PAIR_VOTES, SINGLE_VOTES, Vote
from webui.ui import views
from webui.ui.common import (
    INTERNAL,
    STREAMING,
    Controls,
    Delta,
    chat_pane,
    client_of,
    guarded,
    in_order,
    owner_of,
    param_controls,
    progress_on,
    wire_mirror,
)
from webui.ui.page import send_script

if TYPE_CHECKING:
    from webui.services import Services


@dataclass(frozen=True)
class Kind:
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


def build_tab(services: Services, handlers: Handlers, mode: Mode) -> ChatTab:
    """Lay out and wire one tab; the app's timer keeps `.status` (and the dropdowns) current, its
    load event fills `.state`."""
    return ChatTab(services, handlers, KINDS[mode])


class ChatTab:
    def __init__(self, services: Services, handlers: Handlers, kind: Kind) -> None:
        self.settings, self.handlers, self.kind = services.settings, handlers, kind
        self.mode, self.prefix = kind.mode, kind.prefix
        self._layout()
        self.dropdowns = [p.dropdown for p in self.panes if p.dropdown is not None]
        self.chats = [p.chat for p in self.panes]
        self.prompts = [p.prompt for p in self.panes if p.prompt is not None]
        self.pane_regens = [p.regen for p in self.panes if p.regen is not None]
        self.outputs = [
            self.state,
            *self.chats,
            *self.prompts,
            *([self.reveal] if self.reveal else []),
            self.notice,
            *self.votes,
            self.text,
            self.send,
            self.stop,
            self.regen,
            *self.pane_regens,
        ]
        # Sent as bare values in every streamed update (webui.ui.common.Delta): all but the session,
        # and the notice and the message box, which the page changes itself.
        self.bare = [
            i for i, c in enumerate(self.outputs) if all(c is not x for x in (self.state, self.notice, self.text))
        ]
        running = self._wire_generation()
        self._wire_the_rest(running)
        if self.dropdowns:
            self._wire_dropdowns()
        if self.count is not None:
            self._wire_count()

    # ---- layout -------------------------------------------------------------------------------
    def _suffix(self, i: int) -> str:
        return f"-{'abcd'[i]}" if self.kind.max_panes > 1 else ""

    def _label(self, i: int) -> str:
        return PANE_LABELS[i] if self.kind.max_panes > 1 else "Chat"

    def _layout(self) -> None:
        p = self.prefix
        gr.Markdown(self.kind.intro, elem_classes=["arena-intro"])
        self.status = gr.Markdown(elem_id=f"{p}-status")
        self.state = gr.State(None)
        self.sink = gr.HTML(visible=False)  # where progress and error states go (none is shown)
        self.count = None
        if len(self.kind.counts) > 1:
            self.count = gr.Radio(
                [(f"{n} panes", n) for n in self.kind.counts],
                value=self.kind.counts[0],
                label="Panes",
                elem_id=f"{p}-panes-count",
            )
        with gr.Row(elem_id=f"{p}-panes", elem_classes=["arena-panes"]):
            tops = [self._pane_column(i) for i in range(self.kind.max_panes)]
        self.reveal = gr.Markdown(elem_id=f"{p}-reveal") if self.kind.anonymous else None
        self.notice = gr.Markdown(elem_id=f"{p}-notice", elem_classes=["arena-notice"])
        with gr.Row(elem_id=f"{p}-votes", elem_classes=["arena-votes"]) as self.vote_row:
            self.votes = [
                gr.Button(vote.button, interactive=False, elem_id=f"{p}-vote-{vote.api_name}", size="md")
                for vote in self.kind.votes
            ]
        with gr.Row(equal_height=True, elem_classes=["arena-send"]):
            self.text = gr.Textbox(
                label="Message",
                show_label=False,
                placeholder="Type a message and press Enter",
                scale=8,
                lines=1,
                elem_id=f"{p}-input",
                elem_classes=["arena-input"],
            )
            self.send = gr.Button("Send", variant="primary", scale=1, elem_id=f"{p}-send")
        with gr.Row(elem_classes=["arena-controls"]):
            self.stop = gr.Button("⏹ Stop", variant="stop", interactive=False, elem_id=f"{p}-stop")
            self.regen = gr.Button("🔄 Regenerate", interactive=False, elem_id=f"{p}-regen")
            self.restart = gr.Button(
                self.kind.restart[0], elem_id="battle-new" if self.kind.anonymous else f"{p}-clear"
            )
        keys = " · ".join(f"**{vote.key}** {vote.button.split(' ', 1)[1]}" for vote in self.kind.votes)
        gr.Markdown(
            f"Keys: **Enter** sends · **Esc** stops the replies (or leaves the box) · {keys}",
            elem_classes=["arena-keys"],
        )
        self.same = None
        if self.kind.max_panes > 1:
            self.same = gr.Checkbox(False, label="Use Model A's parameters for every pane", elem_id=f"{p}-same")
        with gr.Row(elem_classes=["arena-panes", "arena-settings"]):
            self.panes = [self._pane_settings(i, top) for i, top in enumerate(tops)]
        if self.same is not None:
            wire_mirror(
                self.same,
                self.panes[0].controls,
                [c.controls for c in self.panes[1:]],
                api_name=f"{p}_same_params",
                sink=self.sink,
            )

    def _pane_column(self, i: int) -> PaneTop:
        suffix, label = self._suffix(i), self._label(i)
        visible = i < self.kind.counts[0]
        with gr.Column(visible=visible, min_width=220, elem_classes=["arena-pane"]) as column:
            dropdown = None
            if not self.kind.anonymous:
                # Choices come from the status timer, never from the page config; custom values are
                # allowed so that the handler (not Gradio) answers for a name that is not ready.
                dropdown = gr.Dropdown(
                    choices=[],
                    value=None,
                    label=label if self.kind.max_panes > 1 else "Model",
                    allow_custom_value=True,
                    elem_id=f"{self.prefix}-model{suffix}",
                )
            chat = chat_pane(label, f"{self.prefix}-chat{suffix}")
            regen = None
            if self.kind.max_panes > 1:
                regen = gr.Button(
                    f"🔄 Regenerate {label.split()[-1]}",
                    interactive=False,
                    size="sm",
                    elem_id=f"{self.prefix}-regen{suffix}",
                    elem_classes=["arena-controls"],
                )
        return PaneTop(column=column, chat=chat, dropdown=dropdown, regen=regen)

    def _pane_settings(self, i: int, top: PaneTop) -> PaneUI:
        suffix, label = self._suffix(i), self._label(i)
        with gr.Column(visible=i < self.kind.counts[0], min_width=220, elem_classes=["arena-pane"]) as column:
            controls = param_controls(
                label, anonymous=self.kind.anonymous, elem_prefix=f"{self.prefix}{suffix}", sink=self.sink
            )
            prompt = None
            if not self.kind.anonymous:
                with gr.Accordion(f"Show prompt · {label}", open=False):
                    prompt = gr.Code(
                        value="",
                        language=None,
                        interactive=False,
                        wrap_lines=True,
                        label="The exact prompt the template produced",
                        elem_id=f"{self.prefix}-prompt{suffix}",
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

    # ---- what the outputs show ------------------------------------------------------------------
    def view(self, session: Session | None, clear_text: bool = False) -> list[Any]:
        """Every output of `self.outputs`, from the session alone."""
        return in_order(self.outputs, self._shown(session, clear_text))

    def _shown(self, session: Session | None, clear_text: bool = False) -> dict[Any, Any]:
        busy = session is not None and session.busy
        revealed = session is not None and session.revealed
        box: dict[str, Any] = {
            "interactive": not revealed,
            "placeholder": "Press “New round” to start another battle"
            if revealed
            else "Type a message and press Enter",
        }
        if clear_text:
            box["value"] = ""
        shown: dict[Any, Any] = {
            self.state: session,
            self.notice: views.vote_note(
                session,
                drop_stopped=self.settings.leaderboard_drop_stopped,
                counts_named=self.settings.leaderboard_include_named,
            ),
            self.text: gr.update(**box),
            self.send: _button(self.send, not busy and not revealed),
            self.stop: _button(self.stop, busy),
            **self._vote_updates(session),
            **self._regens(session),
        }
        shown.update((pane.chat, self._chat(session, i)) for i, pane in enumerate(self.panes))
        shown.update((pane.prompt, self._prompt(session, i)) for i, pane in enumerate(self.panes) if pane.prompt)
        if self.reveal is not None:
            shown[self.reveal] = views.reveal_markdown(session)
        return shown

    def _vote_updates(self, session: Session | None) -> dict[gr.Button, Any]:
        return {
            button: _button(button, arena.can_vote(session, vote.kind))
            for button, vote in zip(self.votes, self.kind.votes, strict=True)
        }

    def _regens(self, session: Session | None) -> dict[gr.Button, Any]:
        """Regenerate (every pane on show) and each pane's own: after a reply, not while busy, not
        after a battle's vote."""
        idle = session is not None and not session.busy and not session.revealed
        started = [
            bool(idle and i < len(session.panes) and session.panes[i].turns)  # type: ignore[union-attr]
            for i in range(len(self.panes))
        ]
        own = {pane.regen: _button(pane.regen, started[i]) for i, pane in enumerate(self.panes) if pane.regen}
        return {self.regen: _button(self.regen, any(started)), **own}

    def _chat(self, session: Session | None, i: int) -> dict[str, Any]:
        pane = session.panes[i] if session is not None and i < len(session.panes) else None
        anonymous = session is not None and session.anonymous
        return gr.update(
            value=views.chat_messages(pane, anonymous=anonymous) if pane else [],
            label=views.pane_label(session, i, self.mode),
        )

    def _prompt(self, session: Session | None, i: int) -> str:
        return views.last_prompt(session.panes[i]) if session is not None and i < len(session.panes) else ""

    def _layout_view(self, count: int) -> dict[Any, Any]:
        """Which panes (and their settings) show, and whether the votes do."""
        shown: dict[Any, Any] = {self.vote_row: gr.update(visible=count <= 2)}
        for i, pane in enumerate(self.panes):
            shown[pane.column] = shown[pane.settings] = gr.update(visible=i < count)
        return shown

    # ---- wiring ---------------------------------------------------------------------------------
    def _events(self, **extra: Any) -> dict[str, Any]:
        return {**progress_on(self.sink), **extra}

    def _names(self, i: int) -> tuple[str | None, str | None, list[str]]:
        """Pane i's API parameter names: (its model, its 'own settings' box, its controls)."""
        one = len(self.panes) == 1
        head = "" if one else f"{'abcd'[i]}_"
        pane = self.panes[i]
        model = None if pane.dropdown is None else "model" if one else f"model_{'abcd'[i]}"
        own = f"{head}own_settings" if pane.controls.own is not None else None
        return model, own, [f"{head}{name}" for name in arena.PaneSettings.FIELDS]

    def _inputs(self, *, send: bool) -> list[tuple[str, Any]]:
        """The send (or regenerate) event's inputs, named: the message, panes A and B (models, then
        'same parameters', then controls), then for side by side the pane count and panes C and D.
        Two-pane callers that pass positional arguments keep working as before four panes."""

        def models(panes: range) -> list[tuple[str, Any]]:
            named = ((self._names(i)[0], self.panes[i].dropdown) for i in panes)
            return [(name, dropdown) for name, dropdown in named if send and name and dropdown]

        def controls(panes: range) -> list[tuple[str, Any]]:
            out: list[tuple[str, Any]] = []
            for i in panes:
                _, own, fields = self._names(i)
                out += [(own, self.panes[i].controls.own)] if own else []
                out += list(zip(fields, self.panes[i].controls.fields, strict=True))
            return out

        first, extra = range(min(2, len(self.panes))), range(2, len(self.panes))
        named: list[tuple[str, Any]] = [("message", self.text)] if send else []
        named += models(first) + ([("same_params", self.same)] if self.same is not None else []) + controls(first)
        if extra:
            named += [("panes", self.count)] if send else []
            named += models(extra) + controls(extra)
        return named

    def _parse(self, names: list[str], values: tuple[Any, ...]) -> tuple[bool, list, list[str | None]]:
        """Values by name -> (same, one PaneSettings per pane, the models chosen)."""
        got = dict(zip(names, values, strict=True))
        settings, models = [], []
        for i in range(len(self.panes)):
            model, own, fields = self._names(i)
            settings.append(
                arena.PaneSettings.from_values([got[f] for f in fields], own_defaults=bool(own and got.get(own)))
            )
            models += [got.get(model)] if model else []
        return bool(got.get("same_params", False)), settings, models

    def _wire_generation(self) -> list[Any]:
        """Send and Regenerate: generators that redraw after every change, sending only changes."""
        settings, handlers, mode = self.settings, self.handlers, self.mode
        send_named, regen_named = self._inputs(send=True), self._inputs(send=False)
        send_names, regen_names = [n for n, _ in send_named], [n for n, _ in regen_named]

        @guarded
        def on_send(request: gr.Request, session: Session | None, *values: Any) -> Iterator[list[Any]]:
            got = dict(zip(send_names, values, strict=True))
            same, pane_settings, models = self._parse(send_names, values)
            stream = handlers.send(
                session,
                mode,
                got["message"],
                pane_settings,
                owner_of(request),
                client_of(request, settings),
                models=models,
                same_settings=same,
                pane_count=got.get("panes"),
            )
            yield from self._stream(stream, clear_first=True)

        def regenerate(pane: int | None) -> Callable[..., Iterator[list[Any]]]:
            """Regenerate one pane, or (None) every pane on show."""

            @guarded
            def on_regenerate(request: gr.Request, session: Session | None, *values: Any) -> Iterator[list[Any]]:
                same, pane_settings, _ = self._parse(regen_names, values)
                shown = len(session.panes) if session is not None else 1
                panes = tuple(range(shown)) if pane is None else (pane,)
                yield from self._stream(
                    handlers.regenerate(
                        session,
                        panes,
                        pane_settings,
                        owner_of(request),
                        client_of(request, settings),
                        same_settings=same,
                    )
                )

            _name_parameters(on_regenerate, regen_names)
            return on_regenerate

        _name_parameters(on_send, send_names)
        regen_inputs = [self.state, *(c for _, c in regen_named)]
        triggers = [self.send.click, self.text.submit]
        gr.on(triggers, None, None, [self.notice], js=send_script(self.prefix))
        running = [
            gr.on(
                triggers,
                on_send,
                [self.state, *(c for _, c in send_named)],
                self.outputs,
                api_name=f"{self.prefix}_send",
                **self._events(**STREAMING),
            )
        ]
        running.append(
            self.regen.click(
                regenerate(None),
                regen_inputs,
                self.outputs,
                api_name=f"{self.prefix}_regenerate",
                **self._events(**STREAMING),
            )
        )
        for i, button in enumerate(self.pane_regens):
            running.append(
                button.click(
                    regenerate(i),
                    regen_inputs,
                    self.outputs,
                    api_name=f"{self.prefix}_regenerate_{'abcd'[i]}",
                    **self._events(**STREAMING),
                )
            )
        return running

    def _stream(self, stream: Any, *, clear_first: bool = False) -> Any:
        """The handler's sessions as updates: the first complete, then the chats, prompts and
        buttons as bare values and nothing else that did not change (webui.ui.common.Delta), and
        the one after the run ended complete again (what a gradio_client caller gets as the
        result)."""
        delta = Delta()
        with contextlib.closing(stream):  # a closed tab closes this generator: the handler's must close now
            for n, current in enumerate(stream):
                values = self.view(current, clear_text=clear_first and n == 0)
                if current.busy:
                    yield delta(values, bare=self.bare)
                else:
                    yield delta.whole(values)

    def _wire_the_rest(self, running: list[Any]) -> None:
        """Stop, the votes and New round / Clear: quick handlers, never queued behind a generation."""
        settings, handlers, mode = self.settings, self.handlers, self.mode

        @guarded
        def on_stop(session: Session | None, request: gr.Request) -> list[Any]:
            return self.view(handlers.stop(session, owner_of(request)))

        # Not queued: Stop must work even when a busy server's queue is full of waiting messages.
        self.stop.click(
            on_stop,
            [self.state],
            self.outputs,
            api_name=f"{self.prefix}_stop",
            cancels=running,
            queue=False,
            **self._events(),
        )

        def voter(kind: str) -> Callable[..., list[Any]]:
            @guarded
            def on_vote(session: Session | None, request: gr.Request) -> list[Any]:
                return self.view(handlers.vote(session, kind, owner_of(request), client_of(request, settings)))

            return on_vote

        for button, vote in zip(self.votes, self.kind.votes, strict=True):
            button.click(
                voter(vote.kind),
                [self.state],
                self.outputs,
                api_name=f"{self.prefix}_vote_{vote.api_name}",
                concurrency_limit=None,
                **self._events(),
            )

        @guarded
        def on_restart(session: Session | None, request: gr.Request) -> list[Any]:
            return self.view(handlers.new_round(session, mode, owner_of(request)), clear_text=True)

        # The chat panes' own trash icon means the same (else only the browser's copy would be
        # cleared, and the next reply would bring the old conversation back).
        gr.on(
            [self.restart.click, *(chat.clear for chat in self.chats)],
            on_restart,
            [self.state],
            self.outputs,
            api_name=f"{self.prefix}_{self.kind.restart[1]}",
            cancels=running,
            concurrency_limit=None,
            **self._events(),
        )

    def _wire_dropdowns(self) -> None:
        for i, dropdown in enumerate(self.dropdowns):
            name = f"{self.prefix}_model" + (f"_{'abcd'[i]}" if len(self.dropdowns) > 1 else "")
            pane = self.panes[i]
            outputs = [
                self.state,
                pane.chat,
                *([pane.prompt] if pane.prompt else []),
                *self.votes,
                self.regen,
                *([pane.regen] if pane.regen else []),
                dropdown,
                *pane.controls.fields,
            ]
            dropdown.change(
                self._chooser(i, outputs),
                [self.state, dropdown],
                outputs,
                api_name=name,
                concurrency_limit=None,
                **self._events(),
            )

    def _pane_view(self, session: Session | None, i: int) -> dict[Any, Any]:
        """The chooser's outputs: this pane only (another pane's chooser, answering at the same
        moment, must not overwrite its label), and the buttons that depend on every pane."""
        pane = self.panes[i]
        shown: dict[Any, Any] = {self.state: session, pane.chat: self._chat(session, i), **self._vote_updates(session)}
        if pane.prompt is not None:
            shown[pane.prompt] = self._prompt(session, i)
        regens = self._regens(session)
        shown.update((button, regens[button]) for button in (self.regen, pane.regen) if button is not None)
        return shown

    def _chooser(self, index: int, outputs: list[Any]) -> Callable[..., list[Any]]:
        """The dropdown's change handler: select (clearing the pane and loading the model's defaults
        into the controls), or refuse and put the dropdown back."""
        handlers, mode = self.handlers, self.mode
        pane = self.panes[index]
        keep = [gr.skip()] * len(arena.PaneSettings.FIELDS)

        def answer(session: Session | None, dropdown: Any, controls: list[Any]) -> list[Any]:
            return in_order(
                outputs,
                {
                    **self._pane_view(session, index),
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
        handlers, mode = self.handlers, self.mode
        layout = [*(p.column for p in self.panes), *(p.settings for p in self.panes), self.vote_row]
        assert self.count is not None, "a tab with one pane count has no count to wire"

        @guarded
        def on_count(request: gr.Request, session: Session | None, count: int, *models: str | None) -> list[Any]:
            session, _ = handlers.set_pane_count(session, mode, count, owner_of(request), models=models)
            return in_order(outputs, {**self._layout_view(len(session.panes)), **self._shown(session)})

        outputs = [*layout, *self.outputs]
        self.count.change(
            on_count,
            [self.state, self.count, *self.dropdowns],
            outputs,
            api_name=f"{self.prefix}_panes",
            concurrency_limit=None,
            **self._events(**INTERNAL),
        )


def _button(button: gr.Button, interactive: bool) -> dict[str, Any]:
    """A button's update with its text as the value, so that an unchanged button can go to the page
    as its bare value (webui.ui.common.Delta)."""
    return gr.update(value=button.value, interactive=interactive)


def _name_parameters(fn: Any, names: list[str]) -> None:
    """Give an event handler that takes `*values` named parameters, so that the API page and
    `gradio_client` show (and accept as keywords) message, model_a, a_temperature, ... The first two
    parameters (the request and the session) stay as they are."""
    head = list(inspect.signature(fn).parameters.values())[:2]
    tail = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None) for name in names]
    fn.__signature__ = inspect.Signature([*head, *tail])

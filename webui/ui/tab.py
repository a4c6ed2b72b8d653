"""One chat tab's events, wired: Send and the Regenerates stream, Stop, the votes, New round / Clear,
the model dropdowns and the pane count. The components come from webui.ui.chat_layout, the
inputs' names and meaning from webui.ui.chat_inputs; the handlers decide, the views draw.

Guarantee: every event's outputs are drawn from the session alone, as {component: value}; nothing
in a battle carries a model name before the vote (every message comes from the rules or is
generic; the pair lives in the server-side session, gr.State, never in a component).

Each event sends only what changed (`Delta`), and every event shows its progress, and so a refusal's
error state, on an invisible component: a refused message is shown once, as a notice, and the chat
stays as it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.arena import rules as arena
from webui.arena.handlers import Handlers
from webui.arena.rules import Refused, Session
from webui.errors import ArenaError
from webui.records.events import Mode
from webui.ui import views
from webui.ui.chat_inputs import input_names, name_parameters, named_components, parse
from webui.ui.chat_layout import KINDS, PANE_LETTERS, ChatLayout, keys_text, lay_out
from webui.ui.common import (
    INTERNAL,
    STREAMING,
    Delta,
    client_of,
    guarded,
    in_order,
    owner_of,
    progress_on,
    wire_mirror,
)
from webui.ui.page import CHOSEN, send_script

if TYPE_CHECKING:
    from webui.services import Services


def build_tab(services: Services, handlers: Handlers, mode: Mode) -> ChatTab:
    """Lay out and wire one tab; the app's timer keeps `.layout.status` (and the dropdowns)
    current, its load event fills `.layout.state`."""
    tags = services.categories.names if services.settings.visitor_tags else ()
    return ChatTab(services, handlers, lay_out(KINDS[mode], tags))


class ChatTab:
    """Connects one laid-out tab's events to the handlers, and draws each event's outputs from the
    session alone ({component: value}, put in order by webui.ui.common.in_order)."""

    def __init__(self, services: Services, handlers: Handlers, layout: ChatLayout) -> None:
        self.settings, self.handlers, self.ui = services.settings, handlers, layout
        self.kind, self.mode, self.prefix = layout.kind, layout.kind.mode, layout.kind.prefix
        self.panes = layout.panes
        self.names = input_names(layout)
        ui = self.ui
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
        if ui.same is not None:
            wire_mirror(
                ui.same,
                ui.panes[0].controls,
                [p.controls for p in ui.panes[1:]],
                api_name=f"{self.prefix}_same_params",
                sink=ui.sink,
            )
        running = self._wire_generation()
        self._wire_the_rest(running)
        if ui.dropdowns:
            self._wire_dropdowns()
        if ui.count is not None:
            self._wire_count()

    # ---- what the outputs show ------------------------------------------------------------------
    def view(self, session: Session | None, clear_text: bool = False) -> list[Any]:
        """Every output of `self.outputs`, from the session alone."""
        return in_order(self.outputs, self._shown(session, clear_text))

    def _shown(self, session: Session | None, clear_text: bool = False) -> dict[Any, Any]:
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
        shown: dict[Any, Any] = {
            self.ui.state: session,
            self.ui.notice: views.vote_note(
                session,
                drop_stopped=self.settings.leaderboard_drop_stopped,
                counts_named=self.settings.leaderboard_include_named,
            ),
            self.ui.text: gr.update(**box),
            self.ui.send: _button(self.ui.send, not busy and not revealed and not prepared),
            self.ui.stop: _button(self.ui.stop, busy),
            **self._vote_updates(session),
            **self._regens(session),
        }
        shown.update((pane.chat, self._chat(session, i)) for i, pane in enumerate(self.panes))
        shown.update((pane.prompt, self._prompt(session, i)) for i, pane in enumerate(self.panes) if pane.prompt)
        if self.ui.reveal is not None:
            shown[self.ui.reveal] = views.reveal_markdown(session)
        return shown

    def _vote_updates(self, session: Session | None) -> dict[gr.Button, Any]:
        """Each vote button: enabled while that vote can be cast, and once cast, marked as the
        chosen one (a filled button the stylesheet keeps bright while the others grey out)."""
        chosen = views.chosen_votes(session)
        return {
            button: _vote_button(button, arena.can_vote(session, vote.kind), chosen=vote in chosen)
            for button, vote in zip(self.ui.votes, self.kind.votes, strict=True)
        }

    def _regens(self, session: Session | None) -> dict[gr.Button, Any]:
        """Regenerate (every pane on show) and each pane's own: after a reply, not while busy, not
        after a battle's vote."""
        idle = session is not None and not session.busy and not session.revealed
        replied = session.panes if session is not None and idle else ()
        started = [i < len(replied) and bool(replied[i].turns) for i in range(len(self.panes))]
        own = {pane.regen: _button(pane.regen, started[i]) for i, pane in enumerate(self.panes) if pane.regen}
        return {self.ui.regen: _button(self.ui.regen, any(started)), **own}

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
        votes = count <= 2
        shown: dict[Any, Any] = {
            self.ui.vote_row: gr.update(visible=votes),
            self.ui.keys: keys_text(self.kind, votes=votes),
        }
        for i, pane in enumerate(self.panes):
            shown[pane.column] = shown[pane.settings] = gr.update(visible=i < count)
        return shown

    # ---- wiring ---------------------------------------------------------------------------------
    def _events(self, **extra: Any) -> dict[str, Any]:
        return {**progress_on(self.ui.sink), **extra}

    def _wire_generation(self) -> list[Any]:
        """Send and Regenerate: generators that redraw after every change, sending only changes."""
        settings, handlers, mode = self.settings, self.handlers, self.mode
        send_names, regen_names = self.names.send(), self.names.regenerate()

        @guarded
        def on_send(request: gr.Request, session: Session | None, *values: Any) -> Iterator[list[Any]]:
            asked = parse(self.names, dict(zip(send_names, values, strict=True)))
            stream = handlers.send(
                session,
                mode,
                asked.message,
                asked.settings,
                owner_of(request),
                client_of(request, settings),
                models=asked.models,
                same_settings=asked.same,
                pane_count=asked.panes,
            )
            yield from self._stream(stream, clear_first=True)

        def regenerate(pane: int | None) -> Callable[..., Iterator[list[Any]]]:
            """Regenerate one pane, or (None) every pane on show."""

            @guarded
            def on_regenerate(request: gr.Request, session: Session | None, *values: Any) -> Iterator[list[Any]]:
                asked = parse(self.names, dict(zip(regen_names, values, strict=True)))
                shown = len(session.panes) if session is not None else 1
                panes = tuple(range(shown)) if pane is None else (pane,)
                yield from self._stream(
                    handlers.regenerate(
                        session,
                        panes,
                        asked.settings,
                        owner_of(request),
                        client_of(request, settings),
                        same_settings=asked.same,
                    )
                )

            name_parameters(on_regenerate, regen_names)
            return on_regenerate

        name_parameters(on_send, send_names)
        component = named_components(self.ui)
        regen_inputs = [self.ui.state, *(component[name] for name in regen_names)]
        triggers = [self.ui.send.click, self.ui.text.submit]
        gr.on(triggers, None, None, [self.ui.notice], js=send_script(self.prefix))
        running = [
            gr.on(
                triggers,
                on_send,
                [self.ui.state, *(component[name] for name in send_names)],
                self.outputs,
                api_name=f"{self.prefix}_send",
                **self._events(**STREAMING),
            )
        ]
        if self.ui.prepared is not None:

            @guarded
            def on_prepared(request: gr.Request, session: Session | None) -> Iterator[list[Any]]:
                stream = handlers.prepared_battle(session, owner_of(request), client_of(request, settings))
                yield from self._stream(stream, clear_first=True)

            running.append(
                self.ui.prepared.click(
                    on_prepared,
                    [self.ui.state],
                    self.outputs,
                    api_name=f"{self.prefix}_prepared",
                    **self._events(**STREAMING),
                )
            )
        running.append(
            self.ui.regen.click(
                regenerate(None),
                regen_inputs,
                self.outputs,
                api_name=f"{self.prefix}_regenerate",
                **self._events(**STREAMING),
            )
        )
        for i, button in enumerate(self.ui.pane_regens):
            running.append(
                button.click(
                    regenerate(i),
                    regen_inputs,
                    self.outputs,
                    api_name=f"{self.prefix}_regenerate_{PANE_LETTERS[i]}",
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
        self.ui.stop.click(
            on_stop,
            [self.ui.state],
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

            @guarded
            def on_tagged_vote(session: Session | None, tag: str | None, request: gr.Request) -> list[Any]:
                client = client_of(request, settings)
                return self.view(handlers.vote(session, kind, owner_of(request), client, tag=tag or ""))

            return on_vote if self.ui.tag is None else on_tagged_vote

        # With --visitor-tags the battle's votes take the tag menu too (the API's vote endpoints then
        # have a `tag` argument, "" for none); without, they stay as they were.
        vote_inputs = [self.ui.state, *([self.ui.tag] if self.ui.tag is not None else [])]
        for button, vote in zip(self.ui.votes, self.kind.votes, strict=True):
            button.click(
                voter(vote.kind),
                vote_inputs,
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
            [self.ui.restart.click, *(chat.clear for chat in self.ui.chats)],
            on_restart,
            [self.ui.state],
            self.outputs,
            api_name=f"{self.prefix}_{self.kind.restart[1]}",
            cancels=running,
            concurrency_limit=None,
            **self._events(),
        )
        if self.ui.tag is not None:  # a new battle starts untagged: the last one's tag is about another prompt
            gr.on(
                [self.ui.restart.click, *(chat.clear for chat in self.ui.chats)],
                lambda: "",
                None,
                [self.ui.tag],
                queue=False,
                api_visibility="private",
            )

    def _wire_dropdowns(self) -> None:
        for i, dropdown in enumerate(self.ui.dropdowns):
            name = f"{self.prefix}_model" + (f"_{PANE_LETTERS[i]}" if len(self.ui.dropdowns) > 1 else "")
            pane = self.panes[i]
            outputs = [
                self.ui.state,
                pane.chat,
                *([pane.prompt] if pane.prompt else []),
                *self.ui.votes,
                self.ui.regen,
                *([pane.regen] if pane.regen else []),
                dropdown,
                *pane.controls.fields,
            ]
            dropdown.change(
                self._chooser(i, outputs),
                [self.ui.state, dropdown],
                outputs,
                api_name=name,
                concurrency_limit=None,
                **self._events(),
            )

    def _pane_view(self, session: Session | None, i: int) -> dict[Any, Any]:
        """The chooser's outputs: this pane only (another pane's chooser, answering at the same
        moment, must not overwrite its label), and the buttons that depend on every pane."""
        pane = self.panes[i]
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
        layout = [*(p.column for p in self.panes), *(p.settings for p in self.panes), self.ui.vote_row, self.ui.keys]
        assert self.ui.count is not None, "a tab with one pane count has no count to wire"

        @guarded
        def on_count(request: gr.Request, session: Session | None, count: int, *models: str | None) -> list[Any]:
            session, _ = handlers.set_pane_count(session, mode, count, owner_of(request), models=models)
            return in_order(outputs, {**self._layout_view(len(session.panes)), **self._shown(session)})

        outputs = [*layout, *self.outputs]
        self.ui.count.change(
            on_count,
            [self.ui.state, self.ui.count, *self.ui.dropdowns],
            outputs,
            api_name=f"{self.prefix}_panes",
            concurrency_limit=None,
            **self._events(**INTERNAL),
        )


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

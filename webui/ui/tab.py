"""One chat tab, laid out and wired: its components (webui.ui.chat_layout), what they show
(webui.ui.chat_view), its pane events (webui.ui.chat_panes), and here the conversation's events:
Send and the Regenerates stream, Stop, the votes, New round / Clear. The inputs' names and meaning
come from webui.ui.chat_inputs; the handlers decide, the view draws.

Guarantee: every event's outputs are drawn from the session alone (webui.ui.chat_view), as
{component: value}; nothing in a battle carries a model name before the vote. Each event sends only
what changed (`Delta`), and every event shows its progress, and so a refusal's error state, on an
invisible component: a refused message is shown once, as a notice, and the chat stays as it was.
Stop and New round cancel a running generation; neither waits behind one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.arena.handlers import Handlers
from webui.arena.rules import Session
from webui.records.events import Mode
from webui.ui.chat_inputs import input_names, name_parameters, named_components, parse
from webui.ui.chat_layout import KINDS, PANE_LETTERS, ChatLayout, lay_out
from webui.ui.chat_panes import PaneEvents
from webui.ui.chat_view import ChatView
from webui.ui.common import STREAMING, client_of, guarded, owner_of, progress_on
from webui.ui.page import send_script

if TYPE_CHECKING:
    from webui.services import Services


def build_tab(services: Services, handlers: Handlers, mode: Mode) -> ChatLayout:
    """Lay out and wire one tab; returns its components. The app's timer keeps `.status` (and the
    dropdowns) current, its load event fills `.state`."""
    tags = services.categories.names if services.settings.visitor_tags else ()
    layout = lay_out(KINDS[mode], tags)
    view = ChatView(layout, services.settings)
    panes = PaneEvents(handlers, view)
    # This order keeps the events' ids in the page's config as they were (the API's names do not
    # depend on it; a diff of the config before and after a change to the wiring then stays empty).
    panes.wire_same_settings()
    ConversationEvents(services, handlers, view)
    panes.wire_choices()
    return layout


class ConversationEvents:
    """Wires Send, Regenerate (every pane, or one), the prepared battle, Stop, the votes and
    New round / Clear to the handlers, once, when made."""

    def __init__(self, services: Services, handlers: Handlers, view: ChatView) -> None:
        self.settings, self.handlers, self.view, self.ui = services.settings, handlers, view, view.ui
        self.kind, self.mode, self.prefix = view.ui.kind, view.ui.kind.mode, view.ui.kind.prefix
        self.names = input_names(view.ui)
        running = self._wire_generation()
        self._wire_the_rest(running)

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
            yield from self.view.stream(stream, clear_first=True)

        def regenerate(pane: int | None) -> Callable[..., Iterator[list[Any]]]:
            """Regenerate one pane, or (None) every pane on show."""

            @guarded
            def on_regenerate(request: gr.Request, session: Session | None, *values: Any) -> Iterator[list[Any]]:
                asked = parse(self.names, dict(zip(regen_names, values, strict=True)))
                shown = len(session.panes) if session is not None else 1
                panes = tuple(range(shown)) if pane is None else (pane,)
                yield from self.view.stream(
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
                self.view.outputs,
                api_name=f"{self.prefix}_send",
                **self._events(**STREAMING),
            )
        ]
        if self.ui.prepared is not None:

            @guarded
            def on_prepared(request: gr.Request, session: Session | None) -> Iterator[list[Any]]:
                stream = handlers.prepared_battle(session, owner_of(request), client_of(request, settings))
                yield from self.view.stream(stream, clear_first=True)

            running.append(
                self.ui.prepared.click(
                    on_prepared,
                    [self.ui.state],
                    self.view.outputs,
                    api_name=f"{self.prefix}_prepared",
                    **self._events(**STREAMING),
                )
            )
        running.append(
            self.ui.regen.click(
                regenerate(None),
                regen_inputs,
                self.view.outputs,
                api_name=f"{self.prefix}_regenerate",
                **self._events(**STREAMING),
            )
        )
        for i, button in enumerate(self.ui.pane_regens):
            running.append(
                button.click(
                    regenerate(i),
                    regen_inputs,
                    self.view.outputs,
                    api_name=f"{self.prefix}_regenerate_{PANE_LETTERS[i]}",
                    **self._events(**STREAMING),
                )
            )
        return running

    def _wire_the_rest(self, running: list[Any]) -> None:
        """Stop, the votes and New round / Clear: quick handlers, never queued behind a generation."""
        settings, handlers, mode = self.settings, self.handlers, self.mode

        @guarded
        def on_stop(session: Session | None, request: gr.Request) -> list[Any]:
            return self.view.draw(handlers.stop(session, owner_of(request)))

        # Not queued: Stop must work even when a busy server's queue is full of waiting messages.
        self.ui.stop.click(
            on_stop,
            [self.ui.state],
            self.view.outputs,
            api_name=f"{self.prefix}_stop",
            cancels=running,
            queue=False,
            **self._events(),
        )

        def voter(kind: str) -> Callable[..., list[Any]]:
            @guarded
            def on_vote(session: Session | None, request: gr.Request) -> list[Any]:
                return self.view.draw(handlers.vote(session, kind, owner_of(request), client_of(request, settings)))

            @guarded
            def on_tagged_vote(session: Session | None, tag: str | None, request: gr.Request) -> list[Any]:
                client = client_of(request, settings)
                return self.view.draw(handlers.vote(session, kind, owner_of(request), client, tag=tag or ""))

            return on_vote if self.ui.tag is None else on_tagged_vote

        # With --visitor-tags the battle's votes take the tag menu too (the API's vote endpoints then
        # have a `tag` argument, "" for none); without, they stay as they were.
        vote_inputs = [self.ui.state, *([self.ui.tag] if self.ui.tag is not None else [])]
        for button, vote in zip(self.ui.votes, self.kind.votes, strict=True):
            button.click(
                voter(vote.kind),
                vote_inputs,
                self.view.outputs,
                api_name=f"{self.prefix}_vote_{vote.api_name}",
                concurrency_limit=None,
                **self._events(),
            )

        @guarded
        def on_restart(session: Session | None, request: gr.Request) -> list[Any]:
            return self.view.draw(handlers.new_round(session, mode, owner_of(request)), clear_text=True)

        # The chat panes' own trash icon means the same (else only the browser's copy would be
        # cleared, and the next reply would bring the old conversation back).
        gr.on(
            [self.ui.restart.click, *(chat.clear for chat in self.ui.chats)],
            on_restart,
            [self.ui.state],
            self.view.outputs,
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

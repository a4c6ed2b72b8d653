"""Streams one run's replies into the session: every pane at once, from its model or from a given
opener, until each ends.

Guarantees:

* The models start before the first redraw, so the user's message and the first text are one
  update apart; the session is yielded after every batch of text.
* Whatever ends the run (the last reply, Stop, a closed tab closing the generator, an error),
  `finally` stops the models, keeps the partial replies, marks a reply that never finished as
  stopped and ends the run: nothing stays running, and `session.idle` is set.
* Every reply that ends gets one chat record (docs/logging.md), a failed one included; the pane
  shows a short message from `FAILURES`, never the exception text, which may name the model.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from webui.arena import rules as arena
from webui.arena.rules import Session
from webui.arena.streaming import Job, Opener, PaneEvent, PaneStreams
from webui.arena.transcripts import Transcripts
from webui.errors import ModelNotReady, Overloaded, ParamError, PromptTooLong
from webui.records.events import ClientInfo
from webui.types import Finished, FinishReason, Message, Route, SamplingParams, TextDelta

if TYPE_CHECKING:
    from webui.services import Services

log = logging.getLogger(__name__)

FAILURES: list[tuple[type[BaseException], str]] = [
    (PromptTooLong, "The conversation is too long for this model. Start a new round."),
    (Overloaded, "This model is busy right now. Try Regenerate in a moment."),
    (ModelNotReady, "This model is not available right now. Try again in a moment, or start a new round."),
    (
        ParamError,
        "The model did not accept these parameters (is max_new_tokens too large?). Adjust them and press Regenerate.",
    ),
]
GENERIC_FAILURE = "This model could not answer. Try Regenerate, or start a new round."


def failure_message(exc: BaseException) -> str:
    """A short message for the pane; never the exception text, which may name the model."""
    for kind, message in FAILURES:
        if isinstance(exc, kind):
            return message
    return GENERIC_FAILURE


class Replies:
    """Runs the panes' streams for a started run and applies what they send to the session."""

    def __init__(self, services: Services, transcripts: Transcripts) -> None:
        self.services = services
        self.registry = services.registry
        self.settings = services.settings
        self.transcripts = transcripts

    def stream(
        self,
        session: Session,
        run: threading.Event,
        panes: Sequence[int],
        client: ClientInfo,
        openers: dict[int, Opener] | None = None,
    ) -> Iterator[Session]:
        """Stream `panes` (from their models, or from `openers` where given) until they end.
        Whatever happens (Stop, the generator closed by a closed tab, an error), `finally` stops
        the models, keeps the partial replies and ends the run."""
        streams: PaneStreams | None = None
        settled = False
        try:
            jobs = [
                Job(
                    i,
                    (openers or {}).get(i)
                    or self._opener(
                        session.panes[i].chosen,
                        session.panes[i].messages(),
                        session.panes[i].turns[-1].params,
                        # one id per pane's conversation: a router keeps its turns on one replica
                        self.services.routes.route(session.panes[i].conv_id, client),
                    ),
                )
                for i in panes
            ]
            # The models start before the first redraw, not after it: the user's message and the
            # first text are then only one update apart.
            streams = PaneStreams(jobs, run, join_timeout_s=self.settings.thread_join_timeout_s)
            yield session  # the user's message (or the emptied reply) shows at once
            for batch in streams.batches():
                self._apply(session, batch, client)
                yield session
            self._end(session, streams, panes, client)
            settled = True
            yield session  # the run is over: votes, Send and Regenerate become available
        finally:
            if not settled:
                self._end(session, streams, panes, client)

    def _opener(self, model: str, messages: list[Message], params: SamplingParams, route: Route) -> Opener:
        def open_stream(cancel: threading.Event) -> Iterator:
            backend = self.registry.get(model, wait_s=self.settings.queue_timeout_s, cancel=cancel)
            return backend.stream(messages, params, cancel, route=route)

        return open_stream

    def _end(self, session: Session, streams: PaneStreams | None, panes: Sequence[int], client: ClientInfo) -> None:
        leftover = streams.close() if streams is not None else []
        self._apply(session, leftover, client)
        self._settle(session, panes, client)

    def _apply(self, session: Session, batch: Sequence[PaneEvent], client: ClientInfo) -> None:
        for item in batch:
            pane = session.panes[item.pane]
            reply = pane.turns[-1].reply
            if item.error is not None:
                log.warning("%s failed to answer: %s", pane.model, item.error)
                if reply.final is None:  # (a failure after the Finished event changes nothing)
                    # A stream that fails before (or without) its Finished event still gets a
                    # record, as docs/logging.md promises one per failed reply.
                    reply.error = failure_message(item.error)
                    reply.final = Finished(FinishReason.ERROR, error=f"{type(item.error).__name__}: {item.error}")
                    self.transcripts.record_chat(session, item.pane, client)
            elif isinstance(item.event, TextDelta):
                reply.text += item.event.text
            elif isinstance(item.event, Finished):
                if item.event.reason is FinishReason.ERROR:
                    log.warning("%s failed while answering: %s", pane.model, item.event.error)
                reply.final = item.event
                self.transcripts.record_chat(session, item.pane, client)

    def _settle(self, session: Session, panes: Sequence[int], client: ClientInfo) -> None:
        """End the run: a reply that never got its Finished event (its stream was closed) is kept
        as stopped."""
        with session.lock:
            for i in panes:
                reply = session.panes[i].turns[-1].reply
                if not reply.done:
                    reply.final = Finished(FinishReason.CANCELLED)
                    self.transcripts.record_chat(session, i, client)
            arena.end_run(session)

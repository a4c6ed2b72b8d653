"""The arena's handlers as plain functions of (session, inputs): send, regenerate, stop, vote, new
round, choose a model. The Gradio tabs only wire components to these; the tests call them directly.

Generation handlers are generators that yield the session after every change, so that the UI can
redraw; they always end the run in `finally` (a Stop, a closed tab or an error), which stops the
models, marks unfinished replies as stopped and hands every finished reply to the recorder.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from webui.access.ratelimit import RateLimited
from webui.arena import rules as arena
from webui.arena.pairing import Evidence, choose_pair
from webui.arena.prepared import CHARS_PER_S, prepared_conversation, stored_request
from webui.arena.rules import Owner, PaneRequest, PaneSettings, Refused, Session
from webui.arena.streaming import Job, Opener, PaneEvent, PaneStreams, stored_reply
from webui.engine.registry import ModelState
from webui.errors import ModelNotFound, ModelNotReady, Overloaded, ParamError, PromptTooLong
from webui.leaderboard.board.favours import Favour
from webui.leaderboard.votes.declared import TAG_FIELD
from webui.models.specs import ModelSpec
from webui.records.events import ChatEvent, ClientInfo, Conversation, Mode, RecordError, VoteEvent
from webui.records.prepared import PREPARED_KEY, SOURCE_KEY, PreparedPairs
from webui.types import Finished, FinishReason, Message, Route, SamplingParams, TextDelta

if TYPE_CHECKING:
    from webui.services import Services

log = logging.getLogger(__name__)
STOP_WAIT_S = 10.0  # Stop waits this long for the models to stop, so that it can show the result
VOTE_NOT_RECORDED = "Sorry, your vote could not be recorded. Please try again in a moment."

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
NO_PREPARED = "No prepared question is waiting right now. Type your own!"


def failure_message(exc: BaseException) -> str:
    """A short message for the pane; never the exception text, which may name the model."""
    for kind, message in FAILURES:
        if isinstance(exc, kind):
            return message
    return GENERIC_FAILURE


class Handlers:
    def __init__(
        self,
        services: Services,
        rng: random.Random | None = None,
        evidence: Callable[[], Evidence | None] | None = None,
        favoured: Callable[[], Sequence[Favour]] | None = None,
        prepared: PreparedPairs | None = None,
    ) -> None:
        self.services = services
        self.registry = services.registry
        self.settings = services.settings
        self.rng = rng or random.SystemRandom()
        # What smart pairing knows: the live board's ratings and pair counts (None: no board yet, a weighted draw)
        self.evidence = evidence or (lambda: None)
        # Pairs the operator asked to favour for a number of battles (webui.leaderboard.board.favours)
        self.favoured = favoured or (lambda: ())
        # Stored pairs (a replay's queue) that visitors may judge as a battle (webui.records.prepared)
        self.prepared = prepared

    # ---- sessions -------------------------------------------------------------------------
    def session_for(self, session: Session | None, mode: Mode, owner: Owner) -> Session:
        if session is None:
            return arena.new_session(mode, owner)
        return arena.check_owner(session, owner)

    def choose_model(
        self, session: Session | None, mode: Mode, pane: int, name: str | None, owner: Owner
    ) -> tuple[Session, bool]:
        """Select a model for a named pane; a different model clears that pane's conversation.
        Returns (session, changed). Models that are not ready cannot be chosen."""
        if mode == "battle":
            raise Refused("Models cannot be chosen in a battle.")
        session = self.session_for(session, mode, owner)
        if not isinstance(name, str) or not name:
            raise Refused("Choose a model first.")
        with session.lock:
            if session.panes[pane].model == name:
                return session, False
            self._check_ready(name)
            if session.busy:
                raise Refused("Please stop the replies before changing the model.")
            session.panes[pane].model = name
            session.panes[pane].clear()
        return session, True

    def set_pane_count(
        self, session: Session | None, mode: Mode, count: object, owner: Owner, models: Sequence[str | None] = ()
    ) -> tuple[Session, bool]:
        """Side by side: show 2, 3 or 4 panes (a new conversation when the number changes). A pane
        takes the model its dropdown shows, if that one is ready, so that its label names it at
        once. Returns (session, changed)."""
        session = self.session_for(session, mode, owner)
        with session.lock:
            changed = arena.set_pane_count(session, count)
            for pane, name in zip(session.panes, models, strict=False):
                if name and name != pane.model and self._ready(name):
                    pane.model = name
                    pane.clear()
        return session, changed

    def _ready(self, name: str) -> bool:
        try:
            self._check_ready(name)
        except Refused:
            return False
        return True

    def _check_ready(self, name: str) -> None:
        """A model can be chosen when it is ready, or when nobody has asked for it yet (with
        --no-preload): then it starts loading now, and a message sent meanwhile waits for it."""
        try:
            status = self.registry.status(name)
        except ModelNotFound:
            raise Refused("There is no model with that name.") from None
        if status.state is ModelState.UNLOADED:
            self.registry.start([name])
            return
        if status.state is not ModelState.READY:
            raise Refused(f"{name} cannot be chosen now: it is {status.describe()}.")

    def pane_defaults(self, name: str) -> PaneSettings:
        """The controls' values for a model: the defaults from its models-file entry."""
        spec = self.registry.spec(name)
        return PaneSettings.from_spec(spec.sampling, spec.system_prompt)

    # ---- send and regenerate --------------------------------------------------------------
    def send(
        self,
        session: Session | None,
        mode: Mode,
        text: object,
        pane_settings: Sequence[PaneSettings],
        owner: Owner,
        client: ClientInfo,
        *,
        models: Sequence[str | None] = (),
        same_settings: bool = False,
        pane_count: int | None = None,
    ) -> Iterator[Session]:
        """Accept the user's message (or refuse before anything changes), show it, then stream
        every pane's reply at once. Empty input does nothing. `pane_count` (side by side) first
        sets the number of panes; a different number starts a new conversation."""
        message = arena.clean_message(text, self.settings.max_input_chars)
        session = self.session_for(session, mode, owner)
        if message is None:
            yield session
            return
        self._check_rate("message", client)
        with session.lock:
            arena.check_can_send(session, self.settings.max_turns)
            if pane_count is not None:
                arena.set_pane_count(session, pane_count)
            self._assign_models(session, models)
            requests = self._requests(session, range(len(session.panes)), pane_settings, same_settings)
            arena.add_turn(session, message, [requests[i] for i in range(len(session.panes))])
            run = self.services.generations.track(arena.start_run(session))  # a server stop sets it too
        yield from self._generate(session, run, range(len(session.panes)), client)

    def regenerate(
        self,
        session: Session | None,
        panes: Sequence[int],
        pane_settings: Sequence[PaneSettings],
        owner: Owner,
        client: ClientInfo,
        *,
        same_settings: bool = False,
    ) -> Iterator[Session]:
        """Generate the newest reply of `panes` again, with the current parameters."""
        session = arena.check_owner(session, owner)
        self._check_rate("message", client)
        with session.lock:
            arena.check_can_regenerate(session, panes)
            requests = self._requests(session, panes, pane_settings, same_settings)
            arena.reset_replies(session, panes, requests)
            run = self.services.generations.track(arena.start_run(session))
        yield from self._generate(session, run, panes, client)

    def prepared_battle(self, session: Session | None, owner: Owner, client: ClientInfo) -> Iterator[Session]:
        """A new battle on a prepared pair: its stored prompt as the first message, its stored
        replies on sides drawn here, streamed at one pace. The rest is a battle's: blind until the
        vote, which is recorded with the pair's id. One turn only (the replies exist for it)."""
        pair = self.prepared.draw(self.rng) if self.prepared is not None else None
        if pair is None:
            raise Refused(NO_PREPARED)
        self._check_rate("message", client)
        if session is not None:
            self.stop(session, owner)
        session = arena.new_session("battle", owner)
        sides = [0, 1]
        self.rng.shuffle(sides)  # never the baseline on one side
        with session.lock:
            session.prepared = pair
            for pane, side in zip(session.panes, sides, strict=True):
                pane.model = pair.models[side]
            requests = [stored_request(self._spec_or_none(pair.models[side])) for side in sides]
            arena.add_turn(session, pair.prompt, requests)
            run = self.services.generations.track(arena.start_run(session))
        openers = {i: stored_reply(pair.replies[side], CHARS_PER_S) for i, side in enumerate(sides)}
        yield from self._generate(session, run, range(2), client, openers)

    def _spec_or_none(self, model: str) -> ModelSpec | None:
        try:
            return self.registry.spec(model)
        except ModelNotFound:
            return None

    def _check_rate(self, action: str, client: ClientInfo) -> None:
        """The per-client limits on messages and votes (webui.access.ratelimit)."""
        try:
            self.services.rate_limiter.check(action, client)
        except RateLimited as exc:  # its message names the limit, never a model
            raise Refused(str(exc)) from None

    def _assign_models(self, session: Session, models: Sequence[str | None]) -> None:
        if session.mode == "battle":
            if session.panes[0].model is None:
                # ready ones, and those nobody has asked for yet (--no-preload): they load on first use
                names = [st.name for st in self.registry.statuses() if st.usable or st.state is ModelState.UNLOADED]
                weights = {name: self.registry.spec(name).weight for name in names}
                # Only the pair is kept (in the session, which the page never sees before the vote), not why.
                pair = choose_pair(self.settings.pairing, weights, self.evidence(), self.rng, self.favoured())
                for pane, drawn in zip(session.panes, pair, strict=True):
                    pane.model = drawn
            return
        for i, pane in enumerate(session.panes):
            name: str | None = models[i] if i < len(models) else pane.model
            if not name:
                raise Refused(
                    f"Choose a model for {'the chat' if session.mode == 'direct' else arena.PANE_LABELS[i]} first."
                )
            if name != pane.model:
                self._check_ready(name)
                pane.model = name
                pane.clear()

    def _requests(
        self, session: Session, panes: Sequence[int], pane_settings: Sequence[PaneSettings], same_settings: bool
    ) -> dict[int, PaneRequest]:
        """Each pane's (parameters, system prompt, the model's own system prompt). In a battle, a
        pane on its model's own settings gets the battle's one length cap (arena.same_length)."""
        if not pane_settings:
            pane_settings = [PaneSettings(own_defaults=True)]
        cap = self._battle_cap(session) if session.mode == "battle" else None
        requests: dict[int, PaneRequest] = {}
        for i in panes:
            chosen = pane_settings[0] if same_settings or i >= len(pane_settings) else pane_settings[i]
            spec = self.registry.spec(session.panes[i].chosen)
            params, system = chosen.apply(spec.sampling, length_cap=cap)
            if system is not None and len(system) > self.settings.max_input_chars:
                raise Refused(f"The system prompt is longer than {self.settings.max_input_chars:,} characters.")
            requests[i] = (params, system, spec.system_prompt or "")
        return requests

    def _battle_cap(self, session: Session) -> int:
        contexts = []
        for pane in session.panes:
            try:
                contexts.append(self.registry.get(pane.chosen).context_length)
            except ModelNotReady:  # the stream will say so; the cap does not matter then
                contexts.append(None)
        return arena.battle_length_cap(self.settings.battle_max_new_tokens, contexts)

    def _opener(self, model: str, messages: list[Message], params: SamplingParams, route: Route) -> Opener:
        def open_stream(cancel: threading.Event) -> Iterator:
            backend = self.registry.get(model, wait_s=self.settings.queue_timeout_s, cancel=cancel)
            return backend.stream(messages, params, cancel, route=route)

        return open_stream

    def _generate(
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
                    self._record_chat(session, item.pane, client)
            elif isinstance(item.event, TextDelta):
                reply.text += item.event.text
            elif isinstance(item.event, Finished):
                if item.event.reason is FinishReason.ERROR:
                    log.warning("%s failed while answering: %s", pane.model, item.event.error)
                reply.final = item.event
                self._record_chat(session, item.pane, client)

    def _settle(self, session: Session, panes: Sequence[int], client: ClientInfo) -> None:
        """End the run: a reply that never got its Finished event (its stream was closed) is kept
        as stopped."""
        with session.lock:
            for i in panes:
                reply = session.panes[i].turns[-1].reply
                if not reply.done:
                    reply.final = Finished(FinishReason.CANCELLED)
                    self._record_chat(session, i, client)
            arena.end_run(session)

    # ---- stop, new round --------------------------------------------------------------------
    def stop(self, session: Session | None, owner: Owner, wait_s: float = STOP_WAIT_S) -> Session | None:
        """Stop every pane's generation (in the models, not just on screen) and wait briefly until
        the replies are settled, so that the caller can show them marked as stopped."""
        if session is None:
            return None
        arena.check_owner(session, owner)
        run = session.running
        if run is not None:
            run.set()
            if not session.idle.wait(wait_s):
                log.warning("stop: the generation did not end within %.0f s", wait_s)
        return session

    def new_round(self, session: Session | None, mode: Mode, owner: Owner) -> Session:
        """A battle gets a new, undrawn pair; named modes keep their models and clear the chat."""
        if session is not None:
            self.stop(session, owner)
        if session is None or mode == "battle":
            return arena.new_session(mode, owner)
        with session.lock:
            for pane in session.panes:
                pane.clear()
            session.votes.clear()
        return session

    # ---- votes and records ------------------------------------------------------------------
    def vote(self, session: Session | None, kind: str, owner: Owner, client: ClientInfo, *, tag: str = "") -> Session:
        """Record a vote if the rules allow it. It counts only once the recorder has it: on a
        RecordError the user is told, and may vote again. `tag`: the declared category the visitor
        tagged the battle with ("" none; only with --visitor-tags, only in a battle), kept in the
        vote record's `extra` (FastChat's readers ignore the key)."""
        session = arena.check_owner(session, owner)
        with session.lock:
            arena.check_vote(session, kind, owner)
            self._check_tag(session, tag)
            self._check_rate("vote", client)
            event = VoteEvent(
                kind=kind,
                # a known kind: check_vote
                conversations=[self.conversation(session, i) for i in range(len(session.panes))],
                client=client,
                extra={
                    "turn": session.turn_no,
                    "battle_id": session.battle_id,
                    # the signed-in person's key when there is one: "my votes" then follows them anywhere
                    "session": self.services.recorder.session_key(str(owner.session_hash or ""), client.user),
                    **(
                        {PREPARED_KEY: session.prepared.pair_id, SOURCE_KEY: session.prepared.source}
                        if session.prepared is not None
                        else {}
                    ),
                    **({TAG_FIELD: tag} if tag else {}),
                },
            )
            try:
                self.services.recorder.vote(event)
            except RecordError as exc:
                log.error("vote not recorded: %s", exc)
                raise Refused(VOTE_NOT_RECORDED) from None
            arena.mark_voted(session, kind)
            if session.prepared is not None and self.prepared is not None and kind != "flag":
                self.prepared.voted(session.prepared.pair_id)
        return session

    def _check_tag(self, session: Session, tag: str) -> None:
        if not tag:
            return
        if not self.services.settings.visitor_tags or session.mode != "battle":
            raise Refused("This arena does not take category tags with votes.")
        if tag not in self.services.categories.names:
            raise Refused(f"Unknown category {tag!r}: choose one of {', '.join(self.services.categories.names)}.")

    def conversation(self, session: Session, index: int) -> Conversation:
        pane = session.panes[index]
        newest = pane.turns[-1]
        messages: list[tuple[str, str]] = []
        for turn in pane.turns:
            if turn.reply.ok or turn is newest:
                messages += [("user", turn.user), ("assistant", turn.reply.text)]
        if session.prepared is not None:  # stored replies: what wrote them, not what serves the name now
            return prepared_conversation(session, index, messages)
        spec = self.registry.spec(pane.chosen)
        final = newest.reply.final
        template = str(final.extra.get("template", spec.template)) if final is not None else spec.template
        served = self.registry.fingerprint(pane.chosen)
        return Conversation(
            conv_id=pane.conv_id,
            model_name=pane.model or "",
            template_name=template,
            system_message=newest.system_prompt or spec.system_prompt or "",
            messages=messages,
            params=newest.params,
            mode=session.mode,
            battle_id=session.battle_id,
            turn=len(pane.turns),
            anonymous=session.mode == "battle",
            fingerprint=served.id if served else "",
            fingerprint_components=served.components if served else {},
        )

    def _record_chat(self, session: Session, index: int, client: ClientInfo) -> None:
        reply = session.panes[index].turns[-1].reply
        if reply.final is None:
            return
        try:
            event = ChatEvent(self.conversation(session, index), reply.final, reply.started, time.time(), client)
            self.services.recorder.chat(event)
        except RecordError as exc:
            log.error("transcript not recorded: %s", exc)
        except Exception:  # a broken recorder must not break the chat
            log.exception("transcript not recorded")

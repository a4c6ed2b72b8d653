"""The arena's handlers as plain functions of (session, inputs): send, regenerate, stop, vote, new
round, choose a model. The Gradio tabs only wire components to these; the tests call them directly.

`Handlers` is the one object the UI holds. It owns a turn's life (accept a message or a
regeneration, start the run, stop it, start a new round) and hands each other job to a
collaborator with one job:

* `webui.arena.lineup.Lineup`: which model sits in each pane and what each pane asks it for;
* `webui.arena.replies.Replies`: streaming a run's replies into the session and settling it;
* `webui.arena.voting.Voting`: checking and recording a vote;
* `webui.arena.transcripts.Transcripts`: a pane's conversation and its chat records.

Generation handlers are generators that yield the session after every change, so that the UI can
redraw; they always end the run in `finally` (a Stop, a closed tab or an error), which stops the
models, marks unfinished replies as stopped and hands every finished reply to the recorder.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from webui.access.ratelimit import RateLimited
from webui.arena import rules as arena
from webui.arena.lineup import Lineup
from webui.arena.pairing import Evidence
from webui.arena.prepared import CHARS_PER_S, stored_request
from webui.arena.replies import Replies
from webui.arena.rules import Owner, PaneSettings, Refused, Session
from webui.arena.streaming import stored_reply
from webui.arena.transcripts import Transcripts
from webui.arena.voting import Voting
from webui.leaderboard.board.favours import Favour
from webui.records.events import ClientInfo, Mode
from webui.records.prepared import PreparedPairs

if TYPE_CHECKING:
    from webui.services import Services

log = logging.getLogger(__name__)
STOP_WAIT_S = 10.0  # Stop waits this long for the models to stop, so that it can show the result
NO_PREPARED = "No prepared question is waiting right now. Type your own!"


class Handlers:
    """The arena's events, for the UI and the tests: each method takes a session (None: a new one)
    and the event's inputs, checks the owner, and refuses with a message before anything changes."""

    def __init__(
        self,
        services: Services,
        rng: random.Random | None = None,
        evidence: Callable[[], Evidence | None] | None = None,
        favoured: Callable[[], Sequence[Favour]] | None = None,
        prepared: PreparedPairs | None = None,
    ) -> None:
        self.services = services
        self.settings = services.settings
        self.rng = rng or random.SystemRandom()
        # Stored pairs (a replay's queue) that visitors may judge as a battle (webui.records.prepared)
        self.prepared = prepared
        self.lineup = Lineup(
            services,
            self.rng,
            # What smart pairing knows: the live board's ratings and pair counts (None: no board yet, a weighted draw)
            evidence or (lambda: None),
            # Pairs the operator asked to favour for a number of battles (webui.leaderboard.board.favours)
            favoured or (lambda: ()),
        )
        self.transcripts = Transcripts(services)
        self.replies = Replies(services, self.transcripts)
        self.voting = Voting(services, self.transcripts, self._check_rate, prepared)

    # ---- sessions and models ------------------------------------------------------------------
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
        return session, self.lineup.choose(session, pane, name)

    def set_pane_count(
        self, session: Session | None, mode: Mode, count: object, owner: Owner, models: Sequence[str | None] = ()
    ) -> tuple[Session, bool]:
        """Side by side: show 2, 3 or 4 panes (a new conversation when the number changes). A pane
        takes the model its dropdown shows, if that one is ready, so that its label names it at
        once. Returns (session, changed)."""
        session = self.session_for(session, mode, owner)
        return session, self.lineup.set_pane_count(session, count, models)

    def pane_defaults(self, name: str) -> PaneSettings:
        """The controls' values for a model: the defaults from its models-file entry."""
        return self.lineup.pane_defaults(name)

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
            self.lineup.assign(session, models)
            requests = self.lineup.requests(session, range(len(session.panes)), pane_settings, same_settings)
            arena.add_turn(session, message, [requests[i] for i in range(len(session.panes))])
            run = self._start_run(session)
        yield from self.replies.stream(session, run, range(len(session.panes)), client)

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
            requests = self.lineup.requests(session, panes, pane_settings, same_settings)
            arena.reset_replies(session, panes, requests)
            run = self._start_run(session)
        yield from self.replies.stream(session, run, panes, client)

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
            requests = [stored_request(self.lineup.spec_or_none(pair.models[side])) for side in sides]
            arena.add_turn(session, pair.prompt, requests)
            run = self._start_run(session)
        openers = {i: stored_reply(pair.replies[side], CHARS_PER_S) for i, side in enumerate(sides)}
        yield from self.replies.stream(session, run, range(2), client, openers)

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

    # ---- votes ----------------------------------------------------------------------------------
    def vote(self, session: Session | None, kind: str, owner: Owner, client: ClientInfo, *, tag: str = "") -> Session:
        """Record a vote if the rules allow it (webui.arena.voting: it counts only once recorded)."""
        return self.voting.vote(session, kind, owner, client, tag=tag)

    def _start_run(self, session: Session) -> threading.Event:
        """The run's cancel signal, also set by a server stop and by the session's tab closing."""
        return self.services.generations.track(arena.start_run(session), session_hash=session.owner.session_hash)

    def _check_rate(self, action: str, client: ClientInfo) -> None:
        """The per-client limits on messages and votes (webui.access.ratelimit)."""
        try:
            self.services.rate_limiter.check(action, client)
        except RateLimited as exc:  # its message names the limit, never a model
            raise Refused(str(exc)) from None

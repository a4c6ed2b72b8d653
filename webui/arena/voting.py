"""Takes a vote: checks it against the rules, writes the vote record, and only then counts it.

Guarantees:

* A vote counts (`arena.mark_voted`: a battle's names are revealed, the buttons close) only once
  the recorder has its record; on a RecordError the visitor is told and may vote again.
* The record carries both panes' conversations (webui.arena.transcripts), the turn, the battle's
  id, the voter's session key, a prepared pair's id and source, and a declared category tag; the
  tag only with --visitor-tags, only in a battle, only a known category.
* Everything is checked (rules, tag, the per-client limit) before anything is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from webui.arena import rules as arena
from webui.arena.rules import Owner, Refused, Session
from webui.arena.transcripts import Transcripts
from webui.leaderboard.votes.declared import TAG_FIELD
from webui.records.events import ClientInfo, RecordError, VoteEvent
from webui.records.prepared import PREPARED_KEY, SOURCE_KEY, PreparedPairs

if TYPE_CHECKING:
    from webui.services import Services

log = logging.getLogger(__name__)
VOTE_NOT_RECORDED = "Sorry, your vote could not be recorded. Please try again in a moment."


class Voting:
    """Records votes for the arena's sessions. `check_rate(action, client)` raises Refused when a
    client is over its limit (the handlers' own check, shared with Send)."""

    def __init__(
        self,
        services: Services,
        transcripts: Transcripts,
        check_rate: Callable[[str, ClientInfo], None],
        prepared: PreparedPairs | None = None,
    ) -> None:
        self.services = services
        self.transcripts = transcripts
        self.check_rate = check_rate
        self.prepared = prepared

    def vote(self, session: Session | None, kind: str, owner: Owner, client: ClientInfo, *, tag: str = "") -> Session:
        """Record a vote if the rules allow it. It counts only once the recorder has it: on a
        RecordError the user is told, and may vote again. `tag`: the declared category the visitor
        tagged the battle with ("" none; only with --visitor-tags, only in a battle), kept in the
        vote record's `extra` (FastChat's readers ignore the key)."""
        session = arena.check_owner(session, owner)
        with session.lock:
            arena.check_vote(session, kind, owner)
            self._check_tag(session, tag)
            self.check_rate("vote", client)
            event = VoteEvent(
                kind=kind,
                # a known kind: check_vote
                conversations=[self.transcripts.conversation(session, i) for i in range(len(session.panes))],
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

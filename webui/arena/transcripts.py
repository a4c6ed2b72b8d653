"""What the log keeps of a pane: its conversation in FastChat's shape, and one chat record per
finished reply.

Guarantees:

* `conversation` is what a vote and a chat record both carry: the turns whose reply is kept (a
  failed turn only when it is the newest), the model's template and system prompt, the served
  weights' fingerprint; a prepared battle's pane names what wrote its stored reply instead.
* `record_chat` writes a record only for a reply that has its `Finished` event, and never raises:
  a recorder that fails is logged, and the chat goes on.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from webui.arena.prepared import prepared_conversation
from webui.arena.rules import Session
from webui.records.events import ChatEvent, ClientInfo, Conversation, RecordError

if TYPE_CHECKING:
    from webui.services import Services

log = logging.getLogger(__name__)


class Transcripts:
    """Builds a pane's conversation and hands finished replies to the recorder."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.registry = services.registry

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

    def record_chat(self, session: Session, index: int, client: ClientInfo) -> None:
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

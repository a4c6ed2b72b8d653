"""A battle on a prepared pair (webui.records.prepared): what its panes are asked with and what
its votes record. Pure: the handlers (webui.arena.handlers.prepared_battle) bring the pair, the
registry's entries and the session.

Guarantees: the stored replies are recorded under the model names and fingerprints of what wrote
them (the pair's), never of what serves those names now; a model this arena does not serve is
recorded with default settings rather than refused, since nothing is generated.
"""

from __future__ import annotations

from webui.arena.rules import PaneRequest, Session
from webui.models.specs import ModelSpec
from webui.records.events import Conversation
from webui.types import SamplingParams

# How fast a prepared battle's stored replies appear: about what a small model streams on a CPU.
CHARS_PER_S = 160.0


def stored_request(spec: ModelSpec | None) -> PaneRequest:
    """What a stored reply is recorded with: its model's settings where this arena serves it."""
    if spec is None:
        return (SamplingParams(), None, "")
    return (spec.sampling, None, spec.system_prompt or "")


def prepared_conversation(session: Session, index: int, messages: list[tuple[str, str]]) -> Conversation:
    """Pane `index` of a prepared battle as the vote and chat records keep it."""
    pair, pane = session.prepared, session.panes[index]
    assert pair is not None, "a prepared battle's session holds its pair"
    side = pair.models.index(pane.chosen) if pair.models[0] != pair.models[1] else index
    newest = pane.turns[-1]
    return Conversation(
        conv_id=pane.conv_id,
        model_name=pane.chosen,
        template_name="",
        system_message=newest.model_system_prompt,
        messages=messages,
        params=newest.params,
        mode=session.mode,
        battle_id=session.battle_id,
        turn=len(pane.turns),
        anonymous=True,
        fingerprint=pair.fingerprints[side],
    )

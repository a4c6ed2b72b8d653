"""Which model sits in each pane, and what each pane asks it for: choosing models, drawing a
battle's pair, the panes' parameters and system prompts.

Guarantees:

* A model can be chosen only when it is ready, or when nobody has asked for it yet (with
  --no-preload: it starts loading then); anything else is refused with a message that says why.
  A different model in a pane clears that pane's conversation.
* A battle's pair is drawn once, on its first message (webui.arena.pairing); only the pair is kept,
  in the session, which the page never sees before the vote.
* In a battle, a pane on its model's own settings gets the battle's one length cap
  (arena.battle_length_cap), so that neither side wins by writing longer.

Callers hold `session.lock` around the methods that change a session.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from webui.arena import rules as arena
from webui.arena.pairing import Evidence, choose_pair
from webui.arena.rules import PaneRequest, PaneSettings, Refused, Session
from webui.engine.registry import ModelState
from webui.errors import ModelNotFound, ModelNotReady
from webui.leaderboard.board.favours import Favour
from webui.models.specs import ModelSpec

if TYPE_CHECKING:
    from webui.services import Services


class Lineup:
    """The panes' models and requests, checked against the registry."""

    def __init__(
        self,
        services: Services,
        rng: random.Random,
        evidence: Callable[[], Evidence | None],
        favoured: Callable[[], Sequence[Favour]],
    ) -> None:
        self.registry = services.registry
        self.settings = services.settings
        self.rng = rng
        self.evidence = evidence
        self.favoured = favoured

    # ---- choosing models ----------------------------------------------------------------------
    def choose(self, session: Session, pane: int, name: object) -> bool:
        """Put model `name` in pane `pane`; whether it changed (and the pane was cleared)."""
        if not isinstance(name, str) or not name:
            raise Refused("Choose a model first.")
        with session.lock:
            if session.panes[pane].model == name:
                return False
            self._check_ready(name)
            if session.busy:
                raise Refused("Please stop the replies before changing the model.")
            session.panes[pane].model = name
            session.panes[pane].clear()
        return True

    def set_pane_count(self, session: Session, count: object, models: Sequence[str | None]) -> bool:
        """Side by side: show `count` panes, each taking the model its dropdown shows if that one
        is ready. Whether the number changed."""
        with session.lock:
            changed = arena.set_pane_count(session, count)
            for pane, name in zip(session.panes, models, strict=False):
                if name and name != pane.model and self._ready(name):
                    pane.model = name
                    pane.clear()
        return changed

    def pane_defaults(self, name: str) -> PaneSettings:
        """The controls' values for a model: the defaults from its models-file entry."""
        spec = self.registry.spec(name)
        return PaneSettings.from_spec(spec.sampling, spec.system_prompt)

    def spec_or_none(self, model: str) -> ModelSpec | None:
        try:
            return self.registry.spec(model)
        except ModelNotFound:
            return None

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

    # ---- a turn's models and requests ---------------------------------------------------------
    def assign(self, session: Session, models: Sequence[str | None]) -> None:
        """The models for a new turn: a battle's pair (drawn on its first turn), or the named
        models, each of which must be chosen (and ready when it changes)."""
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

    def requests(
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

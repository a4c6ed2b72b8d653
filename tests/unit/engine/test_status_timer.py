"""The status timer (webui.ui.status_updates), without a server: it fills an empty model dropdown,
and never puts back a model the person picked after the timer fired."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from webui.engine.registry import ModelState, ModelStatus
from webui.ui import StatusOutputs, status_updates


def services(*statuses: ModelStatus) -> SimpleNamespace:
    return SimpleNamespace(registry=SimpleNamespace(statuses=lambda: list(statuses)))


READY = (ModelStatus("tiny-a", ModelState.READY), ModelStatus("tiny-b", ModelState.READY))
# Stand-ins for the components: the updates are keyed by whatever the outputs are.
DRAWN = StatusOutputs(
    seen="seen",
    battle="battle",
    battle_prepared="battle-prepared",
    side_by_side="sbs",
    sbs_models=("sbs-a", "sbs-b", "sbs-c", "sbs-d"),
    direct="direct",
    direct_model="direct-model",
)


def test_an_empty_dropdown_gets_a_ready_model() -> None:
    out = status_updates(services(*READY), "side_by_side", None, (None, None, None, None, None), DRAWN)
    assert [out[d]["value"] for d in DRAWN.sbs_models] == ["tiny-a", "tiny-b", "tiny-b", "tiny-b"]
    assert out["battle"] == gr.skip() and out["direct"] == gr.skip(), "only the tab on show"
    assert list(out) == DRAWN.components()


def test_a_dropdown_with_a_model_gets_new_choices_but_keeps_its_model() -> None:
    """`chosen` is what the page showed when the timer fired; the answer arrives later. Had it set
    the value, a model picked in between (and its parameters, loaded by that pick) would be put
    back by a model status that changed meanwhile."""
    loading = ModelStatus("long-a", ModelState.LOADING)
    out = status_updates(services(*READY, loading), "side_by_side", None, ("tiny-a", "tiny-b", None, None, None), DRAWN)
    for picked in ("sbs-a", "sbs-b"):
        assert "value" not in out[picked] and ("long-a (loading)", "long-a") in out[picked]["choices"]
    assert out["sbs-c"]["value"] == "tiny-b", "an empty one is still filled"
    direct = status_updates(services(*READY), "direct", None, (None, None, None, None, "tiny-b"), DRAWN)
    assert "value" not in direct["direct-model"] and direct["direct"].startswith("🟢")


def test_the_prepared_question_button_shows_only_while_a_pair_waits() -> None:
    waiting = status_updates(services(*READY), "battle", None, (None,) * 5, DRAWN, prepared_waiting=True)
    assert waiting["battle-prepared"]["visible"] is True
    last = waiting["seen"]
    # the same models, but the last pair was voted on: the button goes
    gone = status_updates(services(*READY), "battle", last, (None,) * 5, DRAWN, prepared_waiting=False)
    assert gone["battle-prepared"]["visible"] is False

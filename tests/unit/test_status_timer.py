"""The status timer (webui.ui.status_updates), without a server: it fills an empty model dropdown,
and never puts back a model the person picked after the timer fired."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from webui.engine.registry import ModelState, ModelStatus
from webui.ui import status_updates


def services(*statuses: ModelStatus) -> SimpleNamespace:
    return SimpleNamespace(registry=SimpleNamespace(statuses=lambda: list(statuses)))


READY = (ModelStatus("tiny-a", ModelState.READY), ModelStatus("tiny-b", ModelState.READY))


def test_an_empty_dropdown_gets_a_ready_model() -> None:
    out = status_updates(services(*READY), "side_by_side", None, (None, None, None, None, None), 4)
    assert [out[3 + k]["value"] for k in range(4)] == ["tiny-a", "tiny-b", "tiny-b", "tiny-b"]
    assert out[1] == gr.skip() and out[7] == gr.skip(), "only the tab on show"


def test_a_dropdown_with_a_model_gets_new_choices_but_keeps_its_model() -> None:
    """`chosen` is what the page showed when the timer fired; the answer arrives later. Had it set
    the value, a model picked in between (and its parameters, loaded by that pick) would be put
    back by a model status that changed meanwhile."""
    loading = ModelStatus("long-a", ModelState.LOADING)
    out = status_updates(services(*READY, loading), "side_by_side", None, ("tiny-a", "tiny-b", None, None, None), 4)
    for k in (0, 1):
        assert "value" not in out[3 + k] and ("long-a (loading)", "long-a") in out[3 + k]["choices"]
    assert out[5]["value"] == "tiny-b", "an empty one is still filled"
    direct = status_updates(services(*READY), "direct", None, (None, None, None, None, "tiny-b"), 4)
    assert "value" not in direct[8] and direct[7].startswith("🟢")

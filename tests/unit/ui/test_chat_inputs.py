"""The chat events' named inputs (webui.ui.chat_inputs), without a server: the names and their order
(the API's positions), and what parse makes of the values."""

from __future__ import annotations

import gradio as gr
import pytest

from webui.arena.rules import PaneSettings, Refused
from webui.ui.chat_inputs import InputNames, named_components, parse
from webui.ui.chat_layout import KINDS, lay_out

FIELDS = PaneSettings.FIELDS
SBS = InputNames.of(4, models=True, own=False, count=True)
BATTLE = InputNames.of(2, models=False, own=True, count=False)
DIRECT = InputNames.of(1, models=True, own=False, count=False)


def lettered(letter: str) -> list[str]:
    return [f"{letter}_{name}" for name in FIELDS]


def test_side_by_side_keeps_the_two_pane_positions_first() -> None:
    assert SBS.send() == [
        "message",
        "model_a",
        "model_b",
        "same_params",
        *lettered("a"),
        *lettered("b"),
        "panes",
        "model_c",
        "model_d",
        *lettered("c"),
        *lettered("d"),
    ]
    assert SBS.regenerate() == ["same_params", *lettered("a"), *lettered("b"), *lettered("c"), *lettered("d")]


def test_battle_and_direct_names() -> None:
    own = [["a_own_settings", *lettered("a")], ["b_own_settings", *lettered("b")]]
    assert BATTLE.send() == ["message", "same_params", *own[0], *own[1]]
    assert BATTLE.regenerate() == ["same_params", *own[0], *own[1]]
    assert DIRECT.send() == ["message", "model", *FIELDS]
    assert DIRECT.regenerate() == list(FIELDS)


def pane_values(letter: str, k: int) -> dict[str, object]:
    """Pane `letter`'s controls, each value telling the pane apart."""
    values = {"temperature": 0.1 * k, "top_p": 0.5, "top_k": k, "max_new_tokens": 10 * k}
    values |= {"repetition_penalty": 1.0, "seed": k, "system_prompt": f"pane {letter}"}
    return {f"{letter}_{name}": value for name, value in values.items()}


def test_each_pane_gets_its_own_values_and_model() -> None:
    values: dict[str, object] = {"message": "hi", "same_params": True, "panes": 3}
    for k, letter in enumerate("abcd", start=1):
        values |= {f"model_{letter}": f"m-{letter}", **pane_values(letter, k)}
    asked = parse(SBS, values)
    assert asked.message == "hi" and asked.same is True and asked.panes == 3
    assert asked.models == ["m-a", "m-b", "m-c", "m-d"]
    assert [(s.sampling.top_k, s.sampling.max_new_tokens, s.sampling.seed) for s in asked.settings] == [
        (k, 10 * k, k) for k in range(1, 5)
    ]
    assert [s.system_prompt for s in asked.settings] == ["pane a", "pane b", "pane c", "pane d"]
    assert not any(s.own_defaults for s in asked.settings)


def test_a_battle_pane_may_take_its_models_own_settings() -> None:
    values = {"message": "hi", "a_own_settings": True, "b_own_settings": False}
    values |= pane_values("a", 1) | pane_values("b", 2)
    asked = parse(BATTLE, values)
    assert [s.own_defaults for s in asked.settings] == [True, False]
    assert asked.models == [] and asked.same is False and asked.panes is None


def test_direct_chat_reads_unlettered_names() -> None:
    values = {"message": "hi", "model": "m", **dict(zip(FIELDS, pane_values("x", 3).values(), strict=True))}
    asked = parse(DIRECT, values)
    assert (
        asked.models == ["m"] and asked.settings[0].sampling.top_k == 3 and asked.settings[0].system_prompt == "pane x"
    )


def test_a_malformed_value_is_refused_with_its_control_name() -> None:
    values = {"message": "hi", **pane_values("a", 1), **pane_values("b", 2), "b_top_k": "many"}
    with pytest.raises(Refused, match="top_k must be a number"):
        parse(BATTLE, values)
    del values["b_top_p"]  # left out by a caller: read as None, which is not a number either
    values["b_top_k"] = 5
    with pytest.raises(Refused, match="top_p must be a number"):
        parse(BATTLE, values)


def test_every_name_is_the_component_that_says_so() -> None:
    """Each name reaches the component whose elem_id carries it (side by side: "a_top_k" is
    sbs-a-top-k, "model_c" is sbs-model-c)."""
    with gr.Blocks():
        layout = lay_out(KINDS["side_by_side"])
    components = named_components(layout)
    assert set(components) == set(SBS.send())
    special = {"message": "sbs-input", "same_params": "sbs-same", "panes": "sbs-panes-count"}
    for name, component in components.items():
        expected = special.get(name) or "sbs-" + name.replace("_", "-")
        assert component.elem_id == expected, name

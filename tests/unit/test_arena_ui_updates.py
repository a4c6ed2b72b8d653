"""What the tab sends per update, without a server: everything first, then only what changed, and
never an update dict that Gradio can spoil for the next comparison."""

from __future__ import annotations

import gradio as gr

from webui.ui.common import Delta


class Session:  # stands for the arena session in a gr.State: changed in place, never equal by value
    def __eq__(self, other: object) -> bool:
        raise AssertionError("a session is compared by identity only")

    __hash__ = object.__hash__


def test_the_first_update_is_whole_then_only_changes() -> None:
    session, delta = Session(), Delta()
    chat = {"__type__": "update", "value": [{"role": "user", "content": "hi"}], "label": "Model A"}
    first = delta([session, chat, "", gr.update(interactive=True)])
    assert first[0] is session and first[1] == chat and first[1] is not chat  # a copy
    grown = {**chat, "value": [*chat["value"], {"role": "assistant", "content": "he"}]}
    second = delta([session, grown, "", gr.update(interactive=True)])
    assert second[0] == gr.skip() and second[2] == gr.skip() and second[3] == gr.skip()
    assert second[1] == grown


def test_gradio_popping_the_value_out_of_an_update_does_not_change_the_next_comparison() -> None:
    """Gradio's postprocess pops "value" from the update dicts it is given; if those were the
    dicts kept for the comparison, every later update would differ and the final one would
    arrive without its value."""
    delta = Delta()
    chat = {"__type__": "update", "value": ["a"], "label": "Model A"}
    for sent in delta([chat]):
        sent.pop("value")  # what gradio.blocks.postprocess_update_dict does
    assert delta([dict(chat)]) == [gr.skip()]
    assert delta.full() == [chat]


def test_a_streaming_pane_goes_in_every_update_even_unchanged() -> None:
    """Gradio diffs each output against what it sent last: a streaming pane left out of one update
    would go whole (every message) in the next; sent every time, unchanged it is an empty diff."""
    delta = Delta()
    chat = {"__type__": "update", "value": ["a"]}
    delta([chat, "x"])
    assert delta([dict(chat), "x"], always=[0]) == [chat, gr.skip()]

"""What the tab sends per update, without a server: everything first, then only what changed (as
bare values where the properties did not change), and never an update dict that Gradio can spoil
for the next comparison."""

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
    assert second[1] == grown["value"], "only the value changed: it goes bare, not as an update"


def test_an_output_whose_properties_changed_goes_as_an_update() -> None:
    """A bare value keeps the component as the last update left it; a new label (a model chosen,
    a battle revealed) or a button turned off needs the update dict."""
    delta = Delta()
    chat = {"__type__": "update", "value": ["a"], "label": "Model A"}
    delta([chat, gr.update(interactive=True)])
    renamed = {**chat, "label": "Model A: tiny-a"}
    sent = delta([renamed, gr.update(interactive=False)])
    assert sent == [renamed, gr.update(interactive=False)] and sent[0] is not renamed


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


def test_outputs_only_the_server_changes_go_bare_even_unchanged() -> None:
    """gr.skip() is an (empty) update dict, for which Gradio builds a new component; an unchanged
    bare value costs it an empty diff. The box and the notice, which the page changes itself, and
    the buttons, which have no value, are still left out."""
    delta = Delta()
    chat = {"__type__": "update", "value": ["a"], "label": "Model A"}
    box = {"__type__": "update", "interactive": True}
    delta([chat, "x", "notice", box])
    assert delta([dict(chat), "x", "notice", dict(box)], bare=[0, 1]) == [["a"], "x", gr.skip(), gr.skip()]


def test_the_page_script_component_copies_as_gradio_copies_it_on_every_page_load() -> None:
    """gr.HTML takes a quoted word of its js_on_load that names one of its own arguments for a
    custom event and puts that event in the page's config; gradio deep-copies the config for
    every page and fell back, leaving half an event loop behind. Nothing callable is in it."""
    import copy

    from webui.ui.page import install

    page = install(["chat-stop"], {"1": ["vote-a"]}, ["chat-text", "battle-text"])
    config = page.get_config()
    assert not [key for key, value in config.items() if callable(value)]
    copied = copy.deepcopy(config)
    assert copied["js_on_load"] == config["js_on_load"] and '"chat-text", "battle-text"' in config["js_on_load"]

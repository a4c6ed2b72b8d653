"""What a battle shows before the vote cannot tell its models apart by their configured defaults;
every failed reply leaves a record; text that no encoder takes never reaches one; the models start
before the first redraw; side by side takes 2-4 panes. Handlers and views, without Gradio."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from tests.unit.arena.test_arena_handlers import CLIENT, ME, OWN, drain, fake_services
from webui.arena import rules as arena
from webui.arena.handlers import Handlers
from webui.arena.rules import PaneSettings, Refused
from webui.config import Settings
from webui.engine.registry import build_registry
from webui.records.storage import JsonlRecorder
from webui.services import Services
from webui.types import FinishReason
from webui.ui import views

# Two models that answer with the same words but are configured differently, as the demo's are:
# their own length caps (8 and 5 words), system prompts, a template that leaves a leading space
# and trailing newlines, another speed.
TWINS = {
    "long-cap": {
        "words": 10,
        "sampling": {"max_new_tokens": 8, "temperature": 0.2},
        "system_prompt": "Be long.",
        "around": (" ", "\n\n"),
        "speed": 80.0,
    },
    "short-cap": {
        "words": 10,
        "sampling": {"max_new_tokens": 5, "temperature": 0.9, "ignore_eos": True},
        "speed": 20.0,
    },
}


def shown_before_the_vote(session: arena.Session) -> list[list[dict]]:
    return [views.chat_messages(p, anonymous=session.anonymous) for p in session.panes]


def test_the_two_panes_of_a_battle_cannot_be_told_apart_by_their_defaults() -> None:
    services = fake_services(TWINS, battle_max_new_tokens=6)
    session = drain(Handlers(services, rng=random.Random(0)).send(None, "battle", "hi", OWN, ME, CLIENT))[-1]
    replies = [p.turns[-1].reply for p in session.panes]
    # One length cap for both panes, whatever each model's own max_new_tokens says.
    assert [r.final.completion_tokens for r in replies] == [6, 6]
    assert [r.final.reason for r in replies] == [FinishReason.LENGTH] * 2
    assert all(t.params.max_new_tokens == 6 and not t.params.ignore_eos for t in (p.turns[-1] for p in session.panes))
    # What the browser gets for the two panes is the same, to the byte: no length, no whitespace
    # left by a template, no token count or speed.
    a, b = shown_before_the_vote(session)
    assert a == b
    assert "tokens" not in json.dumps(a) and "length limit reached" in json.dumps(a)
    assert views.pane_label(session, 0, "battle") == "Model A" and views.reveal_markdown(session) == ""


def test_after_the_vote_the_names_and_each_models_settings_are_shown() -> None:
    services = fake_services(TWINS, battle_max_new_tokens=6)
    handlers = Handlers(services, rng=random.Random(0))
    session = drain(handlers.send(None, "battle", "hi", OWN, ME, CLIENT))[-1]
    handlers.vote(session, "tievote", ME, CLIENT)
    reveal = views.reveal_markdown(session)
    by_model = {p.model: i for i, p in enumerate(session.panes)}
    assert f"Model A was **{session.panes[0].model}**" in reveal
    temperature = next(line for line in reveal.splitlines() if line.startswith("| temperature"))
    cells = [c.strip() for c in temperature.strip("|").split("|")][1:]
    assert cells[by_model["long-cap"]] == "0.2" and cells[by_model["short-cap"]] == "0.9"
    system = next(line for line in reveal.splitlines() if line.startswith("| system prompt"))
    assert "“Be long.”" in system and "(none)" in system
    assert "| max_new_tokens | 6 | 6 |" in reveal
    # and the statistics come back under the replies
    assert "6 tokens" in json.dumps(views.chat_messages(session.panes[0], anonymous=session.anonymous))


def test_the_battle_cap_is_the_pairs_never_a_sides() -> None:
    assert arena.battle_length_cap(256, [None, None]) == 256
    assert arena.battle_length_cap(256, [4096, 256]) == 128  # half the smaller context
    assert arena.battle_length_cap(256, [256, 4096]) == 128  # the same on the other side


def test_named_modes_keep_each_models_own_length() -> None:
    services = fake_services(TWINS, battle_max_new_tokens=6)
    session = drain(
        Handlers(services).send(None, "side_by_side", "hi", OWN, ME, CLIENT, models=["long-cap", "short-cap"])
    )[-1]
    assert [p.turns[-1].reply.final.completion_tokens for p in session.panes] == [8, 5]
    assert "tokens/s" in json.dumps(views.chat_messages(session.panes[0]))


def test_a_reply_that_fails_before_streaming_is_recorded() -> None:
    services = fake_services({"good": {}, "bad": {"fail": "eager"}})
    session = drain(Handlers(services).send(None, "side_by_side", "hi", OWN, ME, CLIENT, models=["good", "bad"]))[-1]
    assert session.panes[1].turns[-1].reply.error is not None
    chats = {c.conversation.model_name: c.finished for c in services.recorder.chats}
    assert set(chats) == {"good", "bad"}, "one record per reply, the failed one too"
    assert chats["bad"].reason is FinishReason.ERROR and "on fire" in chats["bad"].error


@pytest.fixture
def tiny_services(tmp_path: Path, tiny_models_file: Path) -> Services:
    settings = Settings(models_file=tiny_models_file, cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs")
    registry = build_registry(settings)
    registry.start()
    assert registry.wait_idle(60)
    yield Services(settings, registry, JsonlRecorder.from_settings(settings, registry.names()))
    registry.close()


def test_a_lone_surrogate_reaches_neither_the_model_nor_the_log(tiny_services: Services) -> None:
    """JSON from a browser can carry half of an emoji ("\\ud83d"). The real tokenizer cannot
    encode it, and the log would keep a string that no UTF-8 writer downstream can write."""
    handlers = Handlers(tiny_services)
    system = PaneSettings.from_values([0.0, 1.0, 0, 8, 1.0, -1, "be \udc00 kind"])
    session = drain(handlers.send(None, "direct", "hello \ud83d world", [system], ME, CLIENT, models=["tiny-a"]))[-1]
    turn = session.panes[0].turns[-1]
    assert turn.reply.ok, f"the reply failed: {turn.reply.error}"
    assert turn.user == "hello \ufffd world" and turn.system_prompt == "be \ufffd kind"
    lines = [
        line for f in sorted((tiny_services.settings.log_dir).glob("*.json")) for line in f.read_text().splitlines()
    ]
    assert lines, "the reply was recorded"
    for line in lines:
        json.dumps(json.loads(line), ensure_ascii=False).encode("utf-8")  # no lone surrogate came back


def test_the_models_start_before_the_first_redraw() -> None:
    """The user's message and the first text are one update apart, not one update plus the time
    Gradio takes to send the first one."""
    services = fake_services({"a": {"delay": 0.05, "words": 50}, "b": {"delay": 0.05, "words": 50}})
    stream = Handlers(services).send(None, "side_by_side", "go", OWN, ME, CLIENT, models=["a", "b"])
    first = next(stream)  # the redraw with the user's message; the generator now waits for Gradio
    assert all(p.turns[-1].reply.text == "" for p in first.panes)
    deadline = time.monotonic() + 2
    while not all(b.calls for b in services.backends.values()):
        assert time.monotonic() < deadline, "the models were not asked until the first redraw was taken"
        time.sleep(0.01)
    stream.close()


def test_side_by_side_takes_two_to_four_panes() -> None:
    services = fake_services({"a": {}, "b": {}, "c": {"words": 2}, "d": {"words": 1}})
    handlers = Handlers(services)
    session = drain(
        handlers.send(
            None,
            "side_by_side",
            "hi",
            [PaneSettings(own_defaults=True)] * 4,
            ME,
            CLIENT,
            models=["a", "b", "c", "d"],
            pane_count=4,
        )
    )[-1]
    assert [p.turns[-1].reply.text for p in session.panes] == ["w0 w1 w2 ", "w0 w1 w2 ", "w0 w1 ", "w0 "]
    with pytest.raises(Refused, match="two models"):
        handlers.vote(session, "leftvote", ME, CLIENT)
    assert views.vote_note(session, drop_stopped=True, counts_named=False) == views.MORE_THAN_TWO
    session, changed = handlers.set_pane_count(session, "side_by_side", 2, ME, models=["a", "b"])
    assert changed and len(session.panes) == 2 and not any(p.turns for p in session.panes)
    session, changed = handlers.set_pane_count(session, "side_by_side", 3, ME, models=["a", "b", "c"])
    assert [p.model for p in session.panes] == ["a", "b", "c"], "the new pane takes its dropdown's model"
    for wrong in (1, 5, "x", None):
        with pytest.raises(Refused, match="2 or 3 or 4 panes"):
            handlers.set_pane_count(session, "side_by_side", wrong, ME)
    with pytest.raises(Refused, match="2 panes"):
        drain(handlers.send(None, "battle", "hi", OWN, ME, CLIENT, pane_count=3))


def test_each_of_four_panes_gets_its_own_parameters() -> None:
    services = fake_services({"a": {"words": 20}})
    handlers = Handlers(services)
    settings = [PaneSettings.of(max_new_tokens=n, system_prompt=f"sys {n}") for n in (2, 3, 4, 5)]
    session = drain(handlers.send(None, "side_by_side", "hi", settings, ME, CLIENT, models=["a"] * 4, pane_count=4))[-1]
    assert [p.turns[-1].reply.final.completion_tokens for p in session.panes] == [2, 3, 4, 5]
    assert [p.turns[-1].system_prompt for p in session.panes] == ["sys 2", "sys 3", "sys 4", "sys 5"]


def test_direct_chat_can_flag_after_a_thumb() -> None:
    services = fake_services({"a": {}})
    handlers = Handlers(services)
    session = drain(handlers.send(None, "direct", "hi", [PaneSettings(own_defaults=True)], ME, CLIENT, models=["a"]))[
        -1
    ]
    handlers.vote(session, "upvote", ME, CLIENT)
    assert arena.can_vote(session, "flag") and not arena.can_vote(session, "downvote")
    # the buttons mark what was cast on this turn, and the note says it
    assert [v.kind for v in views.chosen_votes(session)] == ["upvote"]
    handlers.vote(session, "flag", ME, CLIENT)
    note = views.vote_note(session, drop_stopped=True, counts_named=True)
    assert note == "✓ Votes recorded: 👍 Good · ⚑ Flag. Thank you!"
    session = drain(handlers.send(session, "direct", "again", [PaneSettings(own_defaults=True)], ME, CLIENT))[-1]
    assert views.chosen_votes(session) == () and views.vote_note(session, drop_stopped=True, counts_named=True) == ""


def test_the_voter_is_told_when_a_stopped_reply_keeps_the_vote_off_the_leaderboard() -> None:
    services = fake_services({"a": {"delay": 0.05, "words": 1000}, "b": {"delay": 0.05, "words": 1000}})
    handlers = Handlers(services)
    stream = handlers.send(None, "battle", "go", OWN, ME, CLIENT)
    for session in stream:
        if all(p.turns[-1].reply.text for p in session.panes):
            break
    stream.close()  # like Stop
    assert views.vote_note(session, drop_stopped=True, counts_named=False) == views.STOPPED_NOT_COUNTED
    assert views.vote_note(session, drop_stopped=False, counts_named=False) == ""
    session.mode = "side_by_side"  # named battles only count when the operator says so
    assert views.vote_note(session, drop_stopped=True, counts_named=False) == ""
    assert views.vote_note(session, drop_stopped=True, counts_named=True) == views.STOPPED_NOT_COUNTED


def test_the_generic_failure_message_is_defined_once() -> None:
    """The pane shows the handlers' own text, never the exception's."""
    from webui.arena import replies

    assert views.GENERIC_FAILURE is replies.GENERIC_FAILURE
    services = fake_services({"x": {"fail": "late"}, "y": {}})
    session = drain(Handlers(services).send(None, "side_by_side", "hi", OWN, ME, CLIENT, models=["x", "y"]))[-1]
    shown = views.reply_markdown(session.panes[0].turns[-1].reply)
    assert views.GENERIC_FAILURE in shown and "broke" not in shown

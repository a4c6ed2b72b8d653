"""The arena's rules as plain functions: drawing pairs, messages, parameters, votes."""

from __future__ import annotations

import collections
import math
import random

import pytest

from webui.arena import rules as arena
from webui.arena.rules import Owner, PaneSettings, Refused
from webui.types import Finished, FinishReason, SamplingParams

ME = Owner("session-1")


def finished_session(mode: str = "battle", reasons: tuple[FinishReason, ...] = (FinishReason.STOP, FinishReason.STOP)):
    session = arena.new_session(mode, ME)
    for pane, name in zip(session.panes, ("m1", "m2")[: len(session.panes)], strict=True):
        pane.model = name
    arena.add_turn(session, "hi", [(SamplingParams(), None)] * len(session.panes))
    for pane, reason in zip(session.panes, reasons, strict=True):
        pane.turns[-1].reply.text = "hello"
        pane.turns[-1].reply.final = Finished(reason)
    return session


# ---- drawing -----------------------------------------------------------------------------


def test_draw_pair_gives_two_different_models_on_both_sides() -> None:
    rng = random.Random(1)
    pairs = [arena.draw_pair({"x": 1.0, "y": 1.0}, rng) for _ in range(200)]
    assert all(a != b for a, b in pairs)
    assert collections.Counter(pairs).keys() == {("x", "y"), ("y", "x")}  # sides are randomised


def test_draw_pair_follows_the_weights() -> None:
    rng = random.Random(2)
    counts = collections.Counter()
    for _ in range(2000):
        counts.update(arena.draw_pair({"heavy": 8.0, "b": 1.0, "c": 1.0}, rng))
    assert counts["heavy"] > 1700  # in nearly every pair
    assert abs(counts["b"] - counts["c"]) < 250  # equal weights, equal chances


@pytest.mark.parametrize(
    "weights",
    [
        {},
        {"x": 1.0},
        {"x": 0.0, "y": 0.0},
        {"x": 1.0, "y": 0.0},
        {"x": math.nan, "y": 1.0},
        {"x": math.inf, "y": 1.0},
        {"x": -1, "y": 1},
    ],
)
def test_draw_pair_refuses_instead_of_crashing(weights: dict) -> None:
    with pytest.raises(Refused, match="two models"):
        arena.draw_pair(weights, random.Random(0))


def test_zero_weight_keeps_a_model_out() -> None:
    rng = random.Random(3)
    seen = {name for _ in range(300) for name in arena.draw_pair({"x": 1, "y": 1, "z": 1, "off": 0}, rng)}
    assert seen == {"x", "y", "z"}


# ---- messages and parameters ---------------------------------------------------------------


@pytest.mark.parametrize("text", [None, "", "   \n\t "])
def test_empty_message_is_nothing(text) -> None:
    assert arena.clean_message(text, 10) is None


def test_message_limit_is_refused_with_the_numbers_not_cut() -> None:
    assert arena.clean_message("x" * 10, 10) == "x" * 10
    with pytest.raises(Refused, match="11 characters long; the limit is 10"):
        arena.clean_message("x" * 11, 10)
    with pytest.raises(Refused):
        arena.clean_message(["not", "text"], 10)


def test_pane_settings_from_raw_values() -> None:
    s = PaneSettings.from_values([0.5, 0.9, 40.0, 128.0, 1.1, -1, "Be brief."])
    assert (s.sampling.top_k, s.sampling.max_new_tokens, s.sampling.seed, s.system_prompt) == (
        40,
        128,
        None,
        "Be brief.",
    )
    params, system = s.apply(SamplingParams(stop=("###",)))
    assert params.temperature == 0.5 and params.stop == ("###",) and system == "Be brief."
    assert PaneSettings.from_values([0.5, 0.9, 40, 128, 1.1, 7.0, ""]).sampling.seed == 7


@pytest.mark.parametrize(
    ("values", "field"),
    [
        (["hot", 0.9, 40, 128, 1.1, -1, ""], "temperature"),
        ([0.5, 0.9, 40.5, 128, 1.1, -1, ""], "top_k"),
        ([0.5, 0.9, 40, 128, 1.1, -1, 42], "system prompt"),
        ([0.5, 0.9, 40, 128, float("nan"), -1, ""], "repetition_penalty"),
    ],
)
def test_malformed_controls_are_refused_by_name(values, field) -> None:
    with pytest.raises(Refused, match=field):
        PaneSettings.from_values(values)


def test_out_of_range_parameters_are_refused_by_name() -> None:
    with pytest.raises(Refused, match="temperature"):
        PaneSettings.from_values([5.0, 0.9, 40, 128, 1.1, -1, ""]).apply(SamplingParams())
    with pytest.raises(Refused, match="max_new_tokens"):
        PaneSettings.from_values([0.5, 0.9, 40, 0, 1.1, -1, ""]).apply(SamplingParams())


def test_own_defaults_ignore_the_controls() -> None:
    defaults = SamplingParams(temperature=0.3, max_new_tokens=99)
    assert PaneSettings.of(temperature=99, own_defaults=True).apply(defaults) == (defaults, None)


def test_defaults_round_trip_through_the_controls() -> None:
    spec = SamplingParams(temperature=0.2, top_p=0.8, top_k=5, max_new_tokens=64, repetition_penalty=1.2)
    shown = PaneSettings.from_spec(spec, "sys")
    params, system = PaneSettings.from_values(shown.values()).apply(spec)
    assert params == spec and system == "sys"


# ---- turns ---------------------------------------------------------------------------------


def test_model_sees_system_prompt_earlier_good_turns_and_the_new_message() -> None:
    session = finished_session("direct", (FinishReason.CANCELLED,))
    pane = session.panes[0]
    arena.add_turn(session, "second", [(SamplingParams(), None)])
    pane.turns[-1].reply.error = "failed"
    arena.add_turn(session, "third", [(SamplingParams(), "Be kind.")])
    assert [(m.role, m.content) for m in pane.messages()] == [
        ("system", "Be kind."),
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "third"),
    ]


def test_sending_rules() -> None:
    session = arena.new_session("battle", ME)
    arena.check_can_send(session, max_turns=2)
    arena.add_turn(session, "hi", [(SamplingParams(), None)] * 2)
    with pytest.raises(Refused, match="wait"):
        arena.check_can_send(session, max_turns=2)  # replies still pending
    session = finished_session()
    arena.check_can_send(session, max_turns=2)
    with pytest.raises(Refused, match="limit of 1 turns"):
        arena.check_can_send(session, max_turns=1)
    arena.mark_voted(session, "tievote")
    with pytest.raises(Refused, match="New round"):
        arena.check_can_send(session, max_turns=5)
    with pytest.raises(Refused, match="New round"):
        arena.check_can_regenerate(session, (0,))


# ---- votes ---------------------------------------------------------------------------------


def test_vote_needs_a_battle_of_ones_own() -> None:
    with pytest.raises(Refused, match="send a message first"):
        arena.check_vote(None, "leftvote", ME)
    with pytest.raises(Refused, match="another session"):
        arena.check_vote(finished_session(), "leftvote", Owner("session-2"))
    with pytest.raises(Refused, match="send a message first"):
        arena.check_vote(arena.new_session("battle", ME), "leftvote", ME)


def test_no_vote_before_both_replies_finished() -> None:
    session = finished_session()
    session.panes[1].turns[-1].reply.final = None
    with pytest.raises(Refused, match="every reply has finished"):
        arena.check_vote(session, "leftvote", ME)
    session.panes[1].turns[-1].reply.final = Finished(FinishReason.STOP)
    session.running = arena.start_run(session)  # e.g. a regenerate just started
    with pytest.raises(Refused, match="every reply has finished"):
        arena.check_vote(session, "leftvote", ME)
    assert not arena.can_vote(session)


def test_one_vote_per_battle_turn_then_reveal() -> None:
    session = finished_session()
    assert arena.can_vote(session) and session.anonymous
    arena.check_vote(session, "leftvote", ME)
    arena.mark_voted(session, "leftvote")
    assert session.revealed and not session.anonymous and not arena.can_vote(session)
    for kind in ("leftvote", "rightvote"):
        with pytest.raises(Refused, match="already voted"):
            arena.check_vote(session, kind, ME)


def test_stopped_replies_can_be_judged_failed_ones_cannot() -> None:
    arena.check_vote(finished_session(reasons=(FinishReason.CANCELLED, FinishReason.LENGTH)), "tievote", ME)
    with pytest.raises(Refused, match="failed"):
        arena.check_vote(finished_session(reasons=(FinishReason.ERROR, FinishReason.STOP)), "tievote", ME)


def test_vote_kinds_fit_the_mode() -> None:
    with pytest.raises(Refused, match="Unknown vote"):
        arena.check_vote(finished_session(), "upvote", ME)
    with pytest.raises(Refused, match="Unknown vote"):
        arena.check_vote(finished_session("direct", (FinishReason.STOP,)), "leftvote", ME)


def test_direct_chat_takes_one_thumb_and_one_flag_per_turn() -> None:
    session = finished_session("direct", (FinishReason.STOP,))
    arena.mark_voted(session, "upvote")
    with pytest.raises(Refused, match="already voted"):
        arena.check_vote(session, "downvote", ME)
    arena.check_vote(session, "flag", ME)
    arena.mark_voted(session, "flag")
    with pytest.raises(Refused, match="already voted"):
        arena.check_vote(session, "flag", ME)
    arena.add_turn(session, "again", [(SamplingParams(), None)])
    session.panes[0].turns[-1].reply.final = Finished(FinishReason.STOP)
    arena.check_vote(session, "downvote", ME)  # a new turn, a new vote


def test_side_by_side_votes_every_turn_and_names_are_shown() -> None:
    session = finished_session("side_by_side")
    assert not session.anonymous
    arena.mark_voted(session, "rightvote")
    assert not session.revealed
    arena.check_can_send(session, max_turns=5)  # not locked
    with pytest.raises(Refused, match="already voted"):
        arena.check_vote(session, "leftvote", ME)

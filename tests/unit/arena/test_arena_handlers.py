"""The handlers as plain functions, without Gradio: streaming both panes at once, Stop, a closed
tab, errors in one pane, votes and the recorder seam, limits, named modes."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.tiny import tiny_models
from webui.arena.handlers import Handlers
from webui.arena.replies import GENERIC_FAILURE
from webui.arena.rules import Owner, PaneSettings, Refused, Session
from webui.arena.voting import VOTE_NOT_RECORDED
from webui.config import Settings
from webui.engine.base import Backend, Weights
from webui.engine.registry import Registry, build_registry
from webui.models.specs import ModelSpec
from webui.records.events import ClientInfo, NullRecorder, RecordError
from webui.services import Services
from webui.types import Finished, FinishReason, Message, Route, SamplingParams, TextDelta
from webui.ui import views

ME = Owner("s1")
CLIENT = ClientInfo("127.0.0.1")
OWN = [PaneSettings(own_defaults=True)] * 2


class FakeBackend(Backend):
    """Words at a fixed pace, up to max_new_tokens; honours the cancel event like a real backend
    (within one step). `around` is text its "template" always leaves before and after the reply.
    `after`, an event, holds back the first word until something else has happened."""

    def __init__(self, spec: ModelSpec, cfg: dict) -> None:
        self.spec, self.delay, self.words, self.fail = spec, cfg.get("delay", 0.0), cfg.get("words", 3), cfg.get("fail")
        self.around: tuple[str, str] = cfg.get("around", ("", ""))
        self.speed = cfg.get("speed", 50.0)
        self.after: threading.Event | None = cfg.get("after")
        self.silent_cancel = cfg.get("silent_cancel", False)
        self.open_streams = 0
        self.calls = 0

    def stream(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        cancel: threading.Event | None = None,
        *,
        route: Route | None = None,
    ) -> Iterator:
        self.calls += 1
        if self.fail == "eager":
            raise RuntimeError(f"{self.spec.name} is on fire")
        cancel = cancel or threading.Event()
        self.open_streams += 1
        words = min(self.words, params.max_new_tokens)
        reason = FinishReason.LENGTH if words < self.words else FinishReason.STOP

        def events() -> Iterator:
            try:
                yield TextDelta(self.around[0])
                while self.after is not None and not (self.after.wait(0.01) or cancel.is_set()):
                    pass
                for n in range(words):
                    if cancel.wait(self.delay):
                        if not self.silent_cancel:  # (a stream closed under it sends nothing more)
                            yield Finished(FinishReason.CANCELLED, completion_tokens=n)
                        return
                    yield TextDelta(f"w{n} ")
                if self.fail == "late":
                    yield Finished(FinishReason.ERROR, error=f"{self.spec.name} broke")
                    return
                yield TextDelta(self.around[1])
                yield Finished(
                    reason,
                    completion_tokens=words,
                    ttft_s=0.01,
                    tokens_per_s=self.speed,
                    prompt=f"PROMPT for {self.spec.name}: {messages[-1].content}",
                )
            finally:
                self.open_streams -= 1

        return events()


def fake_services(models: dict[str, dict], *, max_turns: int = 20, recorder=None, **limits: Any) -> Services:
    specs = [
        ModelSpec(
            name=name,
            source=name,
            weight=cfg.get("weight", 1.0),
            system_prompt=cfg.get("system_prompt"),
            sampling=SamplingParams(**cfg.get("sampling", {"max_new_tokens": 32})),
        )
        for name, cfg in models.items()
    ]
    backends: dict[str, FakeBackend] = {}

    def loader(spec: ModelSpec, settings: Settings) -> Weights:
        cfg = models[spec.name]
        if cfg.get("broken_load"):
            raise RuntimeError("cannot load")

        def make(variant: ModelSpec, slots) -> FakeBackend:
            backends.setdefault(variant.name, FakeBackend(variant, cfg))
            return backends[variant.name]

        return Weights(make)

    settings = Settings(max_turns=max_turns, max_input_chars=50, **limits)
    registry = Registry(specs, settings, loaders={"auto": loader})
    registry.start()
    assert registry.wait_idle(10)
    services = Services(settings, registry, recorder or NullRecorder())
    services.backends = backends  # type: ignore[attr-defined]
    return services


def drain(stream: Iterator[Session]) -> list[Session]:
    return list(stream)


def rendered(session: Session) -> str:
    """Everything the battle view puts on screen, as one string."""
    parts = [
        str(views.chat_messages(p)) + views.pane_label(session, i, session.mode) for i, p in enumerate(session.panes)
    ]
    return " ".join(parts) + views.reveal_markdown(session)


# ---- battle --------------------------------------------------------------------------------


def test_a_battle_draws_a_favoured_pair_from_what_the_handler_is_given() -> None:
    """The favours reach the battle's pair: with an active favour of gamma vs delta, that pair comes
    up far more often than one in six, on both sides; without it, about one in six."""
    from webui.arena.pairing import Evidence
    from webui.leaderboard.board.favours import Favour

    names = ("alpha", "beta", "gamma", "delta")
    services = fake_services({name: {"sampling": {"max_new_tokens": 1}} for name in names}, rate_messages=0)
    evidence = Evidence(dict.fromkeys(names, 1000.0), {})
    favour = Favour("gamma", "delta", until=10, asked_at=0.0)

    def pairs(favoured: list[Favour]) -> list[tuple[str, ...]]:
        handlers = Handlers(services, rng=random.Random(3), evidence=lambda: evidence, favoured=lambda: favoured)
        drawn = []
        for _ in range(200):
            session = drain(handlers.send(None, "battle", "hi", OWN, ME, CLIENT))[-1]
            drawn.append(tuple(p.model for p in session.panes))
        return drawn

    with_favour, without = pairs([favour]), pairs([])
    favoured = [p for p in with_favour if set(p) == {"gamma", "delta"}]
    assert len(favoured) > 60 and {p[0] for p in favoured} == {"gamma", "delta"}
    assert sum(set(p) == {"gamma", "delta"} for p in without) < 60


def test_battle_turn_streams_votes_and_reveals() -> None:
    services = fake_services({"alpha": {}, "beta": {}, "gamma": {"weight": 0}})
    handlers = Handlers(services, rng=random.Random(0))
    frames = drain(handlers.send(None, "battle", "hello", OWN, ME, CLIENT))
    session = frames[-1]
    assert {p.model for p in session.panes} == {"alpha", "beta"}  # weight 0 stays out
    assert [p.turns[-1].reply.text for p in session.panes] == ["w0 w1 w2 "] * 2
    assert len(services.recorder.chats) == 2 and all(c.conversation.anonymous for c in services.recorder.chats)
    for name in ("alpha", "beta"):
        assert name not in rendered(session)
    handlers.vote(session, "leftvote", ME, CLIENT)
    vote = services.recorder.votes[-1]
    assert vote.kind == "leftvote" and [c.model_name for c in vote.conversations] == [p.model for p in session.panes]
    assert vote.conversations[0].messages == [("user", "hello"), ("assistant", "w0 w1 w2 ")]
    assert "alpha" in rendered(session) and "beta" in rendered(session)
    with pytest.raises(Refused, match="already voted"):
        handlers.vote(session, "rightvote", ME, CLIENT)
    with pytest.raises(Refused, match="New round"):
        drain(handlers.send(session, "battle", "more", OWN, ME, CLIENT))
    fresh = handlers.new_round(session, "battle", ME)
    assert fresh.battle_id != session.battle_id and fresh.panes[0].model is None


@pytest.mark.timeout(60)  # a fast reply held back until the slow one moves would hang: pytest-timeout ends it
def test_a_fast_model_is_not_held_back_by_a_slow_one() -> None:
    """The slow model says nothing until the screen shows the fast reply complete. The slow pane
    comes first, so that reading the panes one after the other would wait on it for ever."""
    fast_shown = threading.Event()
    services = fake_services({"fast": {"words": 5}, "slow": {"words": 5, "after": fast_shown}})
    stream = Handlers(services).send(
        None, "side_by_side", "go", [PaneSettings(own_defaults=True)] * 2, ME, CLIENT, models=["slow", "fast"]
    )
    for session in stream:
        replies = {p.model: p.turns[-1].reply for p in session.panes if p.turns}
        if "fast" in replies and replies["fast"].done:
            assert replies["fast"].text == "w0 w1 w2 w3 w4 "
            fast_shown.set()
            break
    else:
        pytest.fail("the fast reply never finished")
    final = list(stream)[-1]
    assert {p.model: p.turns[-1].reply.text for p in final.panes} == {
        "fast": "w0 w1 w2 w3 w4 ",
        "slow": "w0 w1 w2 w3 w4 ",
    }


def long_battle_under_way() -> tuple[Services, Handlers, threading.Thread, list[Session]]:
    """A battle of two long replies streaming in a thread, once both panes show text."""
    services = fake_services({"a": {"delay": 0.05, "words": 1000}, "b": {"delay": 0.05, "words": 1000}})
    handlers = Handlers(services)
    frames: list[Session] = []
    worker = threading.Thread(target=lambda: frames.extend(handlers.send(None, "battle", "go", OWN, ME, CLIENT)))
    worker.start()
    deadline = time.monotonic() + 5
    while not (frames and all(p.turns and p.turns[-1].reply.text for p in frames[-1].panes)):
        assert time.monotonic() < deadline, "no text arrived"
        time.sleep(0.01)
    return services, handlers, worker, frames


def test_stop_ends_both_streams_and_keeps_partial_replies() -> None:
    services, handlers, worker, frames = long_battle_under_way()
    session = handlers.stop(frames[-1], ME)
    worker.join(5)
    assert not worker.is_alive()
    assert all(p.turns[-1].reply.stopped and p.turns[-1].reply.text for p in session.panes)
    assert all("stopped" in views.reply_markdown(p.turns[-1].reply) for p in session.panes)
    assert all(b.open_streams == 0 for b in services.backends.values())
    assert [c.finished.reason for c in services.recorder.chats] == [FinishReason.CANCELLED] * 2
    handlers.vote(session, "tievote", ME, CLIENT)  # stopped replies can still be judged


def test_a_server_stop_ends_a_running_battle_as_stop_does_and_every_later_run_at_once() -> None:
    """What a stop (Ctrl-C, SIGTERM) does to the UI: every run it tracks is cancelled, the partial
    replies are recorded as stopped, and a run that starts after it ends at once."""
    services, handlers, worker, frames = long_battle_under_way()
    assert services.generations.stop_all() == 1  # one run, two panes
    worker.join(5)
    assert not worker.is_alive(), "the stop did not end the run"
    assert all(p.turns[-1].reply.stopped and p.turns[-1].reply.text for p in frames[-1].panes)
    assert [c.finished.reason for c in services.recorder.chats] == [FinishReason.CANCELLED] * 2
    later = drain(handlers.send(None, "side_by_side", "go", OWN, ME, CLIENT, models=["a", "b"]))[-1]
    assert all(p.turns[-1].reply.stopped for p in later.panes)


@pytest.mark.parametrize("silent", [False, True], ids=["ends-with-finished", "ends-without-finished"])
def test_closing_the_generator_like_a_closed_tab_stops_the_models(silent: bool) -> None:
    """Each stopped reply gets one chat record, stopped, whether its stream sent its Finished event
    on the way out or not (then the run's end marks it stopped)."""
    long = {"delay": 0.05, "words": 1000, "silent_cancel": silent}
    services = fake_services({"a": long, "b": long})
    stream = Handlers(services).send(None, "battle", "go", OWN, ME, CLIENT)
    for session in stream:
        if all(p.turns[-1].reply.text for p in session.panes):
            break
    stream.close()
    assert all(b.open_streams == 0 for b in services.backends.values())
    assert all(p.turns[-1].reply.stopped for p in session.panes) and session.running is None
    assert [c.finished.reason for c in services.recorder.chats] == [FinishReason.CANCELLED] * 2


def test_a_failing_model_shows_a_generic_message_in_its_pane_only() -> None:
    services = fake_services({"good": {}, "bad": {"fail": "eager"}, "late": {"fail": "late"}})
    handlers = Handlers(services)
    for broken in ("bad", "late"):
        session = drain(handlers.send(None, "side_by_side", "hi", OWN, ME, CLIENT, models=["good", broken]))[-1]
        good, bad = (p.turns[-1].reply for p in session.panes)
        assert good.ok and good.text == "w0 w1 w2 "
        shown = views.reply_markdown(bad)
        assert "⚠️" in shown and broken not in shown and "fire" not in shown and "broke" not in shown
        with pytest.raises(Refused, match="failed"):
            handlers.vote(session, "leftvote", ME, CLIENT)
    session = drain(handlers.send(None, "battle", "hi", OWN, ME, CLIENT))[-1]  # the app goes on


def test_failure_messages_never_name_the_model() -> None:
    from webui.arena.replies import failure_message
    from webui.errors import ModelNotReady, Overloaded

    for exc in (Overloaded("secret-model", 3.0), ModelNotReady("secret-model is not ready"), KeyError("secret-model")):
        assert "secret" not in failure_message(exc)
    assert failure_message(ValueError("x")) == GENERIC_FAILURE


def test_a_vote_that_cannot_be_recorded_does_not_count() -> None:
    class Flaky(NullRecorder):
        fail = True

        def vote(self, event) -> None:
            if self.fail:
                raise RecordError("disk full")
            super().vote(event)

    services = fake_services({"a": {}, "b": {}}, recorder=Flaky())
    handlers = Handlers(services)
    session = drain(handlers.send(None, "battle", "hi", OWN, ME, CLIENT))[-1]
    with pytest.raises(Refused, match="could not be recorded") as info:
        handlers.vote(session, "leftvote", ME, CLIENT)
    assert str(info.value) == VOTE_NOT_RECORDED and session.anonymous
    services.recorder.fail = False
    handlers.vote(session, "leftvote", ME, CLIENT)
    assert session.revealed and len(services.recorder.votes) == 1


def test_limits_and_empty_input() -> None:
    services = fake_services({"a": {}, "b": {}}, max_turns=2)
    handlers = Handlers(services)
    frames = drain(handlers.send(None, "battle", "   ", OWN, ME, CLIENT))
    assert len(frames) == 1 and frames[0].panes[0].model is None and not services.recorder.chats
    with pytest.raises(Refused, match="limit is 50"):
        drain(handlers.send(frames[0], "battle", "x" * 51, OWN, ME, CLIENT))
    session = frames[0]
    for _ in range(2):
        session = drain(handlers.send(session, "battle", "hi", OWN, ME, CLIENT))[-1]
    with pytest.raises(Refused, match="limit of 2 turns"):
        drain(handlers.send(session, "battle", "hi", OWN, ME, CLIENT))
    with pytest.raises(Refused, match="another session"):
        drain(handlers.send(session, "battle", "hi", OWN, Owner("intruder"), CLIENT))


def test_rate_limits_refuse_with_their_own_message() -> None:
    services = fake_services({"a": {}, "b": {}}, rate_messages=1, rate_votes=1)
    handlers = Handlers(services)
    session = drain(handlers.send(None, "side_by_side", "hi", OWN, ME, CLIENT, models=["a", "b"]))[-1]
    with pytest.raises(Refused, match="Too many"):
        drain(handlers.send(session, "side_by_side", "again", OWN, ME, CLIENT))
    with pytest.raises(Refused, match="Too many"):
        drain(handlers.regenerate(session, (0,), OWN, ME, CLIENT))
    handlers.vote(session, "tievote", ME, CLIENT)
    assert len(services.recorder.votes) == 1


def test_battle_needs_two_ready_models() -> None:
    services = fake_services({"a": {}, "broken": {"broken_load": True}})
    with pytest.raises(Refused, match="two models"):
        drain(Handlers(services).send(None, "battle", "hi", OWN, ME, CLIENT))


def test_regenerate_one_pane_keeps_the_other() -> None:
    services = fake_services({"a": {}, "b": {}})
    handlers = Handlers(services)
    session = drain(handlers.send(None, "side_by_side", "hi", OWN, ME, CLIENT, models=["a", "b"]))[-1]
    kept = session.panes[0].turns[-1].reply
    turn = session.turn_no
    session = drain(handlers.regenerate(session, (1,), OWN, ME, CLIENT))[-1]
    assert session.panes[0].turns[-1].reply is kept and session.panes[1].turns[-1].reply.ok
    assert session.turn_no == turn + 1 and len(services.recorder.chats) == 3


# ---- named modes ---------------------------------------------------------------------------


def test_named_modes_choose_ready_models_and_clear_on_change() -> None:
    services = fake_services({"a": {}, "b": {}, "broken": {"broken_load": True}})
    handlers = Handlers(services)
    session, changed = handlers.choose_model(None, "side_by_side", 0, "a", ME)
    assert changed
    with pytest.raises(Refused, match="broken cannot be chosen now: it is failed"):
        handlers.choose_model(session, "side_by_side", 1, "broken", ME)
    with pytest.raises(Refused, match="no model"):
        handlers.choose_model(session, "side_by_side", 1, "nope", ME)
    with pytest.raises(Refused, match="Model B"):
        drain(handlers.send(session, "side_by_side", "hi", OWN, ME, CLIENT, models=["a", None]))
    session = drain(handlers.send(session, "side_by_side", "hi", OWN, ME, CLIENT, models=["a", "b"]))[-1]
    assert views.pane_label(session, 0, "side_by_side") == "Model A: a"
    assert views.last_prompt(session.panes[1]) == "PROMPT for b: hi"
    session, changed = handlers.choose_model(session, "side_by_side", 1, "a", ME)
    assert changed and not session.panes[1].turns and session.panes[0].turns
    assert handlers.choose_model(session, "side_by_side", 0, "a", ME) == (session, False)


def test_same_settings_applies_pane_a_to_both() -> None:
    services = fake_services({"a": {}, "b": {}})
    handlers = Handlers(services)
    a = PaneSettings.of(temperature=0.1, max_new_tokens=7, system_prompt="sys A")
    b = PaneSettings.of(temperature=1.5, max_new_tokens=9)
    session = drain(
        handlers.send(None, "side_by_side", "hi", [a, b], ME, CLIENT, models=["a", "b"], same_settings=True)
    )[-1]
    assert [
        (t.params.temperature, t.params.max_new_tokens, t.system_prompt) for t in (p.turns[-1] for p in session.panes)
    ] == [(0.1, 7, "sys A")] * 2


def test_direct_chat_votes() -> None:
    services = fake_services({"a": {}})
    handlers = Handlers(services)
    session = drain(handlers.send(None, "direct", "hi", [PaneSettings(own_defaults=True)], ME, CLIENT, models=["a"]))[
        -1
    ]
    handlers.vote(session, "upvote", ME, CLIENT)
    handlers.vote(session, "flag", ME, CLIENT)
    with pytest.raises(Refused, match="already voted"):
        handlers.vote(session, "downvote", ME, CLIENT)
    assert [v.kind for v in services.recorder.votes] == ["upvote", "flag"]


# ---- a real tiny model: Stop reaches the generate threads -------------------------------------


@pytest.fixture
def long_tiny(tmp_path: Path, tiny_model_dir: Path) -> Services:
    long = {"context_length": 4096, "sampling": {"ignore_eos": True, "max_new_tokens": 3000}}
    models = tiny_models(tmp_path, tiny_model_dir, [{"name": f"long-{s}", **long} for s in "ab"])
    settings = Settings(models_file=models, cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs")
    registry = build_registry(settings)
    registry.start()
    assert registry.wait_idle(60)
    yield Services(settings, registry, NullRecorder())
    registry.close()


def test_stop_ends_both_generate_threads_of_a_real_model(long_tiny: Services, no_thread_leak) -> None:
    handlers = Handlers(long_tiny)
    frames: list[Session] = []
    # Side by side: a battle would cap the replies at one length and stop them at end-of-sequence.
    worker = threading.Thread(
        target=lambda: frames.extend(
            handlers.send(None, "side_by_side", "hello", OWN, ME, CLIENT, models=["long-a", "long-b"])
        )
    )
    worker.start()
    deadline = time.monotonic() + 20
    while not (frames and all(p.turns and p.turns[-1].reply.text for p in frames[-1].panes)):
        assert time.monotonic() < deadline, "no text arrived"
        time.sleep(0.02)
    assert any(t.name.startswith("generate:") for t in threading.enumerate())
    handlers.stop(frames[-1], ME)
    worker.join(10)
    assert not [t for t in threading.enumerate() if t.name.startswith("generate:")]
    replies = [p.turns[-1].reply for p in frames[-1].panes]
    assert all(r.stopped and 0 < r.final.completion_tokens < 3000 for r in replies)


def test_closing_the_stream_ends_real_generate_threads(long_tiny: Services, no_thread_leak) -> None:
    stream = Handlers(long_tiny).send(None, "side_by_side", "hello", OWN, ME, CLIENT, models=["long-a", "long-b"])
    for session in stream:
        if all(p.turns[-1].reply.text for p in session.panes):
            break
    stream.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("generate:")]


def test_without_preload_the_ui_loads_a_model_on_first_use(settings) -> None:
    """--no-preload: nothing is loaded at start. Choosing a model in the UI, or drawing it for a
    battle, loads it, and the message waits for it (it used to be refused as "unloaded")."""
    registry = build_registry(settings.replace(preload=False))
    handlers = Handlers(Services(settings, registry, NullRecorder()), rng=random.Random(1))
    try:
        assert {s.state.value for s in registry.statuses()} == {"unloaded"}
        session, changed = handlers.choose_model(None, "direct", 0, "tiny-a", ME)
        assert changed
        session = list(handlers.send(session, "direct", "hello world", [PaneSettings(own_defaults=True)], ME, CLIENT))[
            -1
        ]
        reply = session.panes[0].turns[-1].reply
        assert reply.ok and reply.final.completion_tokens > 0
        battle = list(handlers.send(None, "battle", "hello", OWN, ME, CLIENT))[-1]
        assert all(p.turns[-1].reply.ok for p in battle.panes)
        assert {s.state.value for s in registry.statuses()} == {"ready"}
    finally:
        registry.close()


def test_a_visitor_tag_is_checked_before_the_vote_is_recorded(tmp_path: Path) -> None:
    """Only a declared category, only with --visitor-tags: anything else is refused and records nothing."""
    categories = tmp_path / "c.yaml"
    categories.write_text("categories:\n  - name: maths\n    keywords: [sum]\n")
    for tags_on, tag, refused in (
        (False, "maths", "does not take category tags"),
        (True, "cooking", "Unknown category 'cooking'"),
        (True, "maths", None),
    ):
        services = fake_services({"alpha": {}, "beta": {}}, categories_file=str(categories), visitor_tags=tags_on)
        handlers = Handlers(services, rng=random.Random(0))
        session = drain(handlers.send(None, "battle", "hello", OWN, ME, CLIENT))[-1]
        if refused:
            with pytest.raises(Refused, match=refused):
                handlers.vote(session, "leftvote", ME, CLIENT, tag=tag)
            assert services.recorder.votes == []
        else:
            handlers.vote(session, "leftvote", ME, CLIENT, tag=tag)
            assert services.recorder.votes[-1].extra["category_tag"] == "maths"

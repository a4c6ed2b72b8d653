"""Prepared battles (webui.records.prepared, the arena's prepared_battle): stored pairs written
whole, read back with bad lines skipped, served blind on random sides at one pace, one turn only,
and voted on once, the vote naming the pair and what wrote its replies."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from tests.unit.arena.test_arena_handlers import CLIENT, ME, OWN, drain, fake_services, rendered
from webui.arena.handlers import NO_PREPARED, Handlers
from webui.arena.rules import Refused
from webui.arena.streaming import stored_reply
from webui.records.events import RecordError
from webui.records.prepared import PREPARED_KEY, SOURCE_KEY, PreparedPair, PreparedPairs, read_pairs, write_pairs
from webui.types import Finished, FinishReason, TextDelta


def pair(n: int, models: tuple[str, str] = ("new", "old")) -> PreparedPair:
    return PreparedPair(
        pair_id=f"pair-{n}",
        source="replay-test",
        prompt=f"prompt {n}",
        models=models,
        replies=(f"NEW-REPLY {n} " * 3, f"OLD-REPLY {n} " * 3),
        fingerprints=("fp-new", "fp-old"),
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_pairs_are_written_whole_and_read_back_skipping_what_is_not_a_pair(tmp_path: Path) -> None:
    path = write_pairs(tmp_path, "replay-1", [pair(1), pair(2)])
    assert path == tmp_path / "prepared" / "replay-1.jsonl" and read_pairs(path) == [pair(1), pair(2)]
    with pytest.raises(RecordError, match="exists already"):
        write_pairs(tmp_path, "replay-1", [pair(3)])
    with path.open("a") as handle:
        handle.write('{"pair_id": "x"}\nnot json\n{"pair_id": "y", "source": "s", "prompt": "p", ')
        handle.write('"models": ["a"], "replies": ["r", "s"]}\n')
    assert read_pairs(path) == [pair(1), pair(2)]
    assert not list((tmp_path / "prepared").glob(".*tmp"))


def test_pending_pairs_follow_the_folder_and_the_votes_across_servers(tmp_path: Path) -> None:
    clock = Clock()
    one, other = PreparedPairs(tmp_path, clock=clock), PreparedPairs(tmp_path, clock=clock)
    assert one.pending() == [] and one.draw(random.Random(0)) is None
    write_pairs(tmp_path, "replay-1", [pair(1), pair(2)])
    assert one.pending() == [], "the folder is read again only after recheck_s"
    clock.now += 6
    assert {p.pair_id for p in one.pending()} == {"pair-1", "pair-2"}
    one.voted("pair-1")
    assert [p.pair_id for p in one.pending()] == ["pair-2"]
    # another server (or a restart) sees the vote through voted.txt
    assert [p.pair_id for p in other.pending()] == ["pair-2"]
    assert [p.pair_id for p in PreparedPairs(tmp_path).pending()] == ["pair-2"]


def test_a_stored_reply_streams_in_pieces_and_stops_like_a_live_one() -> None:
    text = "abcdefghij" * 3
    events = list(stored_reply(text, chars_per_s=4000, tick_s=0.001)(threading.Event()))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(deltas) == text and len(deltas) == 8  # 4 characters a piece
    assert events[-1] == Finished(FinishReason.STOP)  # no speed: it was not generated here
    stopped = threading.Event()
    stopped.set()
    assert list(stored_reply(text, 4000, 0.001)(stopped)) == [Finished(FinishReason.CANCELLED)]


def handlers_with_pairs(tmp_path: Path, *pairs: PreparedPair, seed: int = 0):
    services = fake_services({"new": {}, "old": {}, "third": {}})
    if pairs:
        write_pairs(tmp_path, "replay-test", list(pairs))
    prepared = PreparedPairs(tmp_path)
    return services, Handlers(services, rng=random.Random(seed), prepared=prepared), prepared


def test_a_prepared_battle_is_blind_one_turn_and_its_vote_names_the_pair(tmp_path: Path) -> None:
    services, handlers, prepared = handlers_with_pairs(tmp_path, pair(1))
    session = drain(handlers.prepared_battle(None, ME, CLIENT))[-1]
    models = [p.model for p in session.panes]
    assert sorted(models) == ["new", "old"]
    for pane in session.panes:
        assert pane.turns[-1].user == "prompt 1"
        assert pane.turns[-1].reply.text == pair(1).replies[pair(1).models.index(pane.model)]
    assert "new" not in rendered(session).replace("NEW-REPLY", "") and "old" not in rendered(session)
    assert all(b.calls == 0 for b in services.backends.values()), "stored replies, no model asked"
    with pytest.raises(Refused, match="prepared"):
        drain(handlers.send(session, "battle", "and then?", OWN, ME, CLIENT))
    with pytest.raises(Refused, match="prepared"):
        drain(handlers.regenerate(session, (0, 1), OWN, ME, CLIENT))

    handlers.vote(session, "leftvote", ME, CLIENT)
    vote = services.recorder.votes[-1]
    assert vote.extra[PREPARED_KEY] == "pair-1" and vote.extra[SOURCE_KEY] == "replay-test"
    assert [c.model_name for c in vote.conversations] == models
    fingerprints = dict(zip(pair(1).models, pair(1).fingerprints, strict=True))
    assert [c.fingerprint for c in vote.conversations] == [fingerprints[m] for m in models]
    assert vote.conversations[0].messages == [("user", "prompt 1"), ("assistant", session.panes[0].turns[0].reply.text)]
    assert "new" in rendered(session) and prepared.pending() == []
    with pytest.raises(Refused, match=NO_PREPARED.split(":")[0]):
        drain(handlers.prepared_battle(handlers.new_round(session, "battle", ME), ME, CLIENT))


def test_prepared_pairs_go_on_both_sides(tmp_path: Path) -> None:
    short = PreparedPair("pair-s", "replay-test", "p", ("new", "old"), ("n", "o"))  # streams in one piece
    _, handlers, _ = handlers_with_pairs(tmp_path, short)
    lefts = {drain(handlers.prepared_battle(None, ME, CLIENT))[-1].panes[0].model for _ in range(20)}
    assert lefts == {"new", "old"}


def test_without_prepared_pairs_the_button_says_so(tmp_path: Path) -> None:
    _, handlers, _ = handlers_with_pairs(tmp_path)
    with pytest.raises(Refused, match="No prepared question"):
        drain(handlers.prepared_battle(None, ME, CLIENT))
    bare = Handlers(fake_services({"new": {}, "old": {}}))
    with pytest.raises(Refused, match="No prepared question"):
        drain(bare.prepared_battle(None, ME, CLIENT))

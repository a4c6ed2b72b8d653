"""Smart pairing (webui/arena/pairing.py): the gain formula against a brute-force computation, the
draw's rules (deterministic given a seed, weights respected, a new model first), blindness in the
battle handler, and the simulated gain over a fixed set of seeds (vote counts, never times)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from bench.votes import pairing as simulation
from tests.records import battle, vote
from tests.unit.arena.test_arena_handlers import CLIENT, ME, OWN, drain, fake_services, rendered
from webui.arena.handlers import Handlers
from webui.arena.pairing import RIDGE, Evidence, choose_pair, draw_smart, pair_gains
from webui.arena.rules import Refused
from webui.config import Settings, settings_from_cli
from webui.errors import ConfigError
from webui.leaderboard.board.build import BoardOptions
from webui.leaderboard.board.view import LeaderboardView
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder
from webui.ui.leaderboard_tab import pairing_evidence

OLD = {"a": 1100.0, "b": 1000.0, "c": 990.0, "d": 900.0}


def established(votes: int = 400) -> Evidence:
    """Four models that met each other `votes` times per pair."""
    names = sorted(OLD)
    return Evidence(OLD, {frozenset((x, y)): float(votes) for i, x in enumerate(names) for y in names[i + 1 :]})


def summed_neighbour_variance(names: list[str], evidence: Evidence, extra: tuple[str, str] | None = None) -> float:
    """Brute force: build the information matrix (plus one vote on `extra`), invert it, add the
    variances of the differences of neighbours in rating order."""
    mean = np.mean([evidence.ratings[m] for m in names if m in evidence.ratings])
    theta = {m: (evidence.ratings.get(m, mean) - mean) * np.log(10) / 400 for m in names}
    info = np.eye(len(names)) * RIDGE
    for i, x in enumerate(names):
        for j, y in enumerate(names):
            if i < j:
                n = evidence.battles.get(frozenset((x, y)), 0.0) + (1.0 if extra == (x, y) else 0.0)
                p = 1 / (1 + np.exp(theta[y] - theta[x]))
                v = np.zeros(len(names))
                v[i], v[j] = 1.0, -1.0
                info += n * p * (1 - p) * np.outer(v, v)
    cov = np.linalg.inv(info)
    order = sorted(range(len(names)), key=lambda k: -theta[names[k]])
    return sum(cov[r, r] + cov[s, s] - 2 * cov[r, s] for r, s in itertools.pairwise(order))


def test_the_gain_is_the_drop_in_the_summed_neighbour_variance() -> None:
    evidence = Evidence(OLD, {frozenset(("a", "b")): 30.0, frozenset(("b", "c")): 5.0, frozenset(("c", "d")): 80.0})
    names = ["a", "b", "c", "d", "new"]
    before = summed_neighbour_variance(names, evidence)
    gains = pair_gains(names, evidence)
    assert len(gains) == 10
    for pair, gain in gains.items():
        assert gain == pytest.approx(before - summed_neighbour_variance(names, evidence, pair), rel=1e-6)


def test_the_same_seed_and_counts_give_the_same_pairs() -> None:
    weights = dict.fromkeys([*OLD, "new"], 1.0)

    def pairs(seed: int) -> list[tuple[str, str]]:
        rng = random.Random(seed)
        return [choose_pair("smart", weights, established(), rng) for _ in range(50)]

    assert pairs(7) == pairs(7)
    assert pairs(7) != pairs(8)


def test_a_new_model_gets_most_battles_until_it_has_votes() -> None:
    weights = dict.fromkeys([*OLD, "new"], 1.0)
    rng = random.Random(0)
    smart = Counter(m for _ in range(400) for m in choose_pair("smart", weights, established(), rng))
    weighted = Counter(m for _ in range(400) for m in choose_pair("weighted", weights, established(), rng))
    assert smart["new"] > 0.8 * 400  # most battles include it (by weight alone: 2 in 5)
    assert weighted["new"] < 0.5 * 400
    assert all(smart[m] > 0 for m in OLD), "the others still take part"


def test_weights_are_respected_and_a_model_never_meets_itself() -> None:
    rng = random.Random(1)
    weights = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.0, "new": 0.0}
    drawn = [choose_pair("smart", weights, established(), rng) for _ in range(300)]
    assert {m for pair in drawn for m in pair} == {"a", "b", "c"}  # weight 0: never, however informative
    assert all(x != y for x, y in drawn)
    with pytest.raises(Refused, match="two models"):
        choose_pair("smart", {"a": 1.0, "b": 0.0}, established(), rng)
    # gains worked out for more models than may be drawn (the bench caches them per board)
    gains = pair_gains([*OLD, "new"], established())
    assert {m for _ in range(300) for m in draw_smart(weights, gains, rng)} == {"a", "b", "c"}


def test_without_a_board_smart_draws_by_weight() -> None:
    weights = {"a": 1.0, "b": 1.0, "c": 1.0}
    assert [choose_pair("smart", weights, None, random.Random(3)) for _ in range(20)] == [
        choose_pair("weighted", weights, None, random.Random(3)) for _ in range(20)
    ]


def test_an_unknown_mode_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="pairing: must be one of smart, weighted"):
        choose_pair("clever", {"a": 1.0, "b": 1.0}, None, random.Random(0))
    with pytest.raises(ConfigError, match="pairing"):
        Settings(pairing="clever")
    assert Settings().pairing == "smart"


def test_the_mode_comes_from_the_command_line_or_the_environment() -> None:
    assert settings_from_cli(["--pairing", "weighted"], environ={}).pairing == "weighted"
    assert settings_from_cli([], environ={"ARENA_PAIRING": "weighted"}).pairing == "weighted"
    assert settings_from_cli([], environ={}).pairing == "smart"


def test_smart_pairing_reads_the_live_board(tmp_path: Path) -> None:
    """The Leaderboard tab's live board, converted: its ratings and its counted battles per pair."""
    recorder = JsonlRecorder(tmp_path, IdentityPolicy("none"))
    for i in range(13):
        recorder.vote(vote("leftvote" if i < 9 else "rightvote", battle("strong", "weak", prompt=f"question {i}")))
    recorder.vote(vote("tievote", battle("strong", "weak", anonymous=False)))
    view = LeaderboardView(tmp_path, BoardOptions(rounds=0))
    try:
        view.live.sync()
        board, _ = view.board()
        evidence_of = pairing_evidence(view)
        evidence = evidence_of()
        assert evidence is not None
        assert evidence.battles == {frozenset(("strong", "weak")): 13.0}  # the named one does not count
        assert evidence.ratings == dict(zip(board.table["model"], board.table["rating"], strict=True))
        assert evidence.ratings["strong"] > evidence.ratings["weak"]
        assert evidence_of() is evidence, "converted once per board version"
    finally:
        view.close()


def test_the_smart_choice_never_reaches_the_page_before_the_vote() -> None:
    services = fake_services({"alpha": {}, "beta": {}, "gamma": {}, "newbie": {}})
    board = Evidence(
        {"alpha": 1100.0, "beta": 1000.0, "gamma": 950.0},
        {frozenset(p): 500.0 for p in (("alpha", "beta"), ("beta", "gamma"), ("alpha", "gamma"))},
    )
    handlers = Handlers(services, rng=random.Random(0), evidence=lambda: board)
    met = Counter()
    for _ in range(10):
        session = drain(handlers.send(None, "battle", "hello", OWN, ME, CLIENT))[-1]
        names = [p.model for p in session.panes]
        met.update(names)
        assert not any(name in rendered(session) for name in names), "a name on the page before the vote"
        handlers.vote(session, "leftvote", ME, CLIENT)
        assert all(name in rendered(session) for name in names)
    assert met["newbie"] >= 8, "smart pairing was in charge (by weight alone newbie is in half the battles)"


def test_smart_pairing_needs_fewer_votes_on_fixed_seeds() -> None:
    """The bench's simulation, small: a newcomer joins an arena with 10,000 votes of history; on
    every seed, smart pairing narrows its interval to +-25 points in under half the votes the
    weighted draw needs (which does not get there within the budget)."""
    budget = 1500
    for seed in (0, 1, 2):
        smart = simulation.run("smart", seed, budget)
        weighted = simulation.run("weighted", seed, budget)
        assert smart.narrow_at is not None and smart.narrow_at <= budget // 2, seed
        assert weighted.narrow_at is None or weighted.narrow_at >= 2 * smart.narrow_at, seed

"""Favoured pairs: the operator asks for N more battles between two models; a share of battles
draws the pair until the board has counted them, the rest are drawn as always."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from tests.records import battle, vote
from webui.arena.pairing import Evidence, choose_pair
from webui.leaderboard.__main__ import main
from webui.leaderboard.board.favours import FAVOUR_SHARE, FILE, Favour, FavourFile, add_favour, read_favours
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder

WEIGHTS = dict.fromkeys("abcdef", 1.0)
EVIDENCE = Evidence(dict.fromkeys("abcdef", 1000.0), {frozenset(("a", "b")): 40.0})


def draws(favoured: list[Favour], evidence: Evidence | None = EVIDENCE, weights=WEIGHTS, n: int = 3000) -> Counter:
    rng = random.Random(7)
    return Counter(choose_pair("weighted", weights, evidence, rng, favoured) for _ in range(n))


def test_an_active_favour_draws_its_pair_in_a_share_of_battles_on_both_sides() -> None:
    plain = draws([])
    favoured = draws([Favour("a", "b", until=60, asked_at=0.0)])
    ab = favoured[("a", "b")] + favoured[("b", "a")]
    chance = 1 / 15  # one pair of fifteen, drawn plainly
    expected = FAVOUR_SHARE + (1 - FAVOUR_SHARE) * chance
    assert abs(ab / 3000 - expected) < 0.03 and favoured[("a", "b")] > 0 and favoured[("b", "a")] > 0
    assert (plain[("a", "b")] + plain[("b", "a")]) / 3000 < chance + 0.03
    assert len(favoured) > 20  # every other pair still comes up: a voter cannot tell


@pytest.mark.parametrize(
    ("favour", "evidence", "weights"),
    [
        (Favour("a", "b", until=40, asked_at=0.0), EVIDENCE, WEIGHTS),  # the 40 battles are counted: done
        (Favour("a", "b", until=60, asked_at=0.0), None, WEIGHTS),  # no board yet: nothing to count with
        (Favour("a", "b", until=60, asked_at=0.0), EVIDENCE, {**WEIGHTS, "b": 0.0}),  # b is out of battles
        (Favour("a", "zz", until=60, asked_at=0.0), EVIDENCE, WEIGHTS),  # not served here
    ],
)
def test_a_favour_ends_or_waits(favour: Favour, evidence: Evidence | None, weights: dict) -> None:
    favoured = draws([favour], evidence, weights)
    assert (favoured[("a", "b")] + favoured[("b", "a")]) / 3000 < 1 / 15 + 0.03


def test_the_file_keeps_one_favour_per_pair_and_a_broken_one_favours_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reader = FavourFile(tmp_path)
    assert reader() == ()
    add_favour(tmp_path, "a", "b", battles_now=10, more=5, clock=lambda: 1.0)
    add_favour(tmp_path, "c", "d", battles_now=0, more=3, clock=lambda: 2.0)
    add_favour(tmp_path, "b", "a", battles_now=12, more=8, clock=lambda: 3.0)  # the same pair: replaced
    assert read_favours(tmp_path) == [Favour("c", "d", 3, 2.0), Favour("b", "a", 20, 3.0)]
    assert [f.until for f in reader()] == [3, 20]  # read again: the file changed
    with pytest.raises(ValueError, match="two different models"):
        add_favour(tmp_path, "a", "a", 0, 5)
    (tmp_path / FILE).write_text("[{]")
    assert read_favours(tmp_path) == [] and "no pair is favoured" in caplog.text
    (tmp_path / FILE).write_text(json.dumps([{"a": "x"}]))
    assert reader() == []


def test_the_command_line_favours_a_pair_of_the_board(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    recorder = JsonlRecorder(tmp_path, IdentityPolicy("none"))
    for i in range(12):
        recorder.vote(vote("leftvote", battle("a", "b", prompt=f"q{i}")))
        recorder.vote(vote("rightvote", battle("a", "c", prompt=f"r{i}")))
    recorder.close()
    assert main([str(tmp_path), "--rounds", "0", "--favour", "b", "a", "--favour-battles", "30"]) == 0
    assert "favoured b vs a for 30 more counted battles (until 42 between them)" in capsys.readouterr().err
    assert read_favours(tmp_path)[0].until == 42
    assert main([str(tmp_path), "--rounds", "0", "--favour", "a", "zz"]) == 2
    assert main([str(tmp_path), "--rounds", "0", "--favour", "a", "a"]) == 2
    assert main([str(tmp_path), "--rounds", "0", "--favour", "a", "b", "--favour-battles", "0"]) == 2

"""The best-of-many warning: a family's top row is the best of k, and part of its lead is luck."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from tests.records import battle, vote
from webui.leaderboard.__main__ import main
from webui.leaderboard.stats.families import expected_optimism, family_notes, family_prefixes
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder


def test_the_expected_maximum_of_k_equal_noises() -> None:
    # E[max of 2 standard normals] = 1/sqrt(pi); of 4: 1.0294 (tables of normal order statistics)
    assert expected_optimism([1.0, 1.0]) == pytest.approx(1 / math.sqrt(math.pi), abs=0.02)
    assert expected_optimism([10.0] * 4) == pytest.approx(10.294, abs=0.2)
    assert expected_optimism([10.0]) == 0.0  # one variant: nothing was picked
    assert expected_optimism([10.0, 0.0]) == pytest.approx(10 / math.sqrt(2 * math.pi), abs=0.2)  # E[max(X, 0)]


def test_a_note_per_family_with_two_ranked_rows() -> None:
    table = pd.DataFrame(
        {
            "model": ["v2", "v3", "v1", "other", "v4"],
            "rating": [1050.0, 1040.0, 1000.0, 990.0, 900.0],
            "lower": [1030.4, 1020.4, 980.4, 970.0, -math.inf],
            "upper": [1069.6, 1059.6, 1019.6, 1010.0, 950.0],
            "preliminary": [False, False, False, False, True],
        }
    )
    (note,) = family_notes(table, family_prefixes("v, nothing-, "))
    assert note.members == ("v2", "v3", "v1")  # best first; the preliminary v4 is not ranked
    assert note.optimism == pytest.approx(10 * 0.846, abs=0.3)  # sigma 10 each, best of three
    assert note.text().startswith("v2 leads the v family as the best of 3 variants")
    assert "runner-up (v3)" in note.text()
    resolved = table.assign(lower=[1060.4, 1020.4, 980.4, 970.0, -math.inf], rating=[1080.0, 1040, 1000, 990, 900])
    assert family_notes(resolved, ("v",)) == [], "a lead the intervals resolve is no luck: no warning"
    touching = resolved.assign(lower=[1059.0, 1020.4, 980.4, 970.0, -math.inf])
    assert [n.members[0] for n in family_notes(touching, ("v",))] == ["v2"]


def test_the_command_line_warns_for_a_declared_family(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    recorder = JsonlRecorder(tmp_path, IdentityPolicy("none"))
    for i in range(30):
        for a, b in (("mine-v1", "other"), ("mine-v2", "other"), ("mine-v1", "mine-v2")):
            recorder.vote(vote("leftvote" if i % 3 else "rightvote", battle(a, b, prompt=f"q{i}")))
    recorder.close()
    assert main([str(tmp_path), "--rounds", "50", "--min-battles", "5", "--families", "mine-"]) == 0
    assert "leads the mine- family as the best of 2 variants" in capsys.readouterr().out
    assert main([str(tmp_path), "--rounds", "50", "--min-battles", "5"]) == 0
    assert "family" not in capsys.readouterr().out  # none declared, none told


def test_the_models_files_family_key_declares_a_family_the_tab_tells(tmp_path: Path) -> None:
    from webui.errors import ConfigError
    from webui.leaderboard.board.build import BoardOptions
    from webui.leaderboard.board.view import LeaderboardView
    from webui.models.specs import parse_specs

    entries = [
        {"name": n, "backend": "openai", "base_url": "http://127.0.0.1:9/v1", "remote_model": "m", "family": "mine"}
        for n in ("alpha-1", "beta-2")
    ]
    specs = parse_specs({"models": entries})
    assert [s.family for s in specs] == ["mine", "mine"]
    with pytest.raises(ConfigError, match="family"):
        parse_specs({"models": [{**entries[0], "family": ""}]})
    recorder = JsonlRecorder(tmp_path, IdentityPolicy("none"))
    for i in range(30):
        for a, b in (("alpha-1", "other"), ("beta-2", "other"), ("alpha-1", "beta-2")):
            recorder.vote(vote("leftvote" if i % 3 else "rightvote", battle(a, b, prompt=f"q{i}")))
    recorder.close()
    view = LeaderboardView(
        tmp_path, BoardOptions(rounds=30, min_battles=5), declared_families={"mine": ["alpha-1", "beta-2"]}
    )
    try:
        view.live.sync()
        summary = view.outputs()[0]
    finally:
        view.close()
    assert "leads the mine family as the best of 2 variants" in summary  # names, not prefixes: no shared start

"""A judge's agreement with people, against cases worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from webui.judge.__main__ import main as judge_main
from webui.judge.calibration import calibrate
from webui.judge.records import read_verdicts
from webui.judge.simulate import PROMPT_VERSION, simulate_verdicts
from webui.leaderboard.simulate import simulate
from webui.leaderboard.stats.agreement import Share, agreement, board_agreement, cohen_kappa
from webui.leaderboard.votes.index import VoteIndex


def table(rows: list[tuple[str, str | None, str | None]], models: tuple[str, str] = ("x", "y")) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"model_a": models[0], "model_b": models[1], "human": h, "verdict_ab": ab, "verdict_ba": ba}
            for h, ab, ba in rows
        ]
    )


def test_a_share_has_its_wilson_interval() -> None:
    # p = 0.8, n = 10, z = 1.96: centre (0.8 + z²/20) / (1 + z²/10) = 0.7167, half-width 0.2266
    share = Share.of(8, 10)
    assert (share.value, share.lower, share.upper) == pytest.approx((0.8, 0.4902, 0.9433), abs=1e-4)
    assert Share.of(0, 5).lower == 0.0 and Share.of(5, 5).upper == 1.0
    assert math.isnan(Share.of(0, 0).value) and Share.of(0, 0).text() == "n/a (none)"


def test_kappa_by_hand() -> None:
    # observed 3/4; chance: people say a half of the time each, the judge a quarter / three quarters
    # of the time: 0.5 * 0.25 + 0.5 * 0.75 = 0.5; kappa = (0.75 - 0.5) / (1 - 0.5) = 0.5
    human = np.array(["model_a", "model_a", "model_b", "model_b"], dtype=object)
    judge = np.array(["model_a", "model_b", "model_b", "model_b"], dtype=object)
    assert cohen_kappa(human, judge) == pytest.approx(0.5)
    assert cohen_kappa(human, human) == pytest.approx(1.0)
    assert math.isnan(cohen_kappa(np.array(["tie"] * 3, dtype=object), np.array(["tie"] * 3, dtype=object)))


def test_the_figures_of_a_small_table() -> None:
    figures = agreement(
        table(
            [
                ("model_a", "model_a", "model_a"),  # both orders right
                ("model_b", "model_a", "model_b"),  # the order decided: one right, inconsistent
                ("tie", "tie", "tie (bothbad)"),  # both ties: right with ties, out of "without ties"
                ("model_a", "model_b", None),  # one wrong, one unparsed
            ]
        ),
        rounds=0,
    )
    assert figures.battles == 4
    assert (figures.with_ties.k, figures.with_ties.n) == (5, 7)  # 7 parsed judgments, 5 equal to the vote
    assert (figures.without_ties.k, figures.without_ties.n) == (3, 5)  # the 2 tie judgments left out
    assert (figures.consistency.k, figures.consistency.n) == (2, 3)  # the last battle has one order only
    assert (figures.unparsed.k, figures.unparsed.n) == (1, 8)
    assert math.isnan(figures.kappa_lower)  # no rounds, no interval


def test_a_judge_that_guesses_has_a_kappa_about_zero_and_one_that_knows_about_one() -> None:
    rng = np.random.default_rng(3)
    human = rng.choice(["model_a", "model_b", "tie"], 600, p=[0.45, 0.45, 0.1])
    guess = table([(h, rng.choice(["model_a", "model_b"]), rng.choice(["model_a", "model_b"])) for h in human])
    figures = agreement(guess, rounds=100)
    assert figures.kappa_lower < 0 < figures.kappa_upper and abs(figures.kappa) < 0.1
    assert figures.consistency.lower < 0.5 < figures.consistency.upper
    knows = agreement(table([(h, h, h) for h in human]), rounds=50)
    assert knows.kappa == pytest.approx(1.0) and knows.with_ties.value == 1.0 and knows.consistency.value == 1.0


def battles_between(strength: dict[str, float], n: int, judge_flips: bool, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    names, rows = list(strength), []
    for _ in range(n):
        a, b = rng.choice(names, 2, replace=False)
        p = 1 / (1 + math.exp(strength[b] - strength[a]))
        human = "model_a" if rng.random() < p else "model_b"
        judged = "model_a" if rng.random() < (1 - p if judge_flips else p) else "model_b"
        rows.append({"model_a": a, "model_b": b, "human": human, "verdict_ab": judged, "verdict_ba": judged})
    return pd.DataFrame(rows)


def test_the_judges_board_against_the_peoples() -> None:
    strength = {"w": -1.5, "x": -0.5, "y": 0.5, "z": 1.5}
    same = board_agreement(battles_between(strength, 800, judge_flips=False), rounds=50)
    assert same.models == 4 and same.spearman == pytest.approx(1.0) and same.discordant == []
    flipped = board_agreement(battles_between(strength, 800, judge_flips=True), rounds=50)
    assert flipped.spearman == pytest.approx(-1.0)
    assert len(flipped.discordant) == 6 and ("z", "w") in flipped.discordant  # people put z above w
    two = board_agreement(battles_between({"x": 0.0, "y": 1.0}, 100, judge_flips=False), rounds=20)
    assert two.models == 2 and math.isnan(two.spearman)  # a rank correlation needs three models


def test_the_figures_find_a_simulated_judges_known_accuracy_and_bias(tmp_path: Path) -> None:
    """Issue 32's check: on about 2,000 judged battles of a simulated log, the measured agreement's
    interval holds the judge's known accuracy; a judge that guesses has a kappa about 0; one with a
    position bias shows it as inconsistency."""
    simulate(tmp_path, battles=2300, seed=5)
    index = VoteIndex(tmp_path)
    try:
        for name, accuracy, bias in (("knows", 0.7, 0.0), ("guesses", 1 / 3, 0.0), ("first", 0.9, 0.6)):
            assert simulate_verdicts(tmp_path, accuracy, bias, seed=1, name=name) > 1900
        series = {n: [r for r in read_verdicts(tmp_path) if r["judge"] == n] for n in ("knows", "guesses", "first")}
        knows = calibrate(series["knows"], index.rows(), "knows", PROMPT_VERSION, rounds=100).overall
        guesses = calibrate(series["guesses"], index.rows(), "guesses", PROMPT_VERSION, rounds=100).overall
        first = calibrate(series["first"], index.rows(), "first", PROMPT_VERSION, rounds=0).overall
    finally:
        index.close()
    assert knows.with_ties.lower <= 0.7 <= knows.with_ties.upper, knows.with_ties
    assert knows.with_ties.n > 3800 and knows.unparsed.k == 0
    assert guesses.kappa_lower <= 0 <= guesses.kappa_upper, guesses
    # unbiased, a judge answers each order on its own: consistent about p² + (1-p)²/2 of the time (0.53
    # at 0.7); marking the first reply in 60% of answers, the two orders mostly name different replies
    assert knows.consistency.lower > 0.45 and first.consistency.upper < 0.45
    # the position term: none in the people's votes or an unbiased judge's, a large one in the biased
    positions = {}
    index = VoteIndex(tmp_path)
    try:
        for name in ("knows", "first"):
            positions[name] = calibrate(series[name], index.rows(), name, PROMPT_VERSION, rounds=0)
    finally:
        index.close()
    people = positions["knows"].people_position
    assert people.lower <= 0 <= people.upper and positions["knows"].judge_position.lower <= 0
    assert positions["knows"].judge_position.upper >= 0 and positions["first"].judge_position.lower > 100


def test_the_command_line_shows_the_composite_board_of_a_simulated_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    simulate(tmp_path, battles=600, seed=2)
    assert simulate_verdicts(tmp_path, 0.8, name="sim") > 400
    command = [str(tmp_path), "--judge", "sim", "--prompt-version", PROMPT_VERSION, "--rounds", "0"]
    assert judge_main([*command, "--composite", "--judge-weight", "0.5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Composite board: a human vote weighs 1, a verdict of sim weighs 0.5\n")
    assert "granite-3-8b" in out and "provisional" not in out  # every model here has human votes
    assert judge_main([*command, "--composite", "--agreement"]) == 0  # auto: says how it chose
    out = capsys.readouterr().out
    assert "agreement with ties" in out and "auto: its scale k = " in out
    assert "the weight whose fit best predicts held-out human votes" in out
    with pytest.raises(SystemExit) as refused:  # argparse's own exit: 2, with the reason
        judge_main([*command, "--composite", "--judge-weight", "-1"])
    assert refused.value.code == 2 and "auto, or a number of 0 or more" in capsys.readouterr().err


def test_the_composite_reads_a_replays_verdicts_on_pairs_nobody_voted_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replay report by the same judge and prompt adds its parsed orders (a new model nobody voted
    on shows, provisional); another judge's report, a failed prompt, an unparsed order and a file that
    is not a report add nothing."""
    simulate(tmp_path, battles=600, seed=2)
    simulate_verdicts(tmp_path, 0.8, name="sim")
    replays = tmp_path / "replays"
    replays.mkdir()

    def report(judge: str, results: list[dict[str, object]]) -> dict[str, object]:
        return {"model": "v2", "baseline": "granite-3-8b", "judge": judge, "prompt_version": PROMPT_VERSION,
                "results": results}  # fmt: skip

    won = {"verdicts": ["model_a", "model_a"], "error": None}
    results = [won] * 20 + [{"verdicts": ["model_a", None], "error": None}, {"verdicts": [], "error": "stopped"}]
    (replays / "replay-1.json").write_text(json.dumps(report("sim", results)))
    (replays / "replay-2.json").write_text(json.dumps(report("another", [won] * 50)))
    (replays / "broken.json").write_text("{not json")
    command = [str(tmp_path), "--judge", "sim", "--prompt-version", PROMPT_VERSION, "--composite"]
    assert judge_main([*command, "--judge-weight", "1"]) == 0
    out = capsys.readouterr().out
    assert "(and 41 judgments from replay reports, pairs nobody voted on, each weighing 1)" in out
    row = next(line for line in out.splitlines() if line.split()[:1] == ["v2"])
    assert row.split()[2:] == ["0", "41", "provisional", "(judge)"]  # no human battle, 41 judgments


def test_a_simulated_judge_refuses_what_is_not_a_probability(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="probabilities"):
        simulate_verdicts(tmp_path, 1.5)

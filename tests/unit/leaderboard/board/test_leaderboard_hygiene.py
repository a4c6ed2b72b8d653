"""Vote hygiene: the anomalous-voter check and --exclude-flagged on a simulated log with one
adversarial voter, the daily caps (at vote time and on the board), the simulator and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from webui.access.ratelimit import VOTE, RateLimited, build_rate_limiter
from webui.config import Settings, settings_from_cli
from webui.leaderboard.__main__ import main
from webui.leaderboard.board.build import BoardOptions, board_from_logs
from webui.leaderboard.simulate import simulate
from webui.leaderboard.stats.voters import utc_day, voter_agreement
from webui.records.events import ClientInfo
from webui.services import Services


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("sim")
    return folder, simulate(folder, battles=3000, seed=3, days=3)


@pytest.fixture(scope="module")
def board(sim: tuple[Path, dict]):
    return board_from_logs(sim[0], BoardOptions(rounds=20))


def test_the_adversarial_voter_and_nobody_else_is_flagged(board, sim):
    truth = sim[1]
    assert board.flagged_voters() == [truth["adversary"]]
    row = board.voters.set_index("voter").loc[truth["adversary"]]
    assert row["agreed"] < row["expected"] / 2 and row["z"] < -4
    assert len(board.voters) >= 10  # many honest voters were checked too


def test_the_check_can_fail_an_honest_majority_is_not_flagged(board, sim):
    """Relabel the adversary's votes as honest ones (the winner the true ratings favour): no flag."""
    truth = sim[1]
    counted = board.counted.copy()
    mine = counted["voter"] == truth["adversary"]
    true = {**truth["ratings"], "rare-1b": 700.0}
    better_a = counted["model_a"].map(true) > counted["model_b"].map(true)
    decisive = counted["winner"].isin(["model_a", "model_b"])
    counted.loc[mine & decisive, "winner"] = better_a[mine & decisive].map({True: "model_a", False: "model_b"})
    assert not voter_agreement(counted)["flagged"].any()


def test_exclude_flagged_leaves_their_votes_out(sim, board):
    truth = sim[1]
    cleaned = board_from_logs(sim[0], BoardOptions(rounds=0, exclude_flagged=True))
    theirs = int((board.counted["voter"] == truth["adversary"]).sum())
    assert theirs > 10
    assert cleaned.dropped["flagged_voter"] == theirs
    assert len(cleaned.counted) == len(board.counted) - theirs
    assert truth["adversary"] not in set(cleaned.counted["voter"])
    assert "flagged voter" in cleaned.summary()


def test_the_board_caps_counted_votes_per_voter_and_day(sim, board):
    capped = board_from_logs(sim[0], BoardOptions(rounds=0, votes_per_day=50))
    per_day = capped.counted.groupby([capped.counted["voter"], capped.counted["tstamp"].map(utc_day)]).size()
    assert per_day.max() == 50
    before = board.counted.groupby([board.counted["voter"], board.counted["tstamp"].map(utc_day)]).size()
    assert capped.dropped["over_daily_cap"] == int((before - 50).clip(lower=0).sum()) > 0
    heavy = sim[1]["heavy_voter"]
    assert before[heavy].max() > 300 and per_day[heavy].max() == 50
    kept = capped.counted[capped.counted["voter"] == heavy]
    first = board.counted[board.counted["voter"] == heavy].sort_values("tstamp").head(50)
    assert list(kept["tstamp"].sort_values()) == list(first["tstamp"])  # the first 50 of the day count


def test_simulated_log_shows_every_effect(board, sim):
    truth = sim[1]
    table = board.table.set_index("model")
    assert bool(table.loc[truth["rare"], "preliminary"]) and pd.isna(table.loc[truth["rare"], "rank"])
    assert table.loc[truth["verbose"], "rating"] - table.loc["ember-7b", "rating"] > 40
    assert abs(table.loc[truth["verbose"], "style_rating"] - table.loc["ember-7b", "style_rating"]) < 40
    assert board.dropped["identity"] > 0 and board.dropped["named (not anonymous)"] > 0
    assert board.dropped.get("invalid", 0) == 0  # the older "Model A" lines count
    assert board.battles["language"].nunique() >= 6
    first_late = board.history[board.history["model"] == truth["late"]]["battles"].min()
    assert first_late > board.history["battles"].min()

    def says(conversation: list[dict], text: str) -> bool:
        return any(text in m["content"] for m in conversation if m["role"] == "assistant")

    remember = board.battles["conversation_a"].map(lambda c: says(c, "Remember to drink water."))
    leak = board.battles["conversation_a"].map(lambda c: says(c, "I am ")) | board.battles["conversation_b"].map(
        lambda c: says(c, "I am ")
    )
    assert (remember & ~leak).sum() > 0 and (board.battles.loc[remember & ~leak, "drop_reason"] != "identity").all()


def test_daily_vote_cap_at_vote_time():
    class Clock:
        now = 1000.0

        def __call__(self) -> float:
            return self.now

    clock = Clock()
    limiter = build_rate_limiter(0, 30, clock=clock, votes_per_day=3)
    alice, bob = ClientInfo("192.0.2.1"), ClientInfo("192.0.2.2")
    for _ in range(3):
        limiter.check(VOTE, alice)
        clock.now += 120  # well inside 30 a minute
    with pytest.raises(RateLimited) as refused:
        limiter.check(VOTE, alice)
    assert "at most 3 votes per day" in str(refused.value) and " h " in str(refused.value)
    limiter.check(VOTE, bob)  # per client
    assert limiter.remaining(VOTE, alice) == 0
    clock.now += 86_400
    limiter.check(VOTE, alice)  # a day later


def test_per_minute_limit_still_applies_beside_the_daily_cap():
    limiter = build_rate_limiter(0, 2, votes_per_day=100)
    client = ClientInfo("192.0.2.9")
    limiter.check(VOTE, client)
    limiter.check(VOTE, client)
    with pytest.raises(RateLimited, match="per minute"):
        limiter.check(VOTE, client)


def test_daily_cap_settings_reach_the_limiter():
    assert Settings().rate_votes_day == 200
    s = settings_from_cli(
        [
            "--rate-votes-day",
            "2",
            "--leaderboard-votes-per-day",
            "7",
            "--leaderboard-exclude-flagged",
            "--leaderboard-min-battles",
            "9",
        ],
        {},
    )
    assert (
        s.rate_votes_day,
        s.leaderboard_votes_per_day,
        s.leaderboard_exclude_flagged,
        s.leaderboard_min_battles,
    ) == (2, 7, True, 9)
    assert Settings.from_env({"ARENA_RATE_VOTES_DAY": "0"}).rate_votes_day == 0
    limiter = Services(s, None, None).rate_limiter  # type: ignore[arg-type]
    client = ClientInfo("192.0.2.3")
    limiter.check(VOTE, client)
    limiter.check(VOTE, client)
    with pytest.raises(RateLimited, match="per day"):
        limiter.check(VOTE, client)
    options = BoardOptions.from_settings(s)
    assert (options.votes_per_day, options.exclude_flagged, options.min_battles) == (7, True, 9)


def test_cli_prints_every_view(sim, tmp_path: Path, capsys: pytest.CaptureFixture):
    out = tmp_path / "history.csv"
    code = main(
        [
            str(sim[0]),
            "--rounds",
            "10",
            "--categories",
            "--voters",
            "--over-time",
            str(out),
            "--category",
            "coding",
            "--votes-per-day",
            "100",
            "--category-prior-sd",  # the category's own fit, which names the next comparison
            "0",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    for text in (
        "Category 'coding':",
        "Not shrunk toward the overall board",
        "Style coefficients",
        "Left out, by filter:",
        "over daily cap",
        "language: English",
        "flagged: 1",
        "style_rating",
        "preliminary",
        "p_above_next",
        "more_battles_next",
        "ttft_s",
        "tokens_per_s",
        "Most useful next comparison: ",
    ):
        assert text in printed, text
    history = pd.read_csv(out)
    assert history.columns[0] == "battles" and "late-7b" in history.columns
    assert main([str(sim[0]), "--rounds", "0", "--category", "poetry"]) == 1
    assert "unknown category" in capsys.readouterr().err


def test_the_board_finds_the_planted_speeds(board, sim):
    """Each simulated model replies at its own speed (times 0.8 to 1.2): the board's medians are
    those speeds; rare-1b's votes carry none. The weakest model is the fastest."""
    table = board.table.set_index("model")
    for model, (ttft, rate) in sim[1]["speeds"].items():
        assert (table.loc[model, "ttft_s"], table.loc[model, "tokens_per_s"]) == pytest.approx((ttft, rate)), model
    assert table.loc["rare-1b", ["ttft_s", "tokens_per_s"]].isna().all()
    ranked = table[~table["preliminary"].astype(bool)]
    assert ranked["rating"].idxmin() == ranked["tokens_per_s"].idxmax() == "SmolLM2-135M-Instruct"


def test_simulator_cli(tmp_path: Path, capsys: pytest.CaptureFixture):
    from webui.leaderboard.simulate import main as simulate_main

    assert simulate_main([str(tmp_path / "s"), "--battles", "200", "--days", "2"]) == 0
    assert "wrote 200 votes in" in capsys.readouterr().out  # as asked (202 before: rare-1b's two on top)
    files = sorted((tmp_path / "s").glob("*-conv.json"))
    assert len(files) == 2 and json.loads((tmp_path / "s" / "truth.json").read_text())["votes"] == 200
    assert simulate_main([str(tmp_path / "t"), "--battles", "0"]) == 2

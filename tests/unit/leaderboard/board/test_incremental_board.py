"""The board carried forward vote by vote (webui.leaderboard.board.tally) gives what a full build
of the same rows gives: ratings, intervals, Elo, counts, drops (the daily cap and hygiene
included); it declines what it cannot add exactly; the live board publishes through it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.records import battle, simulated_rows, vote
from webui.db.columns import FEATURES
from webui.leaderboard.board.build import Board, BoardOptions, board_from_index, board_from_rows
from webui.leaderboard.board.live import LiveBoard
from webui.leaderboard.board.tally import Tally
from webui.leaderboard.stats.ratings import TABLE_COLUMNS, ranks
from webui.leaderboard.votes.index import VoteIndex
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder

# a cap low enough to drop votes, a bootstrap small enough to be quick, rare-1b preliminary
OPTIONS = BoardOptions(rounds=20, min_battles=30, votes_per_day=8, style=False, history_points=0)


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return simulated_rows(tmp_path_factory.mktemp("simulated"), 1200, days=2)


def assert_same_board(ours: Board, full: Board) -> None:
    pd.testing.assert_frame_equal(
        ours.table[list(TABLE_COLUMNS)], full.table[list(TABLE_COLUMNS)], check_exact=False, rtol=1e-9
    )
    pd.testing.assert_frame_equal(ours.pair_counts, full.pair_counts)
    pd.testing.assert_frame_equal(ours.win_fraction, full.win_fraction)
    assert ours.dropped == full.dropped and ours.votes_read == full.votes_read
    assert ours.counted_battles == len(full.counted) and ours.summary() == full.summary()
    same = ["id", "model_a", "model_b", "winner", "tstamp"]  # what category boards and snapshots read
    pd.testing.assert_frame_equal(ours.all_counted()[same].reset_index(drop=True), full.counted[same])


def test_votes_added_one_by_one_give_the_full_build(rows: pd.DataFrame):
    start = int(len(rows) * 0.7)
    tally = Tally.of(board_from_rows(rows.iloc[:start], OPTIONS))
    done = start
    for size in (1, 1, 1, 7, 40, len(rows)):
        new = rows.iloc[done : done + size]
        ours = tally.add(new)
        done += len(new)
        assert ours is not None, f"declined rows {done - len(new)}..{done}"
        assert_same_board(ours, board_from_rows(rows.iloc[:done], OPTIONS))
    assert done == len(rows)
    assert ours.dropped["over_daily_cap"] > board_from_rows(rows.iloc[:start], OPTIONS).dropped["over_daily_cap"]
    assert {"identity", "error"} <= set(ours.recent["drop_reason"].dropna())  # hygiene drops among the added


def test_what_cannot_be_added_exactly_is_declined_and_changes_nothing(rows: pd.DataFrame):
    start = int(len(rows) * 0.7)
    tally = Tally.of(board_from_rows(rows.iloc[:start], OPTIONS))
    before = tally.board()
    older = rows.iloc[[start - 5]].assign(id=10**9)  # already counted, and older than the newest
    # a vote a full build counts (not one over its voter's daily cap, which no model would enter by)
    counted = set(board_from_rows(rows, OPTIONS).counted["id"])
    at = next(i for i in range(start, len(rows)) if rows.iloc[i]["id"] in counted)
    stranger = rows.iloc[[at]].assign(model_a="never-seen-7b", base_reason=None)
    # the same name served by other weights: a full build gives it a row of its own
    requantised = rows.iloc[[at]].assign(fingerprint_a="0123456789ab", base_reason=None)
    assert rows["fingerprint_a"].notna().any(), "the simulated log carries fingerprints"
    assert tally.add(older) is None and tally.add(stranger) is None and tally.add(requantised) is None
    assert tally.added == 0
    assert_same_board(tally.board(), before)


def test_the_live_board_adds_votes_and_builds_in_full_when_due(tmp_path: Path):
    recorder = JsonlRecorder(tmp_path / "logs", IdentityPolicy("none"))
    for i in range(12):
        recorder.vote(vote("leftvote" if i % 3 else "tievote", battle("alpha", "beta" if i % 2 else "gamma")))
    # without style: on 12 votes one more moves the style fit beyond what the tally carries (a full build)
    options = BoardOptions(rounds=10, min_battles=0, style=False)
    builds: list[int] = []

    def counting_build(rows: pd.DataFrame, opts: BoardOptions, skipped: int) -> Board:
        builds.append(len(rows))
        return board_from_rows(rows, opts, skipped)

    live = LiveBoard(
        VoteIndex(recorder.log_dir),
        options,
        poll_s=3600.0,
        build=counting_build,
        full_every_votes=5,
        full_every_s=3600.0,
    ).start()
    live.sync()
    for reply in ("fine", "I am alpha, made by you", "fine", "fine"):  # the second names a model: dropped
        recorder.vote(vote("rightvote", battle("beta", "gamma", (reply, "ok"))))
        latest = live.sync()
        assert latest is not None
        full = board_from_index(VoteIndex(recorder.log_dir), options, catch_up=False)
        assert_same_board(latest.board, full)
    assert builds == [12] and latest.board.dropped.get("identity") == 1  # every vote through the tally
    recorder.vote(vote("leftvote", battle("beta", "alpha")))  # the fifth: a full build follows
    live.sync()
    assert builds == [12, 17] and len(live.latest().board.recent) == 0
    live.close()


STYLED = dataclasses.replace(OPTIONS, style=True)
STYLE_POINTS = 0.5  # asked of the tally: its style columns within half a rating point of a full build's
# What it holds on these logs (measured: 0.01 and 0.09 points): tight enough to catch a frozen
# standardisation (ratings 0.16 points off) or an expansion to second order only (ends 0.27 off).
RATING_POINTS, ENDS_POINTS = 0.05, 0.25
P_ORDER = 0.02  # P(above next): half a point moves it by about 0.01 where the neighbours are 15 points apart
STYLE_COLUMNS_COMPARED = ["style_rating", "style_lower", "style_upper"]


@pytest.fixture(scope="module")
def more_rows(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return simulated_rows(tmp_path_factory.mktemp("simulated-more"), 8000, days=10)


def assert_style_close(ours: Board, full: Board) -> None:
    """The tally's style columns close to a full build's: ratings, interval ends, ranks (where the
    tolerance cannot change them), rank confidences and coefficients."""
    mine, theirs = ours.table.set_index("model"), full.table.set_index("model").loc[ours.table["model"]]
    ranked = theirs["style_lower"].notna()
    lower, upper = theirs.loc[ranked, "style_lower"], theirs.loc[ranked, "style_upper"]
    # a rank is the count of intervals wholly above: where two ends are nearer than the tolerance, either is right
    settled = ranks(lower - ENDS_POINTS, upper + ENDS_POINTS) == ranks(lower + ENDS_POINTS, upper - ENDS_POINTS)
    assert settled.mean() > 0.5
    pd.testing.assert_series_equal(
        mine.loc[settled[settled].index, "style_rank"], theirs.loc[settled[settled].index, "style_rank"]
    )
    pd.testing.assert_series_equal(
        mine["style_p_above_next"], theirs["style_p_above_next"], check_exact=False, atol=P_ORDER
    )
    assert (np.sign(ours.rated.style_coefficients) == np.sign(full.rated.style_coefficients)).all()
    pd.testing.assert_series_equal(
        ours.rated.style_coefficients, full.rated.style_coefficients, check_exact=False, atol=0.01
    )
    rating = (mine["style_rating"] - theirs["style_rating"]).abs().max()
    ends = (mine[["style_lower", "style_upper"]] - theirs[["style_lower", "style_upper"]]).abs().max().max()
    assert rating < RATING_POINTS and ends < ENDS_POINTS <= STYLE_POINTS, (rating, ends)


def max_difference(board: Board, other: Board) -> float:
    """The largest difference between two boards' style ratings and interval ends (points)."""
    mine, theirs = board.table.set_index("model"), other.table.set_index("model").loc[board.table["model"]]
    return float((mine[STYLE_COLUMNS_COMPARED] - theirs[STYLE_COLUMNS_COMPARED]).abs().max().max())


def test_style_columns_follow_votes_added_one_by_one_and_in_blocks(more_rows: pd.DataFrame):
    start = int(len(more_rows) * 0.6)  # every model has its votes by then (late-7b joins halfway)
    base = board_from_rows(more_rows.iloc[:start], STYLED)
    tally = Tally.of(base)
    done, moved = start, 0.0
    for size in (1, 1, 5, 200, 600):
        ours = tally.add(more_rows.iloc[done : done + size])
        done += size
        assert ours is not None, f"declined rows {done - size}..{done}"
        full = board_from_rows(more_rows.iloc[:done], STYLED)
        assert_style_close(ours, full)
        assert_same_board(ours, full)  # the raw columns still exact
        moved = max_difference(full, base)
    assert moved > 10 * STYLE_POINTS, "the added votes move the style columns: a stale tally would differ"


def test_style_columns_follow_the_styles_of_the_new_votes(more_rows: pd.DataFrame):
    """The same outcomes with each new battle's replies' styles swapped between the sides (the
    longer, markdown-heavier reply now loses where it won): only the style fit can tell."""
    start, size = int(len(more_rows) * 0.6), 100
    base = board_from_rows(more_rows.iloc[:start], STYLED)
    block = more_rows.iloc[start : start + size]
    swapped = block.rename(columns={f"{f}_{s}": f"{f}_{'b' if s == 'a' else 'a'}" for f in FEATURES for s in "ab"})
    boards = {}
    for name, new in (("as logged", block), ("swapped", swapped)):
        ours = Tally.of(base).add(new)
        assert ours is not None
        full = board_from_rows(pd.concat([more_rows.iloc[:start], new], ignore_index=True), STYLED)
        assert_style_close(ours, full)
        boards[name] = full
    raw = boards["as logged"].table["rating"] - boards["swapped"].table["rating"]
    styled = boards["as logged"].table["style_rating"] - boards["swapped"].table["style_rating"]
    assert raw.abs().max() < 1e-9 and styled.abs().max() > 10 * STYLE_POINTS


def test_a_block_beyond_the_expansions_reach_is_declined(more_rows: pd.DataFrame):
    """Votes that move the style fit too far from the last full build's for its expansion to
    hold the columns within half a point: a full build instead, the tally unchanged."""
    start = int(len(more_rows) * 0.6)
    tally = Tally.of(board_from_rows(more_rows.iloc[:start], STYLED))
    before = tally.board()
    assert tally.add(more_rows.iloc[start:]) is None and tally.added == 0
    assert_same_board(tally.board(), before)
    assert max_difference(tally.board(), before) == 0.0
    assert tally.add(more_rows.iloc[start : start + 200]) is not None  # a nearer block still goes in

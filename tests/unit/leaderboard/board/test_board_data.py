"""The shared board's data format (webui.leaderboard.board.codec): a real board, carried forward by
the tally and split by fingerprint, comes back equal in every table, column type and value; damaged
bytes, or a pickle, are refused with a clear error rather than run."""

from __future__ import annotations

import dataclasses
import pickle
import zlib

import pandas as pd
import pytest

from tests.records import simulated_rows
from webui.leaderboard.board import codec
from webui.leaderboard.board.build import Board, BoardOptions, board_from_rows
from webui.leaderboard.board.tally import Tally

OPTIONS = BoardOptions(rounds=10, min_battles=30, votes_per_day=20, history_points=4)


@pytest.fixture(scope="module")
def boards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Board, Board]:
    """A full build of most of a simulated log (two fingerprints under one name, every view), and
    the tally's board with the rest added (`recent` rows)."""
    rows = simulated_rows(tmp_path_factory.mktemp("simulated"), 1500, days=2, voters=40, requantise_late=True)
    full = board_from_rows(rows.iloc[:1300], OPTIONS, 3)
    later = rows.iloc[1300:]
    without_late = later[
        (later["model_a"] != "late-7b") & (later["model_b"] != "late-7b")
    ]  # the tally declines a split model
    added = Tally.of(full).add(without_late.head(150))
    assert added is not None and len(added.recent) == 150
    return full, added


def assert_same(ours: Board, theirs: Board) -> None:
    for field in dataclasses.fields(Board):
        mine, other = getattr(ours, field.name), getattr(theirs, field.name)
        if isinstance(mine, pd.DataFrame):
            pd.testing.assert_frame_equal(mine, other, check_exact=True, obj=field.name)
        elif field.name == "rated":
            pd.testing.assert_frame_equal(mine.table, other.table, check_exact=True)
            pd.testing.assert_series_equal(mine.style_coefficients, other.style_coefficients, check_exact=True)
            pd.testing.assert_frame_equal(mine.win_fraction, other.win_fraction, check_exact=True)
            pd.testing.assert_frame_equal(mine.pair_counts, other.pair_counts, check_exact=True)
        else:
            assert mine == other, field.name


def round_trip(board: Board) -> Board:
    rows = codec.decode_rows(codec.encode_rows(board))
    return codec.decode(codec.encode_rest(board), rows)


def test_a_board_comes_back_equal(boards: tuple[Board, Board]):
    full, added = boards
    assert len(full.table) > len(set(full.table["model"].str.split(" @ ").str[0]))  # split by fingerprint
    assert full.categories.shape[0] > 1 and len(full.voters) and len(full.history)
    for board in (full, added):
        back = round_trip(board)
        assert_same(back, board)
        assert back.summary() == board.summary()
    assert round_trip(added).all_counted().shape == added.all_counted().shape


def test_the_rows_travel_apart_from_the_tables(boards: tuple[Board, Board]):
    full, added = boards
    rest = codec.encode_rest(added)
    rows_of_full = codec.decode_rows(codec.encode_rows(full))
    assert_same(codec.decode(rest, rows_of_full), added)  # the tally's board on the full build's rows


def test_damaged_or_foreign_bytes_are_refused(boards: tuple[Board, Board]):
    full, _ = boards
    rest = codec.encode_rest(full)
    rows = codec.decode_rows(codec.encode_rows(full))
    pickled = zlib.compress(pickle.dumps(full))
    for blob, says in (
        (pickled, "not in this arena's board format"),
        (rest[: len(rest) // 2], "damaged"),
        (codec.MAGIC + b"not zlib", "damaged"),
    ):
        with pytest.raises(codec.BoardDataError, match=says):
            codec.decode(blob, rows)
    head = codec.MAGIC + zlib.compress(b"\x02\x00\x00\x00{}")
    with pytest.raises(codec.BoardDataError, match="damaged"):
        codec.decode(head, rows)  # a header without the board's fields


def test_what_cannot_be_stored_is_refused_when_writing(boards: tuple[Board, Board]):
    full, _ = boards
    odd = dataclasses.replace(full, voters=full.voters.assign(when=pd.Timestamp("2026-01-01")))
    with pytest.raises(TypeError, match="when"):
        codec.encode_rest(odd)

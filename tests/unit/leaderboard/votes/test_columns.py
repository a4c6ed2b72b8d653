"""A table built in batches (webui.leaderboard.votes.row_cache.Builder) is the table its rows' frame
would be, once written and read back; values of another kind are refused, not guessed at."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from webui.leaderboard.votes import row_cache

KINDS = {"flag": "bool", "count": "int", "maybe": "int", "never": "int", "time": "real", "name": "text"}


def through_a_frame(rows: list[tuple], path: Path) -> pd.DataFrame:
    """What the index's first load writes: the rows' frame, flags cast, saved and read back."""
    frame = pd.DataFrame.from_records(rows, columns=list(KINDS))
    frame["flag"] = frame["flag"].astype(bool)
    row_cache.save(frame, path, {})
    return row_cache.load(path)[0]


def through_the_builder(batches: list[list[tuple]], path: Path) -> pd.DataFrame:
    builder = row_cache.Builder(KINDS)
    for batch in batches:
        builder.add(dict(zip(KINDS, zip(*batch, strict=True), strict=True)))
    values, codes = builder.arrays()
    row_cache.write(path, list(KINDS), values, codes, {"from": "builder"})
    frame, meta = row_cache.load(path)
    assert meta == {"from": "builder"}
    return frame


def test_batches_give_the_frame_of_all_their_rows(tmp_path: Path):
    first = [(True, 3, 1, None, 1.5, "a"), (0, 4, 2, None, 2, None)]
    second = [(1, 5, None, None, None, "b"), (False, 6, 7, None, 0.25, "a")]
    third = [(True, 2**40, 3, None, -1.0, "ü 中")]
    built = through_the_builder([first, second, third], tmp_path / "built.npz")
    pd.testing.assert_frame_equal(built, through_a_frame(first + second + third, tmp_path / "frame.npz"))
    assert built["count"].dtype == np.int64 and built["maybe"].dtype == np.float64  # a None among ints
    assert built["never"].isna().all() and built["flag"].dtype == bool


@pytest.mark.parametrize(
    "odd",
    [
        (None, 1, 1, None, 1.0, "a"),  # a flag that is None
        (True, 1.5, 1, None, 1.0, "a"),  # a fraction among counts
        (True, 1, 1, None, "noon", "a"),  # text for a time
        (True, 1, 1, None, 1.0, 7),  # a number for text
        (True, 2**70, 1, None, 1.0, "a"),  # too large for 64 bits
    ],
)
def test_a_value_of_another_kind_is_refused(odd: tuple):
    builder = row_cache.Builder(KINDS)
    with pytest.raises(row_cache.Unsupported):
        builder.add(dict(zip(KINDS, zip(odd, strict=True), strict=True)))
    assert builder.rows == 0

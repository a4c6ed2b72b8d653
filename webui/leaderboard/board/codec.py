"""A board as bytes and back, for the board several servers share (webui.leaderboard.board.lease).

A data format rather than pickle: a reader decodes tables of numbers and strings and builds
nothing else, so a corrupt or forged blob fails with `BoardDataError` instead of running code.

A board travels in two parts, because they change at different rates:
- its **rows** (`battles`, `counted`: every battle vote, the bulk of a board) change only with a
  full build;
- the **rest** (the rated tables, the counts of dropped votes, the votes since the last full build,
  voters, history, categories, options) changes with every vote the live board adds.
`encode_rows` and `encode_rest` write each part; `decode` puts a board together from both.

Layout of each part: MAGIC, then zlib of (header length, 4 bytes little-endian; the header, JSON;
the column buffers). A frame's column is stored by its pandas dtype: numbers and booleans as raw
little-endian arrays, nullable integers with a mask, text (str or object holding only strings and
missing values) as its distinct values in the header and an int32 code per row (-1: missing).
Column labels must be strings; a dtype outside these is refused when encoding, so a new column
kind fails the tests rather than a reader.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from typing import Any

import numpy as np
import orjson
import pandas as pd

from webui.leaderboard.board.build import Board, BoardOptions, Rated

MAGIC = b"pairwise-arena board 1\n"
_NUMERIC = {"int64": "<i8", "float64": "<f8", "bool": "|b1", "int32": "<i4"}
_TEXT = ("str", "object")
_TUPLE_OPTIONS = ("model_names", "merge_fingerprints")
_REST_FRAMES = ("voters", "history", "categories", "recent")


class BoardDataError(ValueError):
    """The bytes are not a board this arena wrote (corrupt, truncated, or another format)."""


class _Writer:
    """Collects the column buffers of one part and the header that points into them."""

    def __init__(self) -> None:
        self.buffers: list[bytes] = []
        self.size = 0

    def buffer(self, array: np.ndarray, dtype: str) -> list[int]:
        data = np.ascontiguousarray(array, dtype=dtype).tobytes()
        where = [self.size, len(data)]
        self.buffers.append(data)
        self.size += len(data)
        return where

    def column(self, values: pd.Series | pd.Index) -> dict[str, Any]:
        dtype = str(values.dtype)
        if dtype in _NUMERIC:
            return {"dtype": dtype, "data": self.buffer(values.to_numpy(), _NUMERIC[dtype])}
        if dtype == "Int64":
            missing = values.isna().to_numpy(bool)
            numbers = values.to_numpy("int64", na_value=0)
            return {"dtype": dtype, "data": self.buffer(numbers, "<i8"), "missing": self.buffer(missing, "|b1")}
        if dtype in _TEXT:
            codes, uniques = pd.factorize(values, use_na_sentinel=True)
            texts = list(uniques)
            if not all(isinstance(t, str) for t in texts):
                raise TypeError(
                    f"column {values.name!r}: only text and missing values can be stored, not {dtype} of other things"
                )
            return {"dtype": dtype, "texts": texts, "codes": self.buffer(codes, "<i4")}
        raise TypeError(f"column {values.name!r}: dtype {dtype} cannot be stored")

    def frame(self, frame: pd.DataFrame) -> dict[str, Any]:
        if not all(isinstance(c, str) for c in frame.columns):
            raise TypeError(f"column labels must be text: {list(frame.columns)[:5]}")
        index = frame.index
        is_range = isinstance(index, pd.RangeIndex)
        return {
            "rows": len(frame),
            "labels_name": frame.columns.name,
            "index": {"range": [index.start, index.stop, index.step]} if is_range else self.column(index),
            "index_name": index.name,
            "columns": [[name, self.column(frame[name])] for name in frame.columns],
        }

    def part(self, header: dict[str, Any]) -> bytes:
        head = orjson.dumps(header)
        return MAGIC + zlib.compress(struct.pack("<I", len(head)) + head + b"".join(self.buffers), 1)


def encode_rows(board: Board) -> bytes:
    """The board's battle rows (`battles`, `counted`)."""
    out = _Writer()
    return out.part({"battles": out.frame(board.battles), "counted": out.frame(board.counted)})


def encode_rest(board: Board) -> bytes:
    """Everything of the board but its battle rows."""
    out = _Writer()
    rated = board.rated
    coefficients = rated.style_coefficients
    header = {
        "options": dataclasses.asdict(board.options),
        "votes_read": board.votes_read,
        "skipped_lines": board.skipped_lines,
        "dropped": board.dropped,
        "index_state": board.index_state,
        "table": out.frame(rated.table),
        "style_coefficients": out.frame(coefficients.to_frame(name="values")),
        "style_coefficients_name": coefficients.name,
        "win_fraction": out.frame(rated.win_fraction),
        "pair_counts": out.frame(rated.pair_counts),
        **{name: out.frame(getattr(board, name)) for name in _REST_FRAMES},
    }
    return out.part(header)


class _Reader:
    def __init__(self, blob: bytes, what: str) -> None:
        self.what = what
        if not blob.startswith(MAGIC):
            raise BoardDataError(f"the stored board's {what} are not in this arena's board format")
        try:
            data = zlib.decompress(blob[len(MAGIC) :])
            (size,) = struct.unpack_from("<I", data)
            self.header = orjson.loads(data[4 : 4 + size])
        except (zlib.error, struct.error, orjson.JSONDecodeError) as exc:
            raise BoardDataError(f"the stored board's {what} are damaged: {exc}") from exc
        self.data = memoryview(data)[4 + size :]

    def buffer(self, where: list[int], dtype: str, rows: int) -> np.ndarray:
        start, size = where
        array = np.frombuffer(self.data[start : start + size], dtype=dtype)
        if len(array) != rows:
            raise BoardDataError(
                f"the stored board's {self.what} are damaged: a column has {len(array)} of {rows} rows"
            )
        return array.copy()

    def column(self, spec: dict[str, Any], rows: int) -> Any:
        dtype = spec["dtype"]
        if dtype in _NUMERIC:
            return self.buffer(spec["data"], _NUMERIC[dtype], rows)
        if dtype == "Int64":
            numbers = self.buffer(spec["data"], "<i8", rows)
            return pd.arrays.IntegerArray(numbers, self.buffer(spec["missing"], "|b1", rows))
        if dtype in _TEXT:
            codes = self.buffer(spec["codes"], "<i4", rows)
            texts = np.array([*spec["texts"], None], dtype=object)
            return texts[codes] if dtype == "object" else pd.array(texts[codes], dtype=dtype)
        raise BoardDataError(f"the stored board's {self.what} hold a column of unknown type {dtype!r}")

    def frame(self, spec: dict[str, Any]) -> pd.DataFrame:
        try:
            rows = spec["rows"]
            index_spec = spec["index"]
            if "range" in index_spec:
                index = pd.RangeIndex(*index_spec["range"], name=spec["index_name"])
            else:
                index = pd.Index(self.column(index_spec, rows), name=spec["index_name"])
            # As Series: a frame built from a bare object array would infer str from its values.
            columns = {
                name: pd.Series(
                    self.column(column, rows), index=index, dtype=object if column["dtype"] == "object" else None
                )
                for name, column in spec["columns"]
            }
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, BoardDataError):
                raise
            raise BoardDataError(f"the stored board's {self.what} are damaged: {exc!r}") from exc
        frame = pd.DataFrame(columns, index=index) if columns else pd.DataFrame(index=index)
        frame.columns.name = spec["labels_name"]
        return frame


def decode_rows(blob: bytes) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(battles, counted) of `encode_rows`."""
    part = _Reader(blob, "rows")
    return part.frame(part.header["battles"]), part.frame(part.header["counted"])


def decode(rest: bytes, rows: tuple[pd.DataFrame, pd.DataFrame]) -> Board:
    """The board of `encode_rest`'s bytes and `decode_rows`' frames."""
    part = _Reader(rest, "tables")
    head = part.header
    try:
        chosen: dict[str, Any] = {k: tuple(v) if k in _TUPLE_OPTIONS else v for k, v in head["options"].items()}
        options = BoardOptions(**chosen)
        coefficients = part.frame(head["style_coefficients"])["values"].rename(head["style_coefficients_name"])
        rated = Rated(
            part.frame(head["table"]), coefficients, part.frame(head["win_fraction"]), part.frame(head["pair_counts"])
        )
        state = head["index_state"]
        battles, counted = rows
        return Board(
            battles,
            counted,
            rated,
            options,
            votes_read=int(head["votes_read"]),
            skipped_lines=int(head["skipped_lines"]),
            dropped={str(k): int(v) for k, v in head["dropped"].items()},
            index_state=(int(state[0]), int(state[1])) if state else None,
            **{name: part.frame(head[name]) for name in _REST_FRAMES},
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, BoardDataError):
            raise
        raise BoardDataError(f"the stored board's tables are damaged: {exc!r}") from exc

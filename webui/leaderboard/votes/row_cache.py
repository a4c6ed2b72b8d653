"""A table on disk as plain numpy arrays, for loading a million vote rows in a fraction of a second.

The vote index keeps its rows in SQLite, where reading them back costs a Python object per value
(seconds per million rows). `save` writes a table column by column into one `.npz` file: numbers
and booleans as they are, text as integer codes plus the list of distinct values (so no pickle is
needed or allowed when loading); `load` reads it back. Written to a temporary name and renamed,
so a reader sees the old file or the new one, never half of one. Only the index uses it, as a
cache of its own rows (webui.leaderboard.votes.reading says when it is valid).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

_META = "__meta__"


def save(frame: pd.DataFrame, path: Path, meta: dict[str, Any]) -> None:
    """Write `frame` and a JSON-able `meta` to `path` (atomically)."""
    values: dict[str, np.ndarray] = {}
    codes: dict[str, tuple[np.ndarray, list[str]]] = {}
    for column in frame.columns:
        series = frame[column]
        if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
            values[column] = series.to_numpy()
        else:  # text (or None): codes into the distinct values, -1 for None
            found, uniques = pd.factorize(series.astype(object), use_na_sentinel=True)
            codes[column] = found.astype(np.int32), [str(u) for u in uniques]
    write(path, list(frame.columns), values, codes, meta)


def write(
    path: Path,
    names: list[str],
    values: dict[str, np.ndarray],
    codes: dict[str, tuple[np.ndarray, list[str]]],
    meta: dict[str, Any],
) -> None:
    """Write the columns `names` (each in `values`, or as int32 codes into its distinct texts in
    `codes`, -1 for None) as `save` does."""
    arrays = {f"v:{name}": array for name, array in values.items()}
    arrays.update((f"c:{name}", found) for name, (found, _) in codes.items())
    texts = {name: uniques for name, (_, uniques) in codes.items()}
    header = json.dumps({"meta": meta, "columns": names, "texts": texts})
    arrays[_META] = np.frombuffer(header.encode("utf-8"), dtype=np.uint8)
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("wb") as handle:
        np.savez(handle, allow_pickle=False, **arrays)
    os.replace(temporary, path)


def load(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The table and meta `save` wrote. Raises OSError or ValueError for a missing or bad file."""
    with np.load(path, allow_pickle=False) as data:
        header = json.loads(bytes(data[_META]).decode("utf-8"))
        columns: dict[str, Any] = {}
        for column in header["columns"]:
            if f"v:{column}" in data:
                columns[column] = data[f"v:{column}"]
            else:
                codes = data[f"c:{column}"]
                uniques = np.array([*header["texts"][column], None], dtype=object)
                columns[column] = pd.array(uniques[codes], dtype=object)  # code -1 picks the None at the end
    return pd.DataFrame(columns, copy=False), header["meta"]  # no copy into 2-D blocks: half the peak


class Unsupported(ValueError):
    """A value `Builder` does not take (the caller falls back to a frame and `save`)."""


class Builder:
    """The columns `write` takes, for a frame of rows that come in batches, built without keeping a
    Python object per value: numbers as arrays, text as codes. `kinds` gives each column's kind,
    and the arrays are those of the rows' frame (`pandas.DataFrame.from_records`, flags cast to
    bool): "bool" (True/False or 0/1), "int" (int64; float64 with NaN where some are None; all
    None: a column of None), "real" (float64, NaN for None) or "text" (str or None). Another
    value raises `Unsupported`."""

    def __init__(self, kinds: dict[str, str]) -> None:
        self.kinds = kinds
        self._parts: dict[str, list[np.ndarray]] = {name: [] for name in kinds}
        self._distinct: dict[str, dict[str, int]] = {n: {} for n, kind in kinds.items() if kind == "text"}
        self._nones: dict[str, int] = dict.fromkeys(kinds, 0)
        self.rows = 0

    def add(self, columns: dict[str, Sequence[Any]]) -> None:
        """One batch: every column of `kinds`, each a sequence of the same length."""
        converted = {name: self._array(name, kind, columns[name]) for name, kind in self.kinds.items()}
        lengths = {len(array) for array in converted.values()}
        if len(lengths) != 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        for name, array in converted.items():
            self._parts[name].append(array)
        self.rows += lengths.pop()

    def _array(self, name: str, kind: str, values: Sequence[Any]) -> np.ndarray:
        types = set(map(type, values))
        nones = values.count(None) if type(None) in types else 0
        types.discard(type(None))
        if not types <= _TYPES[kind] or (nones and kind == "bool"):
            raise Unsupported(f"the column {name} holds {sorted(t.__name__ for t in types)} and {nones} None")
        if kind == "text":  # the batch's codes (hashed in C), then its few distinct values' codes
            local, uniques = pd.factorize(np.array(values, dtype=object), use_na_sentinel=True)
            distinct = self._distinct[name]
            codes = [distinct.setdefault(value, len(distinct)) for value in uniques]
            return np.array([*codes, -1], dtype=np.int32)[local]
        self._nones[name] += nones
        dtype = bool if kind == "bool" else np.float64 if nones or kind == "real" else np.int64
        try:
            return np.array(values, dtype=dtype)  # None: NaN in a float64 array
        except OverflowError as error:
            raise Unsupported(f"the column {name}: {error}") from error

    def arrays(self) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, list[str]]]]:
        """(values, codes) for `write`: each column as one array, or as codes and distinct texts.
        Once: the batches are let go as they are joined (half the memory at the peak)."""
        values: dict[str, np.ndarray] = {}
        codes: dict[str, tuple[np.ndarray, list[str]]] = {}
        for name, kind in self.kinds.items():
            parts, self._parts[name] = self._parts[name], []
            if kind == "text":
                joined = np.concatenate(parts) if parts else np.empty(0, np.int32)
                codes[name] = joined, list(self._distinct[name])
            elif kind == "int" and self._nones[name] == self.rows:  # a frame has a column of None
                codes[name] = np.full(self.rows, -1, np.int32), []
            elif kind == "int" and self._nones[name]:
                values[name] = np.concatenate([p.astype(np.float64) for p in parts])
            else:
                values[name] = np.concatenate(parts) if parts else np.empty(0, _EMPTY[kind])
        return values, codes


_TYPES: dict[str, set[type]] = {"bool": {bool, int}, "int": {int, bool}, "real": {float, int}, "text": {str}}
_EMPTY = {"bool": bool, "int": np.int64, "real": np.float64}

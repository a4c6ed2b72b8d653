"""A table on disk as plain numpy arrays, for loading a million vote rows in a fraction of a second.

The vote index keeps its rows in SQLite, where reading them back costs a Python object per value
(seconds per million rows). `save` writes a table column by column into one `.npz` file: numbers
and booleans as they are, text as integer codes plus the list of distinct values (so no pickle is
needed or allowed when loading); `load` reads it back. Written to a temporary name and renamed,
so a reader sees the old file or the new one, never half of one. Only the index uses it, as a
cache of its own rows (webui.leaderboard.index says when it is valid).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

_META = "__meta__"


def save(frame: pd.DataFrame, path: Path, meta: dict[str, Any]) -> None:
    """Write `frame` and a JSON-able `meta` to `path` (atomically)."""
    arrays: dict[str, np.ndarray] = {}
    texts: dict[str, list[Any]] = {}
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_bool_dtype(values) or pd.api.types.is_numeric_dtype(values):
            arrays[f"v:{column}"] = values.to_numpy()
        else:  # text (or None): codes into the distinct values, -1 for None
            codes, uniques = pd.factorize(values.astype(object), use_na_sentinel=True)
            arrays[f"c:{column}"] = codes.astype(np.int32)
            texts[column] = [str(u) for u in uniques]
    header = json.dumps({"meta": meta, "columns": list(frame.columns), "texts": texts})
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

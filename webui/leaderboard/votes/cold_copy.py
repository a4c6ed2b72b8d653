"""The columnar copy (`row_cache`) that a catch-up into an empty SQLite index builds as each chunk
commits, so that the first load does not read every row back (reading.IndexReader.rows). Only
SQLite: there ids follow each other within a transaction, which is how a chunk's rows learn
theirs. It is written only where it holds exactly what the index holds, in its order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from webui.db.columns import ROW_COLUMNS
from webui.leaderboard.votes import row_cache
from webui.leaderboard.votes.reading import LOADED_COLUMNS, LOADED_KINDS
from webui.leaderboard.votes.tables import IndexTables


@dataclass
class ColdCopy:
    """The columnar copy a catch-up into an empty index builds (`start`)."""

    builder: row_cache.Builder
    identity: str  # the index's, and its generation, when the catch-up began
    generation: int
    bumps: int = 0  # generations this catch-up added
    leaks: list[tuple[int, int]] = field(default_factory=list)  # (leak, row id) a recheck changed


def start(tables: IndexTables) -> ColdCopy | None:
    """For a catch-up into an empty index (`tables` on SQLite): the copy of the rows it adds;
    None where the index holds rows already."""
    if tables.db.execute("SELECT 1 FROM votes LIMIT 1").fetchone() is not None:
        return None
    return ColdCopy(row_cache.Builder(LOADED_KINDS), tables.meta("identity") or "", tables.generation())


def bump_generation(tables: IndexTables, copy: ColdCopy | None) -> None:
    """A new generation of the index's rows, which the copy (if any) counts as its own."""
    tables.bump_generation()
    if copy is not None:
        copy.bumps += 1


def add(copy: ColdCopy, tables: IndexTables, name: str, rows: list[tuple]) -> None:
    """Inside the chunk's transaction: its rows were the last inserted, so their ids are the
    newest ones, in order. row_cache.Unsupported for an odd value."""
    last = int(tables.db.execute("SELECT max(id) FROM votes").fetchone()[0])
    by_position = list(zip(*rows, strict=True))  # offset, length, checked?, *ROW_COLUMNS
    found: dict[str, Sequence[Any]] = {"id": range(last - len(rows) + 1, last + 1), "file": (name,) * len(rows)}
    found.update(offset=by_position[0], length=by_position[1])
    found.update((c, by_position[3 + ROW_COLUMNS.index(c)]) for c in LOADED_COLUMNS[4:])
    copy.builder.add(found)


def save(copy: ColdCopy, tables: IndexTables, path: Path) -> None:
    """Write the copy's rows (rechecks applied, in the index's order) to `path` as `rows` would,
    unless the index holds other rows or changes than the copy saw (another writer came in)."""
    identity, generation = tables.meta("identity") or "", tables.generation()
    count, last = tables.db.execute("SELECT count(*), coalesce(max(id), 0) FROM votes").fetchone()
    if (identity, generation, count) != (copy.identity, copy.generation + copy.bumps, copy.builder.rows):
        return
    values, codes = copy.builder.arrays()
    ids, tstamps = values["id"], values["tstamp"]
    if len(ids) and (ids[-1] != last or np.any(np.diff(ids) <= 0) or np.isnan(tstamps).any()):
        return  # (a NaN time is NULL in SQLite, which sorts it first)
    if copy.leaks:
        changed_ids = np.fromiter((row_id for _, row_id in copy.leaks), np.int64, len(copy.leaks))
        values["leak"][np.searchsorted(ids, changed_ids)] = [bool(leak) for leak, _ in copy.leaks]
    file_codes, file_names = codes["file"]
    rank = np.empty(len(file_names), np.int64)  # each file's place in name order, by code
    rank[sorted(range(len(file_names)), key=file_names.__getitem__)] = np.arange(len(file_names))
    order = np.lexsort((values["offset"], rank[file_codes], tstamps))  # reading.ORDER
    values = {name: array[order] for name, array in values.items()}
    codes = {name: (found[order], texts) for name, (found, texts) in codes.items()}
    meta = {"identity": identity, "generation": generation}
    row_cache.write(path, list(LOADED_COLUMNS), values, codes, meta)

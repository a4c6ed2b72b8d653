"""What the board and the exports read of the vote index: the rows (through the columnar copy of the
last load, `row_cache`, where it is still valid), a session's rows, the counts, and what the rows
do not hold (read back from the votes' own lines). Reads go through the index's reading
connection (tables.IndexTables.read), so that they never wait for a catch-up.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from webui.db.columns import (
    BOOL_COLUMNS,
    FINGERPRINT_COLUMNS,
    INTEGER_COLUMNS,
    REAL_COLUMNS,
    ROW_COLUMNS,
    SPEED_COLUMNS,
)
from webui.db.schema import quoted
from webui.leaderboard.votes import row_cache
from webui.leaderboard.votes.ingest import parse
from webui.leaderboard.votes.rows import CONVERSATION_COLUMNS, conversation_columns
from webui.leaderboard.votes.tables import IndexTables

SNAPSHOT_MIN_ROWS = 20_000  # fewer rows since the columnar copy: not worth writing it again
# Loaded with every row (what the board needs); the rest only for exports (`details`) and, for a
# session's own rows, "my votes" (`session_rows`): near-unique text costs memory per row.
DETAIL_COLUMNS = ("battle_id", "question_id", "judge", "mode", "session")
LOADED_COLUMNS = ("id", "file", "offset", "length", *(c for c in ROW_COLUMNS if c not in DETAIL_COLUMNS))
# Each loaded column's kind (row_cache.Builder), as the schema stores it.
LOADED_KINDS = {
    c: "bool" if c in BOOL_COLUMNS else "real" if c in REAL_COLUMNS else "int" if c in INTEGER_COLUMNS else "text"
    for c in LOADED_COLUMNS
} | {"id": "int", "offset": "int", "length": "int"}
_TEXT = pd.StringDtype(na_value=float("nan"))  # what pandas makes of a column of text and NULLs
ORDER = 'ORDER BY tstamp, file, "offset"'  # time, then as the logs are read


class IndexReader:
    """The reading side of the index in `tables`, for the log folder `log_dir`; `snapshot_path`:
    where the columnar copy of its rows is kept."""

    def __init__(self, tables: IndexTables, log_dir: Path, snapshot_path: Path) -> None:
        self.tables = tables
        self.log_dir = log_dir
        self.snapshot_path = snapshot_path

    def rows(self, after_id: int = 0) -> pd.DataFrame:
        """The indexed battle votes (those added after row `after_id`) in time order, as the logs
        are read (ties by file and line): `LOADED_COLUMNS`. All rows come from the columnar copy
        of the last load where it is still valid (same index, same generation) plus the rows
        added since, and the copy is renewed once the rows added since are many."""
        if after_id:
            return self.fetch(after_id)
        with self.tables.read() as db:
            identity, generation = self.tables.meta("identity", db) or "", self.tables.generation(db)
        base = self._snapshot(identity, generation)
        frame = (
            append_rows(base, self.fetch(int(base["id"].max()))) if base is not None and len(base) else self.fetch(0)
        )
        fresh = len(frame) - (len(base) if base is not None else 0)
        if fresh >= max(SNAPSHOT_MIN_ROWS, len(frame) // 10):
            with contextlib.suppress(OSError):  # only slower next time
                row_cache.save(frame, self.snapshot_path, {"identity": identity, "generation": generation})
        return frame

    def fetch(self, after_id: int) -> pd.DataFrame:
        """The rows after row `after_id`, straight from the store (no columnar copy)."""
        with self.tables.read() as db:
            data = db.execute(
                f"SELECT {quoted(LOADED_COLUMNS)} FROM votes WHERE id > ? {ORDER}", (after_id,)
            ).fetchall()
        return _frame(data)

    def _snapshot(self, identity: str, generation: int) -> pd.DataFrame | None:
        try:
            frame, meta = row_cache.load(self.snapshot_path)
        except (OSError, ValueError, KeyError):
            return None
        valid = meta.get("identity") == identity and meta.get("generation") == generation
        return frame if valid and list(frame.columns) == list(LOADED_COLUMNS) else None

    def state(self) -> tuple[int, int]:
        """(generation, last row id): the generation changes whenever indexed rows change or go
        (a recheck, a file read again, a rebuild); between two equal generations rows only grow."""
        with self.tables.read() as db:
            return self.tables.generation(db), int(db.execute("SELECT coalesce(max(id), 0) FROM votes").fetchone()[0])

    def session_rows(self, session: str) -> pd.DataFrame:
        """The rows of one session's votes (`LOADED_COLUMNS`), in time order."""
        with self.tables.read() as db:
            data = db.execute(
                f"SELECT {quoted(LOADED_COLUMNS)}, session FROM votes WHERE session = ? {ORDER}", (session,)
            ).fetchall()
        return _frame(data, session=True)

    def skipped_lines(self) -> int:
        """Lines left out: not JSON objects with a type, or a torn last line."""
        with self.tables.read() as db:
            bad, torn = db.execute("SELECT coalesce(sum(bad), 0), coalesce(sum(torn), 0) FROM files").fetchone()
        return int(bad) + int(torn)

    def count(self) -> int:
        with self.tables.read() as db:
            return int(db.execute("SELECT count(*) FROM votes").fetchone()[0])

    def details(self, rows: pd.DataFrame) -> pd.DataFrame:
        """What `rows` does not load, for exports: `DETAIL_COLUMNS` from the index and the
        conversation columns (`rows.CONVERSATION_COLUMNS`) read from each vote's own line
        (empty where that line is not in this log folder)."""
        ids = [int(i) for i in rows["id"]]
        found: dict[int, tuple] = {}
        with self.tables.read() as db:
            for start in range(0, len(ids), 500):  # databases cap the parameters of one statement
                batch = ids[start : start + 500]
                query = f"SELECT id, {', '.join(DETAIL_COLUMNS)} FROM votes WHERE id IN ({', '.join('?' * len(batch))})"
                found.update((row[0], row[1:]) for row in db.execute(query, batch))
        missing = (None,) * len(DETAIL_COLUMNS)
        stored = pd.DataFrame([found.get(i, missing) for i in ids], columns=list(DETAIL_COLUMNS), index=rows.index)
        return pd.concat([stored, self._conversations(rows)], axis=1)

    def records(self, rows: pd.DataFrame) -> Iterator[tuple[int, dict[str, Any] | None]]:
        """(position in `rows`, the vote record its log line holds) for each of `rows` whose line
        this log folder has (another server's file in a shared store, or one deleted since: left
        out; a line that no longer parses: None)."""
        places = pd.DataFrame({"file": rows["file"].to_numpy(), "offset": rows["offset"].to_numpy()})
        places["length"] = rows["length"].to_numpy()
        for name, group in places.groupby("file", sort=False):
            try:
                handle = (self.log_dir / str(name)).open("rb")
            except FileNotFoundError:
                continue
            with handle:
                for position, offset, length in zip(group.index, group["offset"], group["length"], strict=True):
                    yield int(position), parse(os.pread(handle.fileno(), int(length), int(offset)))

    def _conversations(self, rows: pd.DataFrame) -> pd.DataFrame:
        found: dict[tuple[str, int], dict[str, Any]] = {}
        files, offsets = rows["file"].to_numpy(), rows["offset"].to_numpy()
        for position, record in self.records(rows):  # rows without a line here go without text
            if record is not None:
                found[(str(files[position]), int(offsets[position]))] = conversation_columns(record)
        keys = zip(rows["file"], rows["offset"], strict=True)
        return pd.DataFrame(
            [found.get((str(f), int(o)), {}) for f, o in keys], index=rows.index, columns=list(CONVERSATION_COLUMNS)
        )


def _frame(data: list[tuple], session: bool = False) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(data, columns=[*LOADED_COLUMNS, *(("session",) if session else ())])
    for column in BOOL_COLUMNS:
        frame[column] = frame[column].astype(bool)
    for column in SPEED_COLUMNS:  # NULL where not logged: NaN, also when a whole load has none
        frame[column] = frame[column].astype(float)
    for column in FINGERPRINT_COLUMNS:  # text, also when a whole load has none (older logs)
        frame[column] = frame[column].astype(_TEXT)
    return frame


def append_rows(rows: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """`rows` and `new` in the index's order (time, then file and line)."""
    if new.empty:
        return rows
    if rows.empty:
        return new
    joined = pd.concat([rows, new], ignore_index=True)
    if new["tstamp"].min() > rows["tstamp"].max():  # the usual case: new votes are the newest
        return joined
    return joined.sort_values(["tstamp", "file", "offset"], kind="stable").reset_index(drop=True)

"""Turning a piece of a log file into vote index rows: pure, so that it can run in other processes.

`derive` parses the whole lines of one chunk and builds a row per battle vote
(webui.leaderboard.battles.vote_row), checking the replies against the identity words of the
names known so far plus the chunk's own. The index (webui.leaderboard.index) decides where the
chunks come from and commits them in order; on a long catch-up it hands chunks to a process pool,
since parsing and checking text, not SQLite, is what takes the time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson  # several times faster than json on long vote lines; gradio depends on it

from webui.leaderboard.battles import ROW_COLUMNS, names_in, vote_row
from webui.records.identity import identity_words

CHUNK_BYTES = 4 << 20  # read per transaction: short write locks, bounded memory
_TEXT_COLUMNS = ("model_a", "model_b", "mode", "battle_id", "question_id", "language", "voter", "session")
_TEXT_POSITIONS = tuple(ROW_COLUMNS.index(c) for c in _TEXT_COLUMNS)


@dataclass
class Chunk:
    """The rows of the whole lines between two offsets of one file."""

    start: int  # file offset of the chunk's first byte
    end: int  # file offset just after its last whole line
    rows: list[tuple]  # (offset, length, checked?, *ROW_COLUMNS values) per battle vote
    names: set[str]  # model names the chunk's records mention
    words: tuple[str, ...]  # the identity words the checked rows were checked against
    bad: int  # lines that are not JSON objects with a type
    torn: bool  # the file ends in a line without its newline (for now)


def read_chunk(handle: BinaryIO, offset: int) -> tuple[bytes, bool]:
    """(bytes from `offset`, at the end of the file?): about CHUNK_BYTES, more when one line is
    longer than that (a line is never split)."""
    handle.seek(offset)
    data = handle.read(CHUNK_BYTES)
    at_end = len(data) < CHUNK_BYTES
    while not at_end and b"\n" not in data:
        more = handle.read(CHUNK_BYTES)
        data, at_end = data + more, len(more) < CHUNK_BYTES
    return data, at_end


def derive(data: bytes, start: int, at_end: bool, known_names: Sequence[str], model_names: Sequence[str],
           extra_words: str) -> Chunk:
    """The chunk of `data` (read from file offset `start`) up to its last newline."""
    end = data.rfind(b"\n") + 1
    records, bad = parse_lines(data[:end], start)
    names = set().union(*(names_in(r) for _, _, r in records)) if records else set()
    words = identity_words([*model_names, *sorted(set(known_names) | names)], extra_words)
    rows = []
    for offset, length, record in records:
        row = vote_row(record, words)
        if row is not None:
            checked = not row["redacted"] and row["base_reason"] is None
            rows.append((offset, length, checked, *sql_values(row)))
    return Chunk(start, start + end, rows, names, words, bad, at_end and bool(data[end:].strip()))


def parse(line: bytes) -> dict[str, Any] | None:
    """A log line's record, or None if it is not a JSON object with a "type" (as storage reads)."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:  # stricter than json (NaN, lone surrogates, huge ints): ask json too
        try:
            record = json.loads(line)
        except ValueError:
            return None
    return record if isinstance(record, dict) and isinstance(record.get("type"), str) else None


def parse_lines(data: bytes, base: int) -> tuple[list[tuple[int, int, dict[str, Any]]], int]:
    """(offset, length, record) per whole line of `data` (which starts at file offset `base`),
    and how many lines were not records."""
    records, bad, position = [], 0, 0
    for raw in data.split(b"\n")[:-1]:
        start, position = position, position + len(raw) + 1
        if not raw.strip():
            continue
        record = parse(raw)
        if record is None:
            bad += 1
        else:
            records.append((base + start, len(raw), record))
    return records, bad


def sql_values(row: dict[str, Any]) -> list[Any]:
    """Row values SQLite stores: text columns that are not text (a malformed log) as JSON."""
    out = [row[column] for column in ROW_COLUMNS]
    for position in _TEXT_POSITIONS:
        value = out[position]
        if value is not None and not isinstance(value, str):
            out[position] = json.dumps(value, default=str)
    return out

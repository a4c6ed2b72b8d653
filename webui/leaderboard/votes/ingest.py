"""Turning a piece of a log file into vote index rows: pure, so that it can run in other processes.

`derive` parses the whole lines of one chunk and builds a row per battle vote
(webui.leaderboard.votes.rows.vote_row), checking the replies against the identity words of the
names known so far plus the chunk's own: each line's row first, keeping only the replies to
check, since those words are known only once every line has been read. A vote whose record keeps
the check made when it was written with that very word list (`rows.written_check`) is not
checked again; nor are the features it keeps counted again (`features.stored_features`). The index's
catch-up (webui.leaderboard.votes.catch_up) decides where the chunks come from and commits them in order; on a long
catch-up it hands chunks to a process pool, since parsing and checking text, not SQLite, is what
takes the time, and first foresees the names to come (`logged_names`). `recheck` checks indexed
rows again against another word list, re-reading their lines, in those processes too.
"""

from __future__ import annotations

import json
import operator
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson  # several times faster than json on long vote lines; gradio depends on it

from webui.db.columns import BOOL_COLUMNS, ROW_COLUMNS, STYLE_COUNT_COLUMNS
from webui.leaderboard.votes.features import FEATURES_VERSION, has_code, is_long, text_style
from webui.leaderboard.votes.language import detect_language
from webui.leaderboard.votes.rows import (
    ANONYMOUS_NAMES,
    TEXT_ROW_COLUMNS,
    WINNERS,
    as_text,
    identity_leak,
    names_in,
    unchecked_vote_row,
    written_check,
)
from webui.records.identity import identity_words, json_first_tokens, leaked_identity, word_list_version
from webui.types import MODEL_NAME_MAX_CHARS

# A vote's values, replies to check and names in one pass (webui/leaderboard/votes/_rows.c), where the
# install built it: None for any record it leaves to the Python path (not a vote, an odd shape).
_compiled_vote_values: Callable[[dict[str, Any]], tuple[list[Any], tuple[str, ...] | None, set[str]] | None] | None
_compiled_model_names_in: Callable[[memoryview], set[bytes]] | None  # (the same module: logged_names)
try:
    from webui.leaderboard.votes import _rows
except ImportError:
    _compiled_vote_values = _compiled_model_names_in = None
else:
    _rows.configure(
        WINNERS,
        ANONYMOUS_NAMES,
        text_style,
        detect_language,
        has_code,
        is_long,
        MODEL_NAME_MAX_CHARS,
        FEATURES_VERSION,
        STYLE_COUNT_COLUMNS,
    )
    _compiled_vote_values, _compiled_model_names_in = _rows.vote_values, _rows.model_names_in

CHUNK_BYTES = 4 << 20  # read per transaction: short write locks, bounded memory
_TEXT_POSITIONS = tuple(ROW_COLUMNS.index(c) for c in TEXT_ROW_COLUMNS)
_ROW_VALUES = operator.itemgetter(*ROW_COLUMNS)
_TEXT_VALUES = operator.itemgetter(*TEXT_ROW_COLUMNS)
_TEXT_TYPES = {str, type(None)}
_LEAK_AT = ROW_COLUMNS.index("leak")


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


def derive(
    data: bytes, start: int, at_end: bool, known_names: Sequence[str], model_names: Sequence[str], extra_words: str
) -> Chunk:
    """The chunk of `data` (read from file offset `start`) up to its last newline."""
    end = data.rfind(b"\n") + 1
    names: set[str] = set()
    bad = 0
    # (offset, length, values, replies to check, the check the record keeps): no record outlives its line
    found: list[tuple[int, int, list[Any], tuple[str, ...] | None, tuple[str, bool] | None]] = []
    compiled = _compiled_vote_values
    for offset, length, record in parse_lines(data, start):  # (the lines before `end`)
        if record is None:
            bad += 1
            continue
        try:
            fast = compiled(record) if compiled is not None else None
            values, replies, record_names = fast if fast is not None else _python_vote_values(record)
        except RecursionError:  # a value nested too deep to write as text (json's depth): unreadable
            bad += 1
            continue
        names |= record_names
        if values is not None:
            found.append((offset, length, values, replies, None if replies is None else written_check(record)))
    words = identity_words([*model_names, *sorted(set(known_names) | names)], extra_words)
    version = word_list_version(words)
    rows = []
    for offset, length, values, replies, written in found:
        if replies is not None:
            # checked with these very words when written: that answer, else the check now
            leak = written[1] if written is not None and written[0] == version else leaked_identity(replies, words)
            values[_LEAK_AT] = int(leak)
        rows.append((offset, length, replies is not None, *values))
    return Chunk(start, start + end, rows, names, words, bad, at_end and bool(data[end:].strip()))


def _python_vote_values(record: dict[str, Any]) -> tuple[list[Any] | None, tuple[str, ...] | None, set[str]]:
    """What `_compiled_vote_values` gives, with None for the values of a record that is no vote."""
    names = names_in(record)
    unchecked = unchecked_vote_row(record)
    if unchecked is None:
        return None, None, names
    return list(sql_values(unchecked[0])), unchecked[1], names


def recheck(path: Path, rows: Sequence[tuple[int, int, int]], words: Sequence[str]) -> list[tuple[int, bool]]:
    """(row id, does a reply name one of `words`?) for `rows` (row id, offset, length) of the log
    file `path`, each re-read from its line; only the lines that might name one (`might_name`)
    are parsed. Nothing where the file is gone: its rows keep their last check."""
    try:
        handle = path.open("rb")
    except OSError:
        return []
    found = []
    with handle:
        for row_id, offset, length in rows:
            line = os.pread(handle.fileno(), length, offset)
            if not might_name(line, words):
                found.append((row_id, False))
                continue
            record = parse(line)
            found.append((row_id, bool(record is not None and identity_leak(record, words))))
    return found


def logged_names(path: Path, start: int, end: int) -> set[str]:
    """The names that "model_name" keys give in the lines of the log file `path` from byte `start`
    to past `end` (to the end of a line), found in the bytes, without parsing a line: a forecast
    of what `names_in` will find there, so that a long catch-up checks its first votes against
    names that appear only later (each such name would make every earlier vote be read again).
    It may find more (such a key elsewhere in a record, or in a line that is no record) or fewer
    (a name only in "models"); the index's recheck settles the difference either way."""
    raw: set[bytes] = set()
    scan = _compiled_model_names_in or _python_model_names_in
    try:
        handle = path.open("rb")
    except OSError:
        return set()
    with handle:
        offset = start
        while offset < end:
            data, at_end = read_chunk(handle, offset)
            whole = len(data) if at_end else data.rfind(b"\n") + 1
            raw |= scan(memoryview(data)[:whole])  # (no copy of the chunk)
            if at_end or not whole:
                break
            offset += whole
    names = set()
    for text in raw:
        try:
            name = json.loads(b'"' + text + b'"')
        except ValueError:
            continue
        if name not in ANONYMOUS_NAMES and len(name) <= MODEL_NAME_MAX_CHARS:  # as names_in
            names.add(name)
    return names


_MODEL_NAME = re.compile(rb'"model_name"[ \t\n\r]*:[ \t\n\r]*"((?:[^"\\]|\\.)*)"', re.DOTALL)


def _python_model_names_in(data: bytes | memoryview) -> set[bytes]:
    """What webui/leaderboard/votes/_rows.c's model_names_in finds: the raw JSON text of each string
    after a "model_name" key."""
    return set(_MODEL_NAME.findall(data))


def might_name(line: bytes, words: Sequence[str]) -> bool:
    """False only where no reply in the log line can name one of `words`: none of their first
    tokens is a token of the line (webui.records.identity.json_first_tokens). A substring test
    would not do: "late" (of late-7b) is in every "template_name"."""
    found = json_first_tokens(line, words)
    return found is None or bool(found)


def parse(line: bytes) -> dict[str, Any] | None:
    """A log line's record, or None if it is not a JSON object with a "type" (as storage reads)."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:  # stricter than json (NaN, lone surrogates, huge ints): ask json too
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # (nested deeper than json can go: unreadable, as torn)
            return None
    return record if isinstance(record, dict) and isinstance(record.get("type"), str) else None


def parse_lines(data: bytes, base: int) -> Iterator[tuple[int, int, dict[str, Any] | None]]:
    """(offset, length, record or None if it is not one) per whole line of `data` (which starts at
    file offset `base`) that is not blank: each line that a newline ends."""
    find, position = data.find, 0  # (finding a newline is a memchr; bytes.split looks at each byte)
    while (end := find(b"\n", position)) >= 0:
        raw = data[position:end]
        if raw.strip():
            yield base + position, end - position, parse(raw)
        position = end + 1


def sql_values(row: dict[str, Any]) -> tuple[Any, ...]:
    """Row values SQLite stores: flags as 0 and 1 (set so in `row`: sqlite3 binds an int at once,
    a bool only after a lookup in its adapters), text columns that are not text (a malformed
    log) as JSON."""
    for flag in BOOL_COLUMNS:
        row[flag] = int(row[flag])
    out = _ROW_VALUES(row)
    if set(map(type, _TEXT_VALUES(row))) <= _TEXT_TYPES:  # the usual case, without a loop in Python
        return out
    fixed = list(out)
    for position in _TEXT_POSITIONS:
        fixed[position] = as_text(fixed[position])
    return tuple(fixed)

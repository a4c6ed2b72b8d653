"""A judge's category labels, read back for the board: which declared category a judge put a battle
vote in, by the vote's place in its log.

The labels are written by `python -m webui.judge LOGDIR --label-categories` (webui.judge.labels) as
JSON Lines files of their own beside the vote logs, `YYYY-MM-DD-labels.json` (or
`YYYY-MM-DD-NAME-labels.json`), one line per labelled vote; the format lives here, below the judge,
because the board reads it and `votes` never imports the judge. The vote logs' readers look only at
`*-conv.json`, so no vote log reader sees a label.

Guarantees:
- **Incremental and cheap.** `LabelBook.refresh` reads only the whole lines added to each file
  since the last call (a torn last line is left for the next one); a file that shrank or changed
  its first bytes is read again from the start, the rest of the book kept.
- **One answer per vote.** Of a vote's labels (a later run with another prompt, another judge),
  the most recent parsed one stands: an unparsed answer (`mark` null) never replaces a label, and
  a parsed "none" does (the judge said the prompt is in no category).
- **Never a guess.** A label naming a category the operator no longer declares counts for nothing
  (webui.leaderboard.votes.declared.Membership checks it against the file in use).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webui.records.storage import iter_lines

LABELS_SUFFIX = "-labels.json"
RECORD_TYPE = "label"
SCHEMA = 1
NONE = "none"  # the mark of a prompt that is in no declared category
HEAD_BYTES = 256  # how much of a file's start identifies it (a file rewritten under its name is read again)

# A vote's place: (log file name, byte offset of its line, its tstamp), as the vote index's rows say it.
Place = tuple[str, int, float]


def label_files(log_dir: Path) -> list[Path]:
    folder = Path(log_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith(LABELS_SUFFIX) and p.is_file())


def read_labels(log_dir: Path) -> Iterator[dict[str, Any]]:
    """Every whole label line in the folder's label files (torn and unreadable lines skipped)."""
    for path in label_files(log_dir):
        yield from _records(path.read_bytes())


def place_of(record: dict[str, Any]) -> Place | None:
    """The vote a label line is about (None for a line without one)."""
    try:
        return str(record["file"]), int(record["offset"]), float(record["vote_tstamp"])
    except (KeyError, TypeError, ValueError):
        return None


@dataclass
class _Read:
    """How far one label file has been read."""

    head: bytes
    offset: int


@dataclass
class LabelBook:
    """The labels of one log folder, vote place -> the category a judge chose (None: "none")."""

    log_dir: Path
    _read: dict[str, _Read] = field(default_factory=dict)
    _by_file: dict[str, dict[Place, tuple[float, str | None]]] = field(default_factory=dict)

    def refresh(self) -> dict[Place, str | None]:
        """Read what was added since the last call; the label of each vote labelled so far."""
        names = set()
        for path in label_files(self.log_dir):
            names.add(path.name)
            self._catch_up(path)
        for gone in set(self._read) - names:  # a file removed: its labels go with it
            self._read.pop(gone)
            self._by_file.pop(gone, None)
        merged: dict[Place, tuple[float, str | None]] = {}
        for labels in self._by_file.values():
            for place, (tstamp, category) in labels.items():
                if place not in merged or tstamp >= merged[place][0]:
                    merged[place] = (tstamp, category)
        return {place: category for place, (_, category) in merged.items()}

    def _catch_up(self, path: Path) -> None:
        try:
            with path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                head = os.pread(handle.fileno(), HEAD_BYTES, 0)
                known = self._read.get(path.name)
                if known is None or size < known.offset or not head.startswith(known.head):
                    known = self._read[path.name] = _Read(head, 0)
                    self._by_file[path.name] = {}
                data = os.pread(handle.fileno(), size - known.offset, known.offset)
        except FileNotFoundError:  # removed while being read: the next refresh forgets it
            return
        whole = data[: data.rfind(b"\n") + 1]  # a torn last line waits for the next refresh
        labels = self._by_file[path.name]
        for record in _records(whole):
            place = place_of(record)
            if place is None or record.get("mark") is None:
                continue  # unparsed: kept on disk for the operator, never a label
            tstamp = float(record.get("tstamp") or 0.0)
            if place not in labels or tstamp >= labels[place][0]:
                labels[place] = (tstamp, record.get("category"))
        known.offset, known.head = known.offset + len(whole), head


def _records(data: bytes) -> Iterator[dict[str, Any]]:
    for status, record in iter_lines(data):
        if status == "ok" and record is not None and record.get("type") == RECORD_TYPE:
            yield record

"""Prepared battles: pairs of stored replies to one prompt that visitors judge blind, as a battle.

A replay (`python -m webui.replay ... --queue K`) writes K of its pairs here, so that people judge
the new checkpoint against its baseline on exactly the prompts and replies the judge saw; their
votes are ordinary battle votes, tagged with the pair (`PREPARED_KEY`), and so calibrate the judge
on those pairs.

Files, in the log folder's `prepared/`:
  * `<source>.jsonl`  one pair per line (`PreparedPair.as_dict`), written whole by `write_pairs`
    (a temporary file renamed), never changed after;
  * `voted.txt`       the id of each pair a vote was recorded for, one per line, appended by each
    server that records one (a line of a few dozen bytes is one `write` in append mode, so servers
    sharing the folder do not interleave). Losing its newest lines costs a pair asked again, never
    a vote: the vote itself is in the vote log.

`PreparedPairs` is what the arena reads: the pairs not voted on yet, the folder read again when it
changed (at most every `recheck_s`), so that a replay's queue reaches a running arena. Nothing here
can name a model to a visitor: that is the arena's rule, which treats the pair like a drawn one.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from webui.records.events import RecordError

log = logging.getLogger(__name__)

FOLDER = "prepared"
VOTED = "voted.txt"
PREPARED_KEY = "prepared"  # the vote record's key holding the pair's id
SOURCE_KEY = "prepared_source"  # ...and the one naming what made it (e.g. a replay's report)


@dataclass(frozen=True)
class PreparedPair:
    pair_id: str
    source: str  # what prepared it: "replay-<UTC time>"
    prompt: str
    models: tuple[str, str]  # (new, baseline) for a replay; sides are drawn when it is served
    replies: tuple[str, str]
    fingerprints: tuple[str, str] = ("", "")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PreparedPair:
        """Raises ValueError for anything but two models, two replies and text where text belongs."""
        pair = cls(
            pair_id=data["pair_id"],
            source=data["source"],
            prompt=data["prompt"],
            models=tuple(data["models"]),
            replies=tuple(data["replies"]),
            fingerprints=tuple(data.get("fingerprints") or ("", "")),
        )
        texts = (pair.pair_id, pair.source, pair.prompt, *pair.models, *pair.replies, *pair.fingerprints)
        if len(pair.models) != 2 or len(pair.replies) != 2 or len(pair.fingerprints) != 2:
            raise ValueError("a pair has two models, two replies and two fingerprints")
        if not all(isinstance(t, str) for t in texts) or not pair.pair_id or not pair.prompt:
            raise ValueError("a pair's id, prompt, models, replies and fingerprints are text")
        return pair


def folder_of(log_dir: Path) -> Path:
    return Path(log_dir) / FOLDER


def write_pairs(log_dir: Path, source: str, pairs: Sequence[PreparedPair]) -> Path:
    """`pairs` as `prepared/<source>.jsonl`, whole or not at all; refuses to replace a file."""
    folder = folder_of(log_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{source}.jsonl"
    if path.exists():
        raise RecordError(f"{path} exists already")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("w", encoding="utf-8") as handle:
            for pair in pairs:
                handle.write(json.dumps(pair.as_dict(), ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise RecordError(f"cannot write {path}: {exc}") from exc
    return path


def read_pairs(path: Path) -> list[PreparedPair]:
    """The pairs of one file; a line that is not a pair is skipped with a warning."""
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            pairs.append(PreparedPair.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            log.warning("%s, line %d: not a prepared pair (%s); skipped", path, number, exc)
    return pairs


class PreparedPairs:
    """The pairs of a log folder that no vote was recorded for yet."""

    def __init__(self, log_dir: Path, *, recheck_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.folder = folder_of(log_dir)
        self.recheck_s, self.clock = recheck_s, clock
        self._lock = threading.Lock()
        self._pairs: dict[str, PreparedPair] = {}
        self._voted: set[str] = set()
        self._seen: tuple[tuple[str, int, int], ...] | None = None
        self._checked = -float("inf")

    def pending(self) -> list[PreparedPair]:
        with self._lock:
            self._refresh()
            return [pair for pair_id, pair in self._pairs.items() if pair_id not in self._voted]

    def draw(self, rng: random.Random) -> PreparedPair | None:
        waiting = self.pending()
        return rng.choice(waiting) if waiting else None

    def voted(self, pair_id: str) -> None:
        """Note that a vote on `pair_id` was recorded (after the vote log has it)."""
        with self._lock:
            self._voted.add(pair_id)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with (self.folder / VOTED).open("a", encoding="utf-8") as handle:
                handle.write(pair_id + "\n")
        except OSError as exc:  # the vote is recorded; at worst the pair is asked again after a restart
            log.warning("cannot note the vote on prepared pair %s: %s", pair_id, exc)

    def _refresh(self) -> None:
        now = self.clock()
        if now - self._checked < self.recheck_s:
            return
        self._checked = now
        try:
            files = sorted(self.folder.glob("*.jsonl"))
            seen = tuple((p.name, *_stamp(p)) for p in [*files, self.folder / VOTED] if p.exists())
        except OSError:
            return
        if seen == self._seen:
            return
        self._seen = seen
        self._pairs = {pair.pair_id: pair for path in files for pair in _read_quietly(path)}
        self._voted |= set(_lines(self.folder / VOTED))


def _stamp(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size


def _read_quietly(path: Path) -> Iterable[PreparedPair]:
    try:
        return read_pairs(path)
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        return []


def _lines(path: Path) -> list[str]:
    try:
        return [
            line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()
        ]
    except FileNotFoundError:
        return []
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        return []

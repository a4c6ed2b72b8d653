"""Pairs the operator asked the battle pairing to favour for their next N battles: to settle "is B
better than A?" (`--compare`) or to confirm a family's best against its runner-up.

A favour is one line of `LOG_DIR/favoured-pairs.json`: the pair and the number of counted battles
between the two at which it ends (their count when it was asked, plus N). Counting on the board's
own pair counts makes a favour end by itself, on every restart alike, with no counter to keep.
While one is active, a share of battles (FAVOUR_SHARE) draws a favoured pair and the rest are
drawn as always: battles stay blind, and a voter cannot tell a favoured battle from another.
Written whole to a temporary name and renamed; a file that cannot be read favours nothing (and
says so in the log once), never stops a battle.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

FILE = "favoured-pairs.json"
FAVOUR_SHARE = 0.3  # of battles while a favour is active: enough to settle it, too few to notice

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Favour:
    a: str
    b: str
    until: int  # the pair's counted battles at which the favour ends
    asked_at: float  # UNIX time

    def pair(self) -> frozenset[str]:
        return frozenset((self.a, self.b))


def add_favour(
    log_dir: Path, a: str, b: str, battles_now: int, more: int, clock: Callable[[], float] = time.time
) -> Favour:
    """Favour a vs b for `more` battles (replacing an earlier favour of the same pair)."""
    if a == b or more < 1:
        raise ValueError("favour two different models for 1 battle or more")
    favour = Favour(a, b, int(battles_now) + int(more), round(clock(), 3))
    kept = [f for f in read_favours(log_dir) if f.pair() != favour.pair()]
    path = Path(log_dir) / FILE
    with tempfile.NamedTemporaryFile("w", dir=log_dir, prefix=".favours-", suffix=".tmp", delete=False) as out:
        json.dump([asdict(f) for f in [*kept, favour]], out, indent=1)
        out.flush()
        os.fsync(out.fileno())
    os.replace(out.name, path)
    return favour


def favour_pair(
    log_dir: Path, pair_counts: pd.DataFrame, a: str, b: str, more: int, clock: Callable[[], float] = time.time
) -> Favour:
    """`add_favour` counting from the board's `pair_counts` (the counted battles between each pair)."""
    now = int(pair_counts.loc[a, b]) if a in pair_counts.index and b in pair_counts.columns else 0
    return add_favour(log_dir, a, b, now, more, clock)


def read_favours(log_dir: Path) -> list[Favour]:
    path = Path(log_dir) / FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [Favour(str(f["a"]), str(f["b"]), int(f["until"]), float(f["asked_at"])) for f in data]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError, KeyError) as exc:
        log.warning("%s cannot be read (%s): no pair is favoured", path, exc)
        return []


class FavourFile:
    """The favours of one log folder, read again only when the file changed (a battle asks often)."""

    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / FILE
        self._seen: tuple[int, int] | None = None
        self._favours: Sequence[Favour] = ()

    def __call__(self) -> Sequence[Favour]:
        try:
            stat = self.path.stat()
            key: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            key = None
        if key != self._seen:
            self._favours = read_favours(self.path.parent) if key else ()
            self._seen = key
        return self._favours

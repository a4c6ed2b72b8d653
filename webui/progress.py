"""A progress bar for long command-line work (indexing a log folder, simulating a log, judging,
replaying): done of the total, the rate and the time left, one line on standard error redrawn in
place with a carriage return.

Guarantees:
- **Only on a terminal.** When the stream is not a TTY (piped, redirected to a file, captured by a
  test) nothing at all is written: what follows a pipe is the command's own output alone.
- **Cheap where it is quiet, and where it draws.** `add` is a counter and, on a terminal, a clock
  read; the line is redrawn at most every `every_s` (0.25 s) and once more at the end, so a loop may
  call it for every item without being slowed.
- **Any thread may count**; one lock keeps the count and the line whole.
- **Ends on its own line**: `close` (or leaving the `with` block) draws the final count and a line
  break, and only if a line was drawn, so the next message starts at the margin.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

EVERY_S = 0.25  # the longest a redraw waits: a few a second is enough for a person, nothing for a loop
WIDTH = 24  # characters of the bar itself


def count(value: float) -> str:
    return f"{value:,.0f}"


def size(value: float) -> str:
    """Bytes as a person reads them: 512 B, 3.4 MB, 1.2 GB."""
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def duration(seconds: float) -> str:
    """A time left: "?" before there is a rate."""
    if not math.isfinite(seconds):
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


class Progress:
    """One bar: `add` what was done, `note` a remark ("3 failed"), `close` at the end. `total` may
    come later (`set_total`) when the work is measured only once it starts; `unit` names what is
    counted ("battles"), or `fmt=size` counts bytes."""

    def __init__(
        self,
        label: str,
        total: float | None = None,
        *,
        unit: str = "",
        fmt: Callable[[float], str] = count,
        stream: TextIO | None = None,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.active = _is_terminal(self.stream)
        self.label, self.total, self.unit, self.fmt = label, total, unit, fmt
        self.done = 0.0
        self._every_s, self._clock = every_s, clock
        self._lock = threading.Lock()
        self._start = clock()
        self._drawn_at: float | None = None  # when the line was last drawn (None: never)
        self._note = ""

    def set_total(self, total: float) -> None:
        self.total = total

    def note(self, text: str) -> None:
        self._note = text

    def add(self, amount: float = 1) -> None:
        if not self.active or not amount:  # (nothing done draws nothing: a catch-up with nothing new)
            return
        with self._lock:
            self.done += amount
            now = self._clock()
            if self._drawn_at is None or now - self._drawn_at >= self._every_s:
                self._draw(now)

    def close(self) -> None:
        """The final count, then a line break (only where a line was drawn)."""
        if not self.active:
            return
        with self._lock:
            if self._drawn_at is not None:
                self._draw(self._clock())
                self.stream.write("\n")
                self.stream.flush()
                self._drawn_at = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def line(self, now: float) -> str:
        """What the bar says at `now`."""
        elapsed = max(now - self._start, 1e-9)
        rate = self.done / elapsed
        unit = f" {self.unit}" if self.unit else ""
        per = f"{self.fmt(rate)}/s" if rate >= 1 or self.fmt is size else f"{self.fmt(rate * 60)}/min"
        parts = [self.label]
        if self.total:
            share = min(self.done / self.total, 1.0)
            filled = round(WIDTH * share)
            left = (self.total - self.done) / rate if rate > 0 else math.inf
            parts += [
                f"[{'#' * filled}{'-' * (WIDTH - filled)}]",
                f"{self.fmt(self.done)}/{self.fmt(self.total)}{unit}",
                f"{share:.0%}",
                per,
                f"{duration(max(left, 0.0))} left",
            ]
        else:
            parts += [f"{self.fmt(self.done)}{unit}", per]
        if self._note:
            parts.append(f"({self._note})")
        return "  ".join(parts)

    def _draw(self, now: float) -> None:
        # "\x1b[K" clears what a longer earlier line left on the right
        self.stream.write("\r" + self.line(now) + "\x1b[K")
        self.stream.flush()
        self._drawn_at = now


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed stream, or an object without isatty
        return False

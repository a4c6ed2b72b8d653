"""Pure statistics helpers: no I/O, no clocks, so that they can be unit-tested in a millisecond."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's
    default), or None for no values. Written out so the bench needs no numpy at import time."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile: q must be in [0, 100], got {q}")
    ordered = sorted(v for v in values if v is not None and math.isfinite(v))
    if not ordered:
        return None
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50)


def ratio(value: float | None, reference: float | None) -> float | None:
    """value / reference, or None when either is missing or the reference is zero."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def gaps(times: Sequence[float]) -> list[float]:
    """Differences between consecutive arrival times (the gaps a reader sees between chunks)."""
    return [b - a for a, b in itertools.pairwise(times)]


def rate(count: float | None, seconds: float | None) -> float | None:
    """count per second, or None when it cannot be told."""
    if count is None or seconds is None or seconds <= 0:
        return None
    return count / seconds

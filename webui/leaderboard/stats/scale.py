"""The rating scale every fit reports on: the familiar Elo scale, where 400 points is a factor 10 in
the odds of winning and the mean model sits at 1000."""

from __future__ import annotations

SCALE = 400.0
BASE = 10.0
INIT = 1000.0

"""The leaderboard: votes in, ratings out. docs/leaderboard.md explains the method. A map:

    votes/       a vote record's index row and features (rows, features, language, ingest), the vote
                 index (index: tables, catch_up, workers, cold_copy, identity_checks, reading) and
                 the row cache
    stats/       pure statistics: the ratings table (ratings: battle_codes, bradley_terry, elo, scale),
                 style control, confidence, categories, fingerprints, voters
    board/       the board built from votes and stats, the live tally, the lease among servers, its
                 codec, the view the tab shows (view, display), plots and exports
    snapshots/   saved boards and what changed between two
    __main__.py  the command line: `python -m webui.leaderboard LOGDIR`
    simulate.py  a simulated log with known answers: `python -m webui.leaderboard.simulate OUTDIR`
    simulate_battles.py  battles tables with known ratings, no log (for the statistics' checks)

`votes` and `stats` never import each other; `board` uses both; `snapshots` reads boards. Where
the rows are stored (SQLite or PostgreSQL) is `webui.db`, below all of them.

The rating functions stay importable from here (`from webui.leaderboard import bradley_terry`),
loaded on first use: a worker process that only builds vote rows never loads the statistics.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "bootstrap_bt",
    "bradley_terry",
    "intervals",
    "leaderboard",
    "online_elo",
    "pair_counts",
    "ranks",
    "win_fraction",
]


# Where each of them lives, under webui.leaderboard.stats.
_HOMES = {
    "bootstrap_bt": "bradley_terry",
    "bradley_terry": "bradley_terry",
    "intervals": "bradley_terry",
    "leaderboard": "ratings",
    "online_elo": "elo",
    "pair_counts": "battle_codes",
    "ranks": "ratings",
    "win_fraction": "battle_codes",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"webui.leaderboard.stats.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

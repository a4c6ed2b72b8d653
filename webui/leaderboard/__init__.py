"""The leaderboard: pure statistics (`ratings`), the board the UI and CLI show (`board`), plots,
and a command line: `python -m webui.leaderboard LOGDIR`. docs/leaderboard.md explains the method."""

from webui.leaderboard.ratings import (
    bootstrap_bt,
    bradley_terry,
    intervals,
    leaderboard,
    online_elo,
    pair_counts,
    ranks,
    win_fraction,
)

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

"""The board's tables formatted for people: whole rating points, an interval as one cell, "—" for
no rank, the narrow default table and the notes under it. Pure functions of a board's tables.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from webui.leaderboard.board.build import Board, Rated
from webui.leaderboard.stats.categories import LANGUAGE_PREFIX
from webui.leaderboard.stats.shrink import SHRINK_COLUMNS

DISPLAY_COLUMNS = [
    "Rank",
    "Model",
    "Fingerprint",
    "Rating",
    "95% CI",
    "P(above next)",
    "More battles (next)",
    "Rank (style)",
    "Rating (style)",
    "95% CI (style)",
    "P(above next) (style)",
    "First token (s)",
    "Tokens/s",
    "Elo",
    "Battles",
    "Wins",
    "Ties",
    "Losses",
    "Note",
]
# The default table, narrow enough for a phone (390 px) and for a desktop to show the note: the
# rank with its range, the rating with its interval in one cell ("1083 (1034-1136)", which a narrow
# column wraps between the two), the battles and the note; the others (style control, speeds, Elo,
# wins, ties, losses) come with "more columns". Exports keep every column.
RATED = "Rating (95% CI)"
COMPACT_COLUMNS = ["Rank", "Model", RATED, "Battles", "Note"]
DASH = "\u2060–\u2060"  # word joiners hold an interval together: a narrow column wraps after the rating


def _rank_range(best: Any, worst: Any) -> str:
    """The rank, or best to worst (an en dash between) where the interval allows several; a dash
    for a preliminary model."""
    if pd.isna(best):
        return "—"
    return str(int(best)) if pd.isna(worst) or int(worst) == int(best) else f"{int(best)}–{int(worst)}"


def _interval(lower: float, upper: float) -> str:
    if pd.isna(lower) or pd.isna(upper):
        return ""
    low = "−∞" if lower == -math.inf else f"{lower:.0f}"
    high = "+∞" if upper == math.inf else f"{upper:.0f}"
    return f"{low} to {high}"


def _whole(value: Any) -> str:
    return "" if pd.isna(value) else f"{value:.0f}"


def _fixed(value: Any, digits: int) -> str:
    return "" if pd.isna(value) else f"{value:.{digits}f}"


def _battles(value: Any) -> str:
    return "" if pd.isna(value) else "∞" if value == math.inf else f"{value:,.0f}"


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """Rounded for people: whole rating points, the interval as one column, "—" for no rank."""
    if table.empty:
        return pd.DataFrame(columns=DISPLAY_COLUMNS)
    styled = "style_rating" in table
    blank = [""] * len(table)
    return pd.DataFrame(
        {
            "Rank": [
                _rank_range(r, w) for r, w in zip(table["rank"], table.get("rank_worst", table["rank"]), strict=True)
            ],
            "Model": table["model"],
            # what served the row's votes (webui.models.fingerprint); a name that changed has a row per one
            "Fingerprint": table.get("fingerprint", blank),
            "Rating": table["rating"].round().astype(int),
            "95% CI": [_interval(lo, hi) for lo, hi in zip(table["lower"], table["upper"], strict=True)],
            "Rank (style)": ["—" if pd.isna(r) else str(int(r)) for r in table["style_rank"]] if styled else blank,
            "Rating (style)": [_whole(v) for v in table["style_rating"]] if styled else blank,
            "95% CI (style)": [
                _interval(lo, hi) for lo, hi in zip(table["style_lower"], table["style_upper"], strict=True)
            ]
            if styled
            else blank,
            "P(above next) (style)": [_fixed(p, 2) for p in table["style_p_above_next"]] if styled else blank,
            "Elo": table["elo"].round().astype(int),
            "Battles": table["battles"].astype(int),
            "Wins": table["wins"].astype(int),
            "Ties": table["ties"].astype(int),
            "Losses": table["losses"].astype(int),
            "P(above next)": [_fixed(p, 2) for p in table["p_above_next"]],
            "More battles (next)": [_battles(n) for n in table["more_battles_next"]],
            "First token (s)": [_fixed(v, 2) for v in table["ttft_s"]] if "ttft_s" in table else blank,
            "Tokens/s": [_fixed(v, 1) for v in table["tokens_per_s"]] if "tokens_per_s" in table else blank,
            "Note": _notes(table),
        }
    )[DISPLAY_COLUMNS]


def _notes(table: pd.DataFrame) -> list[str]:
    """Preliminary, and on a shrunk category board the category's own rating and its weight."""
    notes = ["preliminary" if p else "" for p in table["preliminary"]]
    if SHRINK_COLUMNS[1] not in table:
        return notes
    own = [
        f"own {_whole(r)}, weight {w:.0%}"
        for r, w in zip(table[SHRINK_COLUMNS[0]], table[SHRINK_COLUMNS[1]].astype(float), strict=True)
    ]
    return [f"{n}; {o}" if n else o for n, o in zip(notes, own, strict=True)]


def compact_table(shown: pd.DataFrame) -> pd.DataFrame:
    """`display_table` narrowed to COMPACT_COLUMNS (a name served by several weights has a row per
    fingerprint, "alpha @ 1a2b3c", so the model column alone tells the rows apart)."""
    rated = [
        f"{rating} ({interval.replace(' to ', DASH)})" if interval else str(rating)
        for rating, interval in zip(shown["Rating"], shown["95% CI"], strict=True)
    ]
    return shown.assign(**{RATED: rated})[COMPACT_COLUMNS]


def style_note(rated: Rated) -> str:
    if rated.style_coefficients.empty:
        return ""
    parts = ", ".join(f"{k} {v:+.2f}" for k, v in rated.style_coefficients.items())
    return (
        "Style control: how much each style difference moves the odds of winning (log-odds per standard "
        f"deviation of the A−B difference): {parts}."
    )


def display_pairs(counts: pd.DataFrame) -> pd.DataFrame:
    if counts.empty:
        return pd.DataFrame(columns=["Model"])
    return counts.rename_axis("Model").reset_index()


def category_choices(board: Board) -> list[tuple[str, str]]:
    """(label with its battle count, category) for the dropdown: every fixed category, and the
    languages that have battles."""
    rows = board.categories
    return [
        (f"{c} ({n:,} battles)", c)
        for c, n in zip(rows["category"], rows["battles"], strict=True)
        if n or not c.startswith(LANGUAGE_PREFIX)
    ]

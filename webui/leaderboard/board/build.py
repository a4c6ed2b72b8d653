"""Everything the Leaderboard tab and the command line show, computed from a log directory.

This is the one place where reading (webui.records.storage), hygiene (webui.leaderboard.votes.rows,
voters) and the pure statistics (ratings, style, history, categories) meet. Filters, in order:
the hygiene rules of each battle, named votes (unless asked for), the daily cap per voter, and
flagged voters (only when asked for); every battle left out is counted under its reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from webui.config import Settings
from webui.db.columns import SPEED_FIELDS
from webui.leaderboard.stats import battle_codes, ratings
from webui.leaderboard.stats.categories import ALL, category_counts, category_masks
from webui.leaderboard.stats.fingerprints import fingerprints_of, split_by_fingerprint
from webui.leaderboard.stats.history import ratings_over_time
from webui.leaderboard.stats.shrink import PRIOR_SD, SHRINK_COLUMNS, shrink, shrink_line
from webui.leaderboard.stats.speed import model_speeds
from webui.leaderboard.stats.style import style_table
from webui.leaderboard.stats.voters import AGREEMENT_READS, over_daily_cap, voter_agreement
from webui.leaderboard.votes.declared import Membership
from webui.leaderboard.votes.index import VoteIndex
from webui.leaderboard.votes.rows import Hygiene, battles_frame, drop_reasons, names_in
from webui.records.identity import identity_words
from webui.records.storage import ReadReport, read_logs

NAMED = "named (not anonymous)"
DROP_MEANINGS = {
    "invalid": "malformed vote: one side anonymous and the other not, a missing name, or no user message",
    "same_model": "both sides were the same model",
    "identity": "a reply named a model or its maker",
    "error": "a reply failed",
    "stopped": "a reply was stopped before it ended",
    NAMED: "the model names were visible when the vote was cast",
    "over_daily_cap": "the voter's votes beyond the daily cap",
    "flagged_voter": "votes of a voter flagged as anomalous",
}
DROP_ORDER = tuple(DROP_MEANINGS)


@dataclass(frozen=True)
class BoardOptions:
    rounds: int = 200
    seed: int = 0
    include_named: bool = False
    drop_stopped: bool = True
    extra_identity_words: str = ""
    model_names: Sequence[str] = ()  # the registry's names; names seen in the logs are added
    min_battles: int = 50  # fewer: preliminary (no rank, likelihood-ratio interval)
    votes_per_day: int = 0  # counted votes per voter per UTC day (0: no cap)
    exclude_flagged: bool = False  # leave out the votes of voters flagged as anomalous
    style: bool = True  # compute the style-controlled ratings
    history_points: int = 20  # cut points of the ratings-over-time plot (0: none)
    merge_fingerprints: tuple[str, ...] = ()  # names rated as one row whatever served them ("*": every name)
    category_prior_sd: float = PRIOR_SD  # a category's board is shrunk toward the overall one (stats.shrink)

    @classmethod
    def from_settings(cls, settings: Settings, model_names: Iterable[str] = ()) -> BoardOptions:
        return cls(
            rounds=settings.leaderboard_rounds,
            include_named=settings.leaderboard_include_named,
            drop_stopped=settings.leaderboard_drop_stopped,
            extra_identity_words=settings.identity_words,
            model_names=tuple(model_names),
            min_battles=settings.leaderboard_min_battles,
            votes_per_day=settings.leaderboard_votes_per_day,
            exclude_flagged=settings.leaderboard_exclude_flagged,
            merge_fingerprints=merge_names(settings.leaderboard_merge_fingerprints),
            category_prior_sd=settings.category_prior_sd,
        )


def merge_names(text: str) -> tuple[str, ...]:
    """The names of a comma-separated --merge-fingerprints."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


@dataclass
class Rated:
    """The tables computed from one set of counted battles (the whole board, or one category)."""

    table: pd.DataFrame  # ratings.TABLE_COLUMNS, the style columns, the speeds (speed.SPEED_FIELDS), fingerprint
    style_coefficients: pd.Series
    win_fraction: pd.DataFrame
    pair_counts: pd.DataFrame


@dataclass
class Board:
    battles: pd.DataFrame  # every battle vote read, with drop_reason
    counted: pd.DataFrame  # the ones the ratings use
    rated: Rated
    options: BoardOptions = field(default_factory=BoardOptions)
    votes_read: int = 0
    skipped_lines: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    voters: pd.DataFrame = field(default_factory=pd.DataFrame)
    history: pd.DataFrame = field(default_factory=pd.DataFrame)
    categories: pd.DataFrame = field(default_factory=pd.DataFrame)
    index_state: tuple[int, int] | None = None  # (generation, last row id) of the vote index rows used
    # battle votes added since `battles` was built (webui.leaderboard.board.tally), drop_reason set
    recent: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def counted_battles(self) -> int:
        """How many battles the ratings use, the recent ones included (each between two models)."""
        return int(self.table["battles"].sum()) // 2 if len(self.recent) else len(self.counted)

    def all_counted(self) -> pd.DataFrame:
        """`counted` and the recent votes the ratings count (a new frame when there are any)."""
        if not len(self.recent):
            return self.counted
        recent = self.recent[self.recent["drop_reason"].isna()]
        if not self.options.include_named:
            recent = recent[recent["anony"].astype(bool)]
        return pd.concat([self.counted, recent.reindex(columns=self.counted.columns)], ignore_index=True)

    @property
    def table(self) -> pd.DataFrame:
        return self.rated.table

    @property
    def win_fraction(self) -> pd.DataFrame:
        return self.rated.win_fraction

    @property
    def pair_counts(self) -> pd.DataFrame:
        return self.rated.pair_counts

    def summary(self) -> str:
        """One paragraph saying what the table is based on and what was left out."""
        if not self.counted_battles:
            return f"No battles count yet ({self.votes_read} battle votes read)." + self._dropped_text()
        models = len(self.table)
        text = (
            f"Based on {self.counted_battles} battles between {models} models ({self.votes_read} battle votes read)."
        ) + self._dropped_text()
        return text + preliminary_text(self.table, self.options.min_battles)

    def drops_table(self) -> pd.DataFrame:
        """Every filter, how many battle votes it left out, and why."""
        rows = [
            {
                "filter": reason.replace("_", " "),
                "left out": int(self.dropped.get(reason, 0)),
                "why": DROP_MEANINGS[reason],
            }
            for reason in DROP_ORDER
        ]
        return pd.DataFrame(rows, columns=["filter", "left out", "why"])

    def flagged_voters(self) -> list[str]:
        if self.voters.empty:
            return []
        return list(self.voters.loc[self.voters["flagged"], "voter"])

    def _dropped_text(self) -> str:
        parts = [f"{n} {reason.replace('_', ' ')}" for reason, n in sorted(self.dropped.items()) if n]
        return f" Left out: {', '.join(parts)}." if parts else ""


def preliminary_text(table: pd.DataFrame, min_battles: int) -> str:
    if table.empty or "preliminary" not in table or not table["preliminary"].any():
        return ""
    n = int(table["preliminary"].sum())
    which = "1 model is" if n == 1 else f"{n} models are"
    return f" {which} preliminary (fewer than {min_battles} battles): no rank yet."


def names_seen(records: Iterable[dict[str, Any]]) -> set[str]:
    """Every model name the records mention (they become identity words)."""
    return set().union(*(names_in(r) for r in records))


def hygiene_for(names: Iterable[str], options: BoardOptions) -> Hygiene:
    """Identity words: defaults, the registry's names, every model named in the logs, extras."""
    return Hygiene(
        identity_words([*options.model_names, *sorted(names)], options.extra_identity_words),
        drop_stopped=options.drop_stopped,
    )


def rate(used: pd.DataFrame, options: BoardOptions, coded: battle_codes.Coded | None = None) -> Rated:
    """Raw and style-controlled ratings, win fractions and pair counts of the battles `used`
    (`coded`: the same, encoded)."""
    coded = coded or (battle_codes.encode(used) if not used.empty else None)
    table = ratings.leaderboard(
        used, rounds=options.rounds, seed=options.seed, min_battles=options.min_battles, coded=coded
    )
    coefficients = pd.Series(dtype=float, name="coefficient")
    if options.style and not used.empty:
        ranked = list(table.loc[~table["preliminary"].astype(bool), "model"])
        styled, coefficients = style_table(used, options.rounds, options.seed, ranked=ranked, coded=coded)
        table = table.merge(styled, on="model", how="left")
    table = (
        table.merge(model_speeds(used), on="model", how="left")
        if not table.empty
        else table.assign(**{f: pd.Series(dtype=float) for f in SPEED_FIELDS})
    )
    served = fingerprints_of(used)
    table["fingerprint"] = table["model"].map(served).fillna("") if len(served) else ""
    order = list(table["model"])
    g = coded.grouped() if coded is not None else None
    return Rated(
        table,
        coefficients,
        battle_codes.win_fraction(used, order, g) if order else pd.DataFrame(),
        battle_codes.pair_counts(used, order, g) if order else pd.DataFrame(),
    )


def build_board(records: list[dict[str, Any]], options: BoardOptions, skipped_lines: int = 0) -> Board:
    """The board of log records (every one in memory: the vote index does without)."""
    unreadable: list[dict[str, Any]] = []
    battles = battles_frame(records, hygiene_for(names_seen(records), options), unreadable)
    return board_from_battles(battles, options, skipped_lines + len(unreadable))


def board_from_battles(all_battles: pd.DataFrame, options: BoardOptions, skipped_lines: int = 0) -> Board:
    """The board of a battles table (`battles_frame`, or the vote index's rows), drop reasons set;
    a name that served several fingerprints is rated as one row per fingerprint (unless merged)."""
    merge = all_names(all_battles) if "*" in options.merge_fingerprints else options.merge_fingerprints
    # copy-on-write: only the columns changed here are copied
    all_battles = split_by_fingerprint(all_battles, merge).copy(deep=False)
    eligible = all_battles["drop_reason"].isna()
    named = eligible & ~all_battles["anony"].astype(bool)
    if not options.include_named:
        eligible &= ~named
    capped = over_daily_cap(all_battles, eligible, options.votes_per_day)
    all_battles.loc[capped, "drop_reason"] = "over_daily_cap"
    eligible &= ~capped
    voters = voter_agreement(all_battles.loc[eligible, list(AGREEMENT_READS)])  # not a copy of every column
    flagged = set(voters.loc[voters["flagged"], "voter"]) if not voters.empty else set()
    if options.exclude_flagged and flagged:
        out = eligible & all_battles["voter"].isin(flagged)
        all_battles.loc[out, "drop_reason"] = "flagged_voter"
        eligible &= ~out
    used = all_battles[eligible].reset_index(drop=True)
    dropped = {str(k): int(v) for k, v in all_battles["drop_reason"].value_counts().items()}
    if not options.include_named:
        dropped[NAMED] = int(named.sum())
    coded = battle_codes.encode(used)  # the model names, read once for every table below
    rated = rate(used, options, coded)
    return Board(
        battles=all_battles,
        counted=used,
        rated=rated,
        options=options,
        votes_read=len(all_battles),
        skipped_lines=skipped_lines,
        dropped=dropped,
        voters=voters,
        history=_history(used, rated.table, options, coded),
        categories=category_counts(used, coded),
    )


def all_names(battles: pd.DataFrame) -> set[str]:
    return set(battles["model_a"].dropna()) | set(battles["model_b"].dropna()) if len(battles) else set()


def _history(used: pd.DataFrame, table: pd.DataFrame, options: BoardOptions, coded: battle_codes.Coded) -> pd.DataFrame:
    if not options.history_points or used.empty:
        return pd.DataFrame(columns=["battles", "tstamp", "model", "rating"])
    ranked = list(table.loc[~table["preliminary"].astype(bool), "model"])
    return ratings_over_time(used, options.history_points, reference=ranked or None, coded=coded)


def category_board(board: Board, category: str) -> tuple[Rated, int]:
    """The board's tables over one category's battles, and how many battles that is. Every
    category's but "all" (built-in and declared alike) is shrunk toward the overall board
    (stats.shrink): a small built-in one (a rare language, coding on a chat arena) swings as
    wildly as a small declared one, and a large one keeps nearly its own figures anyway."""
    counted = board.all_counted()
    masks = category_masks(counted)
    if category not in masks:
        raise ValueError(f"unknown category {category!r}; known: {', '.join(masks)}")
    used = counted[masks[category]]
    rated = rate(used.reset_index(drop=True), board.options)
    if category != ALL:
        rated.table = shrink(rated.table, board.table, board.options.category_prior_sd)
    return rated, len(used)


def shrunk_text(rated: Rated, options: BoardOptions) -> str:
    """The sentence saying a category board is shrunk and by how much ("" for a board that is not)."""
    return shrink_line(rated.table, options.category_prior_sd) if SHRINK_COLUMNS[0] in rated.table else ""


def my_votes(board: Board, session_key: str) -> pd.DataFrame:
    """A personal board from the battle votes one browser session cast (every valid one, named
    or anonymous, whatever the other filters say: it is one person's own preferences)."""
    if not session_key or board.battles.empty or "session" not in board.battles:  # the index's: session_rows
        return session_board(board.battles.iloc[0:0])
    mine = board.battles[board.battles["session"] == session_key]
    if len(board.recent):
        mine = pd.concat([mine, board.recent[board.recent["session"] == session_key]], ignore_index=True)
    return session_board(mine)


def session_board(mine: pd.DataFrame) -> pd.DataFrame:
    """The personal board of one session's battle votes (drop reasons set)."""
    columns = ["model", "rating", "battles", "wins", "ties", "losses"]
    mine = mine[~mine["drop_reason"].isin(["invalid", "same_model"])] if len(mine) else mine
    if mine.empty:
        return pd.DataFrame(columns=columns)
    table = ratings.leaderboard(mine.reset_index(drop=True), rounds=0)
    return table[columns].sort_values("rating", ascending=False).reset_index(drop=True)


def board_from_logs(log_dir: Path, options: BoardOptions) -> Board:
    report: ReadReport = read_logs(Path(log_dir))
    return build_board(report.records, options, report.torn_last_lines + report.bad_lines)


def board_from_index(
    index: VoteIndex, options: BoardOptions, *, catch_up: bool = True, membership: Membership | None = None
) -> Board:
    """The board of a vote index (brought up to date with the logs first, unless told not to);
    with `membership`, its rows say which declared categories they are in."""
    if catch_up:
        index.catch_up(options.model_names, options.extra_identity_words)
    generation, rows = index.state()[0], index.rows()
    if membership is not None:
        rows = membership.columns(rows, index.records)
    board = board_from_rows(rows, options, index.skipped_lines())
    board.index_state = (generation, int(rows["id"].max()) if len(rows) else 0)
    return board


def board_from_rows(rows: pd.DataFrame, options: BoardOptions, skipped_lines: int = 0) -> Board:
    """The board of vote index rows (`VoteIndex.rows`), their drop reasons set by `options`."""
    return board_from_battles(rows.assign(drop_reason=drop_reasons(rows, options.drop_stopped)), options, skipped_lines)

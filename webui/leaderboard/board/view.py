"""The board the Leaderboard tab shows, kept current in the background (its tables are formatted
for people by webui.leaderboard.board.display). Plain Python, tested without Gradio;
webui/ui/leaderboard_tab.py only wires it.

The board is built off the request path (webui.leaderboard.board.live): a background thread catches
the index up with the logs when the recorder says a vote was written (and every few seconds, for
logs copied in), and rebuilds the board, shared by every open tab. Readers only get the last
board built, so opening the tab never waits for a build. Category boards are computed on first
request and kept for that board.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from webui.db.columns import DECLARED_PREFIX
from webui.db.store import StoreError, open_store
from webui.errors import ConfigError
from webui.leaderboard.board.build import (
    Board,
    BoardOptions,
    Rated,
    board_from_rows,
    category_board,
    session_board,
    shrunk_text,
)
from webui.leaderboard.board.display import category_choices, compact_table, display_pairs, display_table, style_note
from webui.leaderboard.board.export import preference_pairs, write_table
from webui.leaderboard.board.favours import FAVOUR_SHARE, favour_pair
from webui.leaderboard.board.lease import LEASE_S, Published, SharedBoard
from webui.leaderboard.board.live import POLL_S, LiveBoard
from webui.leaderboard.board.plots import history_figure, ratings_figure, win_fraction_figure
from webui.leaderboard.snapshots.changes import since_snapshot
from webui.leaderboard.snapshots.snapshot import FOLDER, latest_snapshot
from webui.leaderboard.stats.categories import ALL
from webui.leaderboard.stats.compare import compare
from webui.leaderboard.stats.confidence import next_comparison
from webui.leaderboard.stats.families import family_notes
from webui.leaderboard.stats.fingerprints import served_rows
from webui.leaderboard.stats.history import wide
from webui.leaderboard.stats.position import position_line, position_term
from webui.leaderboard.votes.declared import Declared, Membership
from webui.leaderboard.votes.index import INDEX_NAME, VoteIndex
from webui.leaderboard.votes.reading import LOADED_COLUMNS
from webui.leaderboard.votes.rows import drop_reasons

log = logging.getLogger(__name__)

DATABASE_AWAY = (
    "Your votes are recorded, but the leaderboard's database cannot be reached right now, so they "
    "cannot be shown. Please try again in a moment."
)
MY_VOTES_WAIT_S = 2.0  # longest "my votes" waits for another catch-up (a cold index takes minutes)
EXPORTS = {
    "battles_jsonl": ("battles.jsonl", "every battle vote with its drop reason"),
    "battles_parquet": ("battles.parquet", "every battle vote with its drop reason"),
    "pairs_jsonl": ("preference_pairs.jsonl", "prompt, chosen, rejected"),
}


@dataclass(frozen=True)
class PairingTables:
    """What smart pairing reads of one board: ratings on the Elo scale by name, and the counted
    battles of each pair (row model -> column model -> n); webui.arena.pairing.Evidence takes them."""

    version: int
    ratings: dict[str, float]
    pair_counts: dict[str, dict[str, float]]


class LeaderboardView:
    """The board of one log directory, kept current in the background by a `LiveBoard`: every
    call answers at once with the last board built."""

    def __init__(
        self,
        log_dir: Path,
        options: BoardOptions,
        *,
        index_path: Path | None = None,
        poll_s: float = POLL_S,
        database: str = "",
        server: str = "",
        lease_s: float = LEASE_S,
        families: tuple[str, ...] = (),
        declared_families: Mapping[str, Collection[str]] | None = None,
        declared: Declared | None = None,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.options = options
        # name prefixes, and families the models file declares: the best-of-many note (stats.families)
        self.families, self.declared_families = families, dict(declared_families or {})
        index = open_index(self.log_dir, index_path, database=database, server=server)
        # Several servers share the database: one builds the board, the others show it.
        shared = SharedBoard(open_store(database), server, lease_s=lease_s) if database else None
        # categories the operator declared: each full build marks which rows are in them (votes.declared)
        self.declared = declared or Declared()
        build: Callable[[pd.DataFrame, BoardOptions, int], Board] = board_from_rows
        if self.declared:
            membership = Membership.with_labels(self.declared, self.log_dir)  # and a judge's labels

            def build_marked(rows: pd.DataFrame, options: BoardOptions, skipped: int) -> Board:
                return board_from_rows(membership.columns(rows, index.records), options, skipped)

            build = build_marked
        self.live = LiveBoard(index, options, poll_s=poll_s, shared=shared, build=build).start()
        self._lock = threading.Lock()
        self._categories: dict[tuple[int, str], tuple[Rated, int]] = {}
        self._empty: Board | None = None
        self._since: tuple[tuple, str] = ((), "")  # (board version, snapshot file, its mtime): the line
        self._position: tuple[int, str] = (-1, "")  # (board version, the position line)
        self._pairing: PairingTables | None = None  # what smart pairing reads, for one board version
        # name -> the fingerprint it serves now (the registry's), for the row smart pairing reads
        self.serving: Callable[[], Mapping[str, str]] = dict

    def close(self) -> None:
        self.live.close()

    def board(self) -> tuple[Board, int]:
        """The last board built and its version (0: none yet, an empty board while the first is built)."""
        return self._board(self.live.latest())

    def _board(self, published: Published | None) -> tuple[Board, int]:
        if published is not None:
            return published.board, published.version
        if self._empty is None:
            # with the declared categories' columns: the Category menu lists them from the first page on
            empty = pd.DataFrame(columns=[*LOADED_COLUMNS, *(DECLARED_PREFIX + n for n in self.declared.names)])
            self._empty = board_from_rows(empty, self.options)
        return self._empty, 0

    def rated(self, category: str = ALL) -> tuple[Board, Rated, str, int]:
        """The board, the tables of one category, a sentence about it, and the board's version."""
        published = self.live.latest()  # once: the sentence must be about the board shown
        board, version = self._board(published)
        summary = self._status(published) + board.summary()
        since = self._since_snapshot(board, version)  # a paragraph of its own, last
        if not category or category == ALL:
            return (
                board,
                board.rated,
                _with_next(summary, board.rated, self.families, self.declared_families) + since,
                version,
            )
        with self._lock:
            key = (version, category)
            if key not in self._categories:
                self._categories = {k: v for k, v in self._categories.items() if k[0] == version}
                self._categories[key] = category_board(board, category)
            rated, n = self._categories[key]
        summary = f"Category **{category}**: {n} of the {board.counted_battles} battles. " + summary
        shrunk = shrunk_text(rated, board.options)
        summary = f"{summary}\n\n{shrunk}" if shrunk else summary
        return board, rated, _with_next(summary, rated, self.families, self.declared_families) + since, version

    def _since_snapshot(self, board: Board, version: int) -> str:
        """ "Changes since the last snapshot" (`python -m webui.leaderboard LOG_DIR --snapshot` takes
        them into LOG_DIR/snapshots); worked out once per board and snapshot."""
        path = latest_snapshot(self.log_dir / FOLDER)
        if path is None or not version:
            return ""
        with contextlib.suppress(OSError):
            key = (version, path, path.stat().st_mtime_ns)
            if self._since[0] != key:
                self._since = (key, "\n\n" + since_snapshot(board, path, dt.datetime.now(dt.timezone.utc)))
            return self._since[1]
        return ""

    def _status(self, published: Published | None) -> str:
        if published is None:
            return "The leaderboard is being built from the vote logs; it appears here when it is ready. "
        ago = max(0, round(time.time() - published.built_at))
        if self.live.rebuilding:  # (a visitor needs no SQLite error: the log has it)
            trouble = (
                " (the vote index was damaged and is being rebuilt from the vote logs, which hold every vote; "
                "until then this is the last board built, without the newest votes)"
            )
        elif self.live.away:  # (nor the database's address and error: the log has them)
            trouble = (
                " (the leaderboard's database cannot be reached right now: votes are still recorded and "
                "appear here once it is back; until then this is the last board built)"
            )
        elif self.live.error:
            trouble = f" (the latest update failed: {self.live.error}; showing the last good board)"
        else:
            trouble = ""
        by = f" by server {published.built_by}" if published.built_by else ""
        return f"Updated {ago} s ago{by}{trouble}. "

    def outputs(self, category: str = ALL, more_columns: bool = False) -> tuple:
        """Everything the tab shows: summary, table (COMPACT_COLUMNS unless `more_columns`), style
        note, three figures, the drops table, the categories table, pair counts, category choices,
        version."""
        board, rated, summary, version = self.rated(category)
        notes = "\n\n".join(n for n in (style_note(rated), self._position_note(board, version)) if n)
        shown = display_table(rated.table)
        return (
            summary,
            shown if more_columns else compact_table(shown),
            notes,
            ratings_figure(rated.table),
            win_fraction_figure(rated.win_fraction),
            history_figure(board.history),
            board.drops_table(),
            board.categories,
            display_pairs(rated.pair_counts),
            category_choices(board),
            version,
        )

    def _position_note(self, board: Board, version: int) -> str:
        """Whether the left reply wins votes for being on the left, once per board version."""
        if self._position[0] != version:
            counted = board.all_counted()
            self._position = (version, position_line(position_term(counted)) if len(counted) else "")
        return self._position[1]

    def pairing_tables(self) -> PairingTables | None:
        """The last board's ratings and pair counts as smart pairing reads them (None: no board
        yet). Worked out once per board version; the battle handler asks at every new battle."""
        published = self.live.latest()
        if published is None:
            return None
        # No lock: `_lock` can be held for a category board (seconds), which a battle must not wait
        # for; two battles converting the same board at once both get the same tables.
        cached = self._pairing
        if cached is None or cached.version != published.version:
            table = published.board.table
            # a name rated per fingerprint: the row of what it serves now stands for the name
            named = served_rows(table, self.serving()) if "fingerprint" in table and len(table) else {}
            older = set(named.values())  # a name's votes without a fingerprint give way to today's row
            kept = table[~table["model"].isin(older)] if named else table
            ratings = dict(zip(kept["model"].replace(named), kept["rating"], strict=True)) if len(kept) else {}
            pairs = published.board.pair_counts
            if named:
                pairs = pairs.drop(index=list(older), columns=list(older), errors="ignore")
                pairs = pairs.rename(index=named, columns=named)
            cached = PairingTables(published.version, ratings, pairs.to_dict(orient="index"))
            self._pairing = cached
        return cached

    def changed_since(self, shown: int | None) -> bool:
        return self.board()[1] != shown

    def my_votes(self, session_key: str, signed_in: bool = False) -> tuple[str, pd.DataFrame]:
        """A sentence and a table from the votes of one browser session, or of one signed-in person
        on every browser (`signed_in`: the key is theirs, webui.records.storage.person_key), the
        one just cast included: the index is caught up (a stat per file and the new lines; given up
        after a moment if a long catch-up holds it) and asked for the key's rows alone, without
        waiting for the board."""
        where = "signed in, on any browser" if signed_in else "in this browser session"
        if not session_key:
            return (
                "This server does not keep a session key with votes (ip_logging is none).",
                session_board(pd.DataFrame(columns=[*LOADED_COLUMNS, "drop_reason"])),
            )
        index = self.live.index
        try:
            index.catch_up(self.options.model_names, self.options.extra_identity_words, wait_s=MY_VOTES_WAIT_S)
            rows = index.session_rows(session_key)
        except StoreError as exc:  # the shared database is away: the votes are in the logs all the same
            log.warning("my votes: %s", exc)
            return (DATABASE_AWAY, session_board(pd.DataFrame(columns=[*LOADED_COLUMNS, "drop_reason"])))
        table = session_board(rows.assign(drop_reason=drop_reasons(rows, self.options.drop_stopped)))
        if table.empty:
            return f"You have not voted in a battle {where} yet.", table
        n = int(table["battles"].sum()) // 2
        shown = table.assign(rating=table["rating"].round().astype(int))
        return f"Your {n} battle vote{'s' if n != 1 else ''} {where}, and nobody else's:", shown

    def voters(self) -> pd.DataFrame:
        board, _ = self.board()
        return board.voters.round(3)

    def export(self, kind: str, board: Board | None = None, folder: Path | None = None) -> str:
        """Write one export of `board` (None: the last one built) into `folder` (None: a fresh
        temporary folder) and return its path, for download or the Hub (webui.server.hub_results)."""
        if kind not in EXPORTS:
            raise ValueError(f"unknown export {kind!r}; known: {', '.join(EXPORTS)}")
        board = board if board is not None else self.board()[0]
        name = EXPORTS[kind][0]
        path = (folder if folder is not None else Path(tempfile.mkdtemp(prefix="arena-export-"))) / name
        rows = pd.concat([board.battles, board.recent], ignore_index=True) if len(board.recent) else board.battles
        battles = pd.concat([rows, self.live.index.details(rows)], axis=1)
        if kind.startswith("pairs"):
            frame = preference_pairs(battles[battles["drop_reason"].isna()])
        else:
            frame = battles.drop(columns=["id", "file", "offset", "length"])
        return str(write_table(frame, path))

    def compare(self, a: str | None, b: str | None) -> str:
        """Is B better than A, on the last board (webui.leaderboard.stats.compare), in words."""
        board, _ = self.board()
        refused = _not_a_pair(board, a, b)
        if refused:
            return refused
        assert a is not None and b is not None  # _not_a_pair
        ratings = board.table.set_index("model")["rating"]
        result = compare(board.all_counted(), ratings, a, b, self.options.rounds, self.options.seed)
        return "\n\n".join(result.lines())

    def favour(self, a: str | None, b: str | None, battles: object) -> str:
        """Ask the pairing to favour a vs b for `battles` more counted battles (board.favours), in
        words; only rows of the board, and a whole number of 1 or more."""
        board, _ = self.board()
        refused = _not_a_pair(board, a, b)
        if refused:
            return refused
        assert a is not None and b is not None  # _not_a_pair
        if isinstance(battles, bool) or not isinstance(battles, (int, float)) or battles != int(battles) or battles < 1:
            return "Favour the pair for a whole number of battles, 1 or more."
        favour = favour_pair(self.log_dir, board.pair_counts, a, b, int(battles))
        return (
            f"Favoured {a} vs {b} for {int(battles)} more counted battles (until {favour.until} between them): "
            f"about {FAVOUR_SHARE:.0%} of battles draw the pair meanwhile, still blind."
        )

    def history_csv(self) -> str:
        board, _ = self.board()
        path = Path(tempfile.mkdtemp(prefix="arena-export-")) / "ratings_over_time.csv"
        wide(board.history).to_csv(path, index=False)
        return str(path)


def _not_a_pair(board: Board, a: str | None, b: str | None) -> str | None:
    """Why a and b are not two rows of `board`, in words; None when they are."""
    rows = set(board.table["model"]) if len(board.table) else set()
    if not a or not b or a == b:
        return "Pick two different models."
    if a not in rows or b not in rows:
        return f"{a if a not in rows else b} is not on the board now."
    return None


def _with_next(
    summary: str, rated: Rated, families: tuple[str, ...] = (), declared: Mapping[str, Collection[str]] | None = None
) -> str:
    lines = [next_comparison(rated.table), *(note.text() for note in family_notes(rated.table, families, declared))]
    # paragraphs of their own: the summary stays readable
    return "\n\n".join([summary, *(line for line in lines if line)])


def open_index(log_dir: Path, path: Path | None = None, *, database: str = "", server: str = "") -> VoteIndex:
    """The vote index beside the logs, or, where it cannot be written there (a read-only folder),
    one in a temporary folder: the board is then rebuilt from the logs at each start. With a
    `database`, the shared one there, or a ConfigError (the server does not start) if it cannot be
    reached now; once running, an outage only delays the board (the logs keep every vote)."""
    if database:
        try:
            return VoteIndex(log_dir, database=database, server=server)
        except StoreError as exc:
            raise ConfigError(f"database: {exc}") from exc
    try:
        return VoteIndex(log_dir, path)
    except (OSError, sqlite3.Error) as exc:
        fallback = Path(tempfile.mkdtemp(prefix="arena-index-")) / INDEX_NAME
        log.warning(
            "the vote index cannot be kept at %s (%s); using %s", path or Path(log_dir) / INDEX_NAME, exc, fallback
        )
        return VoteIndex(log_dir, fallback)

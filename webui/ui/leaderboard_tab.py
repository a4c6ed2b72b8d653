"""The Leaderboard tab: wiring only. `LeaderboardView` does the work (plain Python, tested without
Gradio); the numbers come from `webui.leaderboard` over the vote index kept beside the logs.

The board is built off the request path (webui.leaderboard.live): a background thread catches
the index up with the logs when the recorder says a vote was written (and every few seconds, for
logs copied in), and rebuilds the board, shared by every open tab. Handlers only read the last
board built, so opening the tab never waits for a build; a timer asks every few seconds whether a
newer one exists. Category boards are computed on first request and kept for that board.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import math
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd
from gradio.context import Context

from webui.access.operator import HOW_TO_ENABLE, OperatorRefused
from webui.access.ratelimit import RateLimited
from webui.arena.pairing import Evidence
from webui.config import Settings
from webui.errors import ConfigError
from webui.leaderboard.battles import drop_reasons
from webui.leaderboard.board import Board, BoardOptions, Rated, board_from_rows, category_board, session_board
from webui.leaderboard.categories import ALL, LANGUAGE_PREFIX
from webui.leaderboard.changes import since_snapshot
from webui.leaderboard.confidence import next_comparison
from webui.leaderboard.export import parquet_available, preference_pairs, write_table
from webui.leaderboard.fingerprints import served_rows
from webui.leaderboard.history import wide
from webui.leaderboard.index import INDEX_NAME, LOADED_COLUMNS, VoteIndex
from webui.leaderboard.live import POLL_S, LiveBoard
from webui.leaderboard.plots import history_figure, ratings_figure, win_fraction_figure
from webui.leaderboard.shared import LEASE_S, Published, SharedBoard
from webui.leaderboard.snapshot import FOLDER, latest_snapshot
from webui.leaderboard.store import StoreError, open_store
from webui.ui.common import client_of, owner_of, progress_on

if TYPE_CHECKING:
    from webui.services import Services

log = logging.getLogger(__name__)

REFRESH_EVERY_S = 5.0
DATABASE_AWAY = (
    "Your votes are recorded, but the leaderboard's database cannot be reached right now, so they "
    "cannot be shown. Please try again in a moment."
)
MY_VOTES_WAIT_S = 2.0  # longest "my votes" waits for another catch-up (a cold index takes minutes)
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
BOARD_TABLE = ["arena-board"]  # the page's stylesheet keeps these tables' headers from breaking inside words
EXPORTS = {
    "battles_jsonl": ("battles.jsonl", "every battle vote with its drop reason"),
    "battles_parquet": ("battles.parquet", "every battle vote with its drop reason"),
    "pairs_jsonl": ("preference_pairs.jsonl", "prompt, chosen, rejected"),
}
OPERATOR_VIEWS = (
    "The voter check and the downloads (every battle with both conversations, preference pairs, ratings "
    "over time) are for the operator of this server"
)
EXPLAIN = (
    "Bradley-Terry ratings (400 points = 10x the odds of winning), 95% bootstrap intervals; rank = 1 + the "
    "number of models whose interval lies entirely above. Ties count half. *P(above next)*: the probability "
    "that a model is rightly above the next ranked one; *More battles (next)*: about how many more battles "
    "between the two would separate them at 95%. *First token* and *Tokens/s*: medians over the judged "
    "replies, measured on this server's hardware. **Style control** holds reply "
    "length and markdown (headers, bold, lists) equal. Models with few battles are *preliminary*: "
    "likelihood-ratio interval, no rank. Battles where a reply named a model, failed or was stopped are "
    "left out; *What was left out* above says how many each filter left out."
)


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
    ) -> None:
        self.log_dir = Path(log_dir)
        self.options = options
        index = open_index(self.log_dir, index_path, database=database, server=server)
        # Several servers share the database: one builds the board, the others show it.
        shared = SharedBoard(open_store(database), server, lease_s=lease_s) if database else None
        self.live = LiveBoard(index, options, poll_s=poll_s, shared=shared).start()
        self._lock = threading.Lock()
        self._categories: dict[tuple[int, str], tuple[Rated, int]] = {}
        self._empty: Board | None = None
        self._since: tuple[tuple, str] = ((), "")  # (board version, snapshot file, its mtime): the line
        self._evidence: tuple[int, Evidence] | None = None  # (board version, what smart pairing reads)
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
            self._empty = board_from_rows(pd.DataFrame(columns=list(LOADED_COLUMNS)), self.options)
        return self._empty, 0

    def rated(self, category: str = ALL) -> tuple[Board, Rated, str, int]:
        """The board, the tables of one category, a sentence about it, and the board's version."""
        published = self.live.latest()  # once: the sentence must be about the board shown
        board, version = self._board(published)
        summary = self._status(published) + board.summary()
        since = self._since_snapshot(board, version)  # a paragraph of its own, last
        if not category or category == ALL:
            return board, board.rated, _with_next(summary, board.rated) + since, version
        with self._lock:
            key = (version, category)
            if key not in self._categories:
                self._categories = {k: v for k, v in self._categories.items() if k[0] == version}
                self._categories[key] = category_board(board, category)
            rated, n = self._categories[key]
        summary = f"Category **{category}**: {n} of the {board.counted_battles} battles. " + summary
        return board, rated, _with_next(summary, rated) + since, version

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
        trouble = (
            f" (the latest update failed: {self.live.error}; showing the last good board)" if self.live.error else ""
        )
        by = f" by server {published.built_by}" if published.built_by else ""
        return f"Updated {ago} s ago{by}{trouble}. "

    def outputs(self, category: str = ALL) -> tuple:
        """Everything the tab shows: summary, table, style note, three figures, the drops table,
        the categories table, pair counts, category choices, version."""
        board, rated, summary, version = self.rated(category)
        return (
            summary,
            display_table(rated.table),
            style_note(rated),
            ratings_figure(rated.table),
            win_fraction_figure(rated.win_fraction),
            history_figure(board.history),
            board.drops_table(),
            board.categories,
            display_pairs(rated.pair_counts),
            category_choices(board),
            version,
        )

    def pairing_evidence(self) -> Evidence | None:
        """The last board's ratings and pair counts, for smart pairing (None: no board yet).
        Converted once per board version; the battle handler asks for it at every new battle."""
        published = self.live.latest()
        if published is None:
            return None
        # No lock: `_lock` can be held for a category board (seconds), which a battle must not wait
        # for; two battles converting the same board at once both get the same evidence.
        cached = self._evidence
        if cached is None or cached[0] != published.version:
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
            cached = (published.version, Evidence.from_tables(ratings, pairs.to_dict(orient="index")))
            self._evidence = cached
        return cached[1]

    def changed_since(self, shown: int | None) -> bool:
        return self.board()[1] != shown

    def my_votes(self, session_key: str) -> tuple[str, pd.DataFrame]:
        """A sentence and a table from the votes of one browser session, the one just cast
        included: the index is caught up (a stat per file and the new lines; given up after a
        moment if a long catch-up holds it) and asked for the session's rows alone, without
        waiting for the board."""
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
            return "You have not voted in a battle in this browser session yet.", table
        n = int(table["battles"].sum()) // 2
        shown = table.assign(rating=table["rating"].round().astype(int))
        return f"Your {n} battle vote{'s' if n != 1 else ''} in this browser session, and nobody else's:", shown

    def voters(self) -> pd.DataFrame:
        board, _ = self.board()
        return board.voters.round(3)

    def export(self, kind: str) -> str:
        """Write one export into a fresh temporary folder and return its path for download."""
        if kind not in EXPORTS:
            raise ValueError(f"unknown export {kind!r}; known: {', '.join(EXPORTS)}")
        board, _ = self.board()
        name = EXPORTS[kind][0]
        path = Path(tempfile.mkdtemp(prefix="arena-export-")) / name
        rows = pd.concat([board.battles, board.recent], ignore_index=True) if len(board.recent) else board.battles
        battles = pd.concat([rows, self.live.index.details(rows)], axis=1)
        if kind.startswith("pairs"):
            frame = preference_pairs(battles[battles["drop_reason"].isna()])
        else:
            frame = battles.drop(columns=["id", "file", "offset", "length"])
        return str(write_table(frame, path))

    def history_csv(self) -> str:
        board, _ = self.board()
        path = Path(tempfile.mkdtemp(prefix="arena-export-")) / "ratings_over_time.csv"
        wide(board.history).to_csv(path, index=False)
        return str(path)


def _with_next(summary: str, rated: Rated) -> str:
    line = next_comparison(rated.table)
    return f"{summary}\n\n{line}" if line else summary  # a paragraph of its own: the summary stays readable


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
            "Rank": ["—" if pd.isna(r) else str(int(r)) for r in table["rank"]],
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
            "Note": ["preliminary" if p else "" for p in table["preliminary"]],
        }
    )[DISPLAY_COLUMNS]


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


def leaderboard_view(services: Services) -> LeaderboardView:
    """The server's live board, nudged by every vote the recorder writes."""
    settings = services.settings
    view = LeaderboardView(
        settings.log_dir,
        BoardOptions.from_settings(settings, services.registry.names()),
        database=settings.database,
        server=settings.server_name,
        lease_s=settings.board_lease_s,
    )
    registry = services.registry
    view.serving = lambda: {s.name: s.fingerprint for s in registry.statuses() if s.fingerprint}
    listeners = getattr(services.recorder, "vote_listeners", None)
    if listeners is not None:  # a vote reaches the board at once, not at the next poll
        listeners.append(view.live.nudge)
    return view


def build_leaderboard_tab(services: Services, view: LeaderboardView | None = None) -> None:
    """Place the leaderboard components inside the caller's `with gr.Tab(...)` block (`view`: the
    live board, when the caller shares it with smart pairing)."""
    view = view or leaderboard_view(services)
    first = view.outputs()

    summary_md = gr.Markdown(first[0])
    with gr.Row():
        category = gr.Dropdown(choices=first[9], value=ALL, label="Category", scale=3)
        refresh = gr.Button("Refresh", size="sm", scale=0)
    table_df = gr.Dataframe(
        value=first[1],
        label="Leaderboard (anonymous battles)",
        interactive=False,
        wrap=True,
        elem_id="leaderboard-table",
        elem_classes=BOARD_TABLE,
    )
    style_md = gr.Markdown(first[2])
    with gr.Row():
        rating_fig = gr.Plot(value=first[3], label="Ratings")
        heat_fig = gr.Plot(value=first[4], label="Win fraction")
    history_fig = gr.Plot(value=first[5], label="Ratings over time")
    with gr.Accordion("What was left out, and the categories", open=False):
        drops_df = gr.Dataframe(value=first[6], interactive=False, wrap=True, elem_classes=BOARD_TABLE)
        categories_df = gr.Dataframe(value=first[7], interactive=False, elem_classes=BOARD_TABLE)
    with gr.Accordion("Battles per pair of models", open=False):
        pairs_df = gr.Dataframe(value=first[8], interactive=False, elem_classes=BOARD_TABLE)
    gr.Markdown(EXPLAIN)
    shown = gr.State(first[10])
    outputs = [
        summary_md,
        table_df,
        style_md,
        rating_fig,
        heat_fig,
        history_fig,
        drops_df,
        categories_df,
        pairs_df,
        category,
        shown,
    ]
    _wire_refresh(view, refresh, category, shown, outputs)
    _my_votes_section(services, view)
    _operator_section(services, view)


def _with_choices(values: tuple) -> list:
    out = list(values)
    out[9] = gr.update(choices=values[9])
    return out


def _wire_refresh(
    view: LeaderboardView, refresh: gr.Button, category: gr.Dropdown, shown: gr.State, outputs: list
) -> None:
    def on_refresh(chosen: str | None = ALL) -> list:
        return _with_choices(view.outputs(chosen or ALL))

    def on_tick(current: int | None, chosen: str | None) -> Any:
        if not view.changed_since(current):
            return tuple(gr.skip() for _ in outputs)
        return _with_choices(view.outputs(chosen or ALL))

    # Cheap unless the logs changed, so these need no generation slot: concurrency_limit=None.
    refresh.click(on_refresh, inputs=category, outputs=outputs, api_name="leaderboard_refresh", concurrency_limit=None)
    category.input(
        on_refresh, inputs=category, outputs=outputs, api_name="leaderboard_category", concurrency_limit=None
    )
    # Background refreshes keep their loading status off the tables and plots (webui.ui.common.progress_on).
    quiet = progress_on(gr.HTML(visible=False))
    gr.Timer(REFRESH_EVERY_S).tick(
        on_tick, inputs=[shown, category], outputs=outputs, api_visibility="private", concurrency_limit=None, **quiet
    )
    parent = Context.block
    if isinstance(parent, gr.Tab):  # opening the tab shows the latest at once, not a tick later
        parent.select(
            on_tick,
            inputs=[shown, category],
            outputs=outputs,
            api_visibility="private",
            concurrency_limit=None,
            **quiet,
        )


def _my_votes_section(services: Services, view: LeaderboardView) -> None:
    with gr.Accordion("My votes", open=False):
        gr.Markdown("Your own board, from the battle votes cast in this browser session only.")
        show = gr.Button("Show my votes", size="sm")
        note = gr.Markdown()
        table = gr.Dataframe(interactive=False, elem_classes=BOARD_TABLE)

    def mine(request: gr.Request) -> tuple[str, pd.DataFrame]:
        key = services.recorder.session_key(str(owner_of(request).session_hash or ""))
        return view.my_votes(key)

    show.click(mine, outputs=[note, table], api_name="leaderboard_my_votes", concurrency_limit=None)


def operator_off_note(settings: Settings) -> str:
    """What the operator accordion says when its views are off, and how to turn them on."""
    if settings.ui_export == "off":
        return f"{OPERATOR_VIEWS}; `--ui-export off` turns them off here."
    return f"{OPERATOR_VIEWS} and are off: to offer them, {HOW_TO_ENABLE} (docs/leaderboard.md)."


def _operator_section(services: Services, view: LeaderboardView) -> None:
    """Voters and downloads concern everyone's behaviour and prompts. The accordion is there for
    everyone, but each of its events answers only a request that carries the operator key
    (webui.access.operator); with no key configured the events are not wired at all, so there is
    no API name to call, and the accordion says how to turn them on."""
    with gr.Accordion("Operator: voters and downloads", open=False):
        if not services.operator.enabled:
            gr.Markdown(operator_off_note(services.settings))
            return
        gr.Markdown(
            "For the operator of this server: each button here needs the operator key "
            "(`ARENA_OPERATOR_KEY` or `--operator-key-file`); a wrong one is refused."
        )
        key = gr.Textbox(label="Operator key", type="password", max_lines=1, elem_id="operator-key")
        gr.Markdown(
            "Voters whose votes disagree with everyone else's ratings far beyond chance are flagged "
            "(docs/leaderboard.md). `--leaderboard-exclude-flagged` leaves their votes out."
        )
        check = gr.Button("Check voters", size="sm")
        voters_df = gr.Dataframe(interactive=False, elem_classes=BOARD_TABLE)
        gr.Markdown(
            "Downloads: battles (every battle vote with both conversations, and the reason it was left out, "
            "if it was), preference pairs for DPO-style training (prompt, chosen, rejected), ratings over time."
        )
        with gr.Row():
            buttons = {
                kind: gr.Button(f"{name}", size="sm")
                for kind, (name, _) in EXPORTS.items()
                if parquet_available() or not name.endswith(".parquet")
            }
            history = gr.Button("ratings_over_time.csv", size="sm")
        download = gr.File(label="Download", interactive=False)
    check.click(
        _operator_only(services, view.voters),
        inputs=key,
        outputs=voters_df,
        api_name="leaderboard_voters",
        concurrency_limit=None,
    )
    for kind, button in buttons.items():
        button.click(
            _operator_only(services, functools.partial(view.export, kind)),
            inputs=key,
            outputs=download,
            api_name=f"export_{kind}",
        )
    history.click(
        _operator_only(services, view.history_csv), inputs=key, outputs=download, api_name="export_history_csv"
    )


def _operator_only(services: Services, produce: Callable[[], Any]) -> Callable[..., Any]:
    """An event handler that runs `produce` only for a request carrying the operator key: the key
    is the event's input, so the page and a REST call (no cookie, a session of its own) prove it
    the same way. Nothing is computed, and no file written, before the key is admitted."""

    def handler(key: str | None, request: gr.Request) -> Any:
        try:
            services.operator.admit(key, client_of(request, services.settings))
        except (OperatorRefused, RateLimited) as exc:  # their messages name no data, only what to do
            raise gr.Error(str(exc), print_exception=False) from None
        return produce()

    return handler

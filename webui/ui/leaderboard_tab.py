"""The Leaderboard tab: wiring only. `LeaderboardView` does the work (plain Python, tested without
Gradio); the numbers come from `webui.leaderboard` over the battles read back from the logs.

The tab refreshes on its own: a timer asks every few seconds whether the log files changed (a
stat of each day file, no reading), so a vote shows up within one tick without the arena UI
having to call anything. The board is computed once per change and shared by every open tab.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd
from gradio.context import Context

from webui.leaderboard.board import Board, BoardOptions, board_from_logs, logs_signature
from webui.leaderboard.export import preference_pairs, write_table
from webui.leaderboard.plots import ratings_figure, win_fraction_figure

if TYPE_CHECKING:
    from webui.services import Services

REFRESH_EVERY_S = 5.0
DISPLAY_COLUMNS = ["Rank", "Model", "Rating", "95% CI", "Elo", "Battles", "Wins", "Ties", "Losses"]
EXPORTS = {
    "battles_jsonl": ("battles.jsonl", "every battle vote with its drop reason"),
    "battles_parquet": ("battles.parquet", "every battle vote with its drop reason"),
    "pairs_jsonl": ("preference_pairs.jsonl", "prompt, chosen, rejected"),
}


class LeaderboardView:
    """The board for one log directory, recomputed only when the files change."""

    def __init__(self, log_dir: Path, options: BoardOptions) -> None:
        self.log_dir = Path(log_dir)
        self.options = options
        self._lock = threading.Lock()
        self._signature: tuple | None = None
        self._board: Board | None = None

    def board(self) -> tuple[Board, tuple]:
        """The current board and the signature it was computed from (one computation at a time)."""
        with self._lock:
            signature = logs_signature(self.log_dir)
            if self._board is None or signature != self._signature:
                self._board = board_from_logs(self.log_dir, self.options)
                self._signature = signature
            return self._board, self._signature

    def outputs(self) -> tuple[str, pd.DataFrame, Any, Any, pd.DataFrame, tuple]:
        """Everything the tab shows: summary, table, two figures, pair counts, signature."""
        board, signature = self.board()
        return (board.summary(), display_table(board.table), ratings_figure(board.table),
                win_fraction_figure(board.win_fraction), display_pairs(board.pair_counts), signature)

    def changed_since(self, shown: tuple | None) -> bool:
        return logs_signature(self.log_dir) != shown

    def export(self, kind: str) -> str:
        """Write one export into a fresh temporary folder and return its path for download."""
        if kind not in EXPORTS:
            raise ValueError(f"unknown export {kind!r}; known: {', '.join(EXPORTS)}")
        board, _ = self.board()
        name = EXPORTS[kind][0]
        path = Path(tempfile.mkdtemp(prefix="arena-export-")) / name
        if kind.startswith("pairs"):
            frame = preference_pairs(board.battles[board.battles["drop_reason"].isna()])
        else:
            frame = board.battles
        return str(write_table(frame, path))


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """Rounded for people: whole rating points and the interval as one column."""
    if table.empty:
        return pd.DataFrame(columns=DISPLAY_COLUMNS)
    return pd.DataFrame({
        "Rank": table["rank"].astype(int),
        "Model": table["model"],
        "Rating": table["rating"].round().astype(int),
        "95% CI": [f"{lo:.0f} to {hi:.0f}" for lo, hi in zip(table["lower"], table["upper"], strict=True)],
        "Elo": table["elo"].round().astype(int),
        "Battles": table["battles"].astype(int),
        "Wins": table["wins"].astype(int),
        "Ties": table["ties"].astype(int),
        "Losses": table["losses"].astype(int),
    })


def display_pairs(counts: pd.DataFrame) -> pd.DataFrame:
    if counts.empty:
        return pd.DataFrame(columns=["Model"])
    return counts.rename_axis("Model").reset_index()


def export_allowed(settings: Any) -> bool:
    """Exports contain every voter's prompts: on by default only when the app serves this machine."""
    mode = getattr(settings, "ui_export", "auto")
    if mode in ("on", "off"):
        return mode == "on"
    return settings.host in ("127.0.0.1", "localhost", "::1") and not settings.share


def build_leaderboard_tab(services: Services) -> None:
    """Place the leaderboard components inside the caller's `with gr.Tab(...)` block."""
    settings = services.settings
    view = LeaderboardView(settings.log_dir, BoardOptions.from_settings(settings, services.registry.names()))
    summary, table, rating_plot, heatmap, pairs, signature = view.outputs()

    summary_md = gr.Markdown(summary)
    with gr.Row():
        refresh = gr.Button("Refresh", size="sm", scale=0)
    table_df = gr.Dataframe(value=table, label="Leaderboard (anonymous battles)", interactive=False,
                            wrap=True)
    with gr.Row():
        rating_fig = gr.Plot(value=rating_plot, label="Ratings")
        heat_fig = gr.Plot(value=heatmap, label="Win fraction")
    with gr.Accordion("Battles per pair of models", open=False):
        pairs_df = gr.Dataframe(value=pairs, interactive=False)
    gr.Markdown("Bradley-Terry ratings (400 points = 10x the odds of winning), 95% bootstrap intervals; "
                "rank = 1 + the number of models whose interval lies entirely above. Ties count half. "
                "Battles where a reply named a model, failed, or was stopped are left out.")
    shown = gr.State(signature)
    outputs = [summary_md, table_df, rating_fig, heat_fig, pairs_df, shown]

    def on_refresh() -> tuple:
        return view.outputs()

    def on_tick(current: tuple | None) -> Any:
        if not view.changed_since(current):
            return tuple(gr.skip() for _ in outputs)
        return view.outputs()

    # Cheap unless the logs changed, so these need no generation slot: concurrency_limit=None.
    refresh.click(on_refresh, outputs=outputs, api_name="leaderboard_refresh", concurrency_limit=None)
    gr.Timer(REFRESH_EVERY_S).tick(on_tick, inputs=shown, outputs=outputs, show_progress="hidden",
                                   api_name=False, concurrency_limit=None)
    parent = Context.block
    if isinstance(parent, gr.Tab):  # opening the tab shows the latest at once, not a tick later
        parent.select(on_tick, inputs=shown, outputs=outputs, show_progress="hidden", api_name=False,
                      concurrency_limit=None)
    if export_allowed(settings):
        _export_section(view)


def _export_section(view: LeaderboardView) -> None:
    with gr.Accordion("Export", open=False):
        gr.Markdown("Battles (every battle vote, with the reason it was left out, if it was) and "
                    "preference pairs for DPO-style training (prompt, chosen, rejected).")
        with gr.Row():
            buttons = {kind: gr.Button(f"{name}", size="sm") for kind, (name, _) in EXPORTS.items()}
        download = gr.File(label="Download", interactive=False)
    for kind, button in buttons.items():
        button.click(_exporter(view, kind), outputs=download, api_name=f"export_{kind}")


def _exporter(view: LeaderboardView, kind: str) -> Any:
    def export() -> str:
        return view.export(kind)

    return export

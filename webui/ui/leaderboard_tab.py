"""The Leaderboard tab: wiring only. The numbers come from `webui.leaderboard` (pure) over the
battles `webui.storage` reads back from the log directory."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gradio as gr

if TYPE_CHECKING:
    from webui.server import Services


def build_leaderboard_tab(services: Services) -> None:
    """Place the leaderboard components inside the caller's `with gr.Tab(...)` block."""
    gr.Markdown("No votes recorded yet: the leaderboard appears after the first battles.")

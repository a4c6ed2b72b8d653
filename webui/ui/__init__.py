"""The Gradio Blocks UI. Placeholder until the arena UI lands: a status table."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gradio as gr

if TYPE_CHECKING:
    from webui.server import Services


def build_ui(services: "Services") -> gr.Blocks:
    def statuses() -> list[list[str]]:
        return [[s.name, s.describe()] for s in services.registry.statuses()]

    with gr.Blocks(title="Pairwise Arena") as blocks:
        gr.Markdown("# Pairwise Arena")
        table = gr.Dataframe(headers=["model", "status"], value=statuses, every=2.0)
        del table
    return blocks

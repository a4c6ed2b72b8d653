"""The two leaderboard figures (plotly): ratings with their intervals, and the win-fraction heatmap."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


def ratings_figure(table: pd.DataFrame) -> go.Figure:
    """Each model's Bradley-Terry rating with its 95% interval, best on the left."""
    fig = go.Figure()
    if not table.empty:
        fig.add_trace(go.Scatter(
            x=table["model"], y=table["rating"], mode="markers",
            error_y={"type": "data", "symmetric": False,
                     "array": table["upper"] - table["rating"], "arrayminus": table["rating"] - table["lower"]},
            hovertemplate="%{x}: %{y:.0f}<extra></extra>",
        ))
    fig.update_layout(title="Rating (Bradley-Terry) with 95% interval", xaxis_title="model",
                      yaxis_title="rating", height=380, margin={"l": 40, "r": 20, "t": 50, "b": 40})
    return fig


def win_fraction_figure(matrix: pd.DataFrame) -> go.Figure:
    """Row model's share of points against the column model, ties counted half."""
    fig = go.Figure()
    if not matrix.empty:
        fig.add_trace(go.Heatmap(
            z=matrix.to_numpy(), x=list(matrix.columns), y=list(matrix.index), zmin=0, zmax=1,
            colorscale="RdBu", text=_cell_text(matrix), texttemplate="%{text}",
            hovertemplate="%{y} vs %{x}: %{z:.2f}<extra></extra>",
        ))
    fig.update_layout(title="Win fraction of the row model against the column model", xaxis_title="opponent",
                      yaxis_title="model", yaxis_autorange="reversed", height=420,
                      margin={"l": 40, "r": 20, "t": 50, "b": 40})
    return fig


def _cell_text(matrix: pd.DataFrame) -> list[list[str]]:
    """Two decimals; blank where two models never met (and on the diagonal)."""
    return [["" if pd.isna(v) else f"{v:.2f}" for v in row] for row in matrix.to_numpy()]

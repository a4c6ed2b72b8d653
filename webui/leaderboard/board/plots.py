"""The leaderboard figures (plotly): ratings with their intervals (raw and style-controlled), the
win-fraction heatmap, and ratings over time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

MARGIN = {"l": 40, "r": 20, "t": 50, "b": 40}
# Across, at the foot of the figure (the margin grows to hold it): beside the plot it took half a
# phone's width, and above it, once it wrapped to several rows, it ran over the title.
LEGEND = {"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "xanchor": "left", "x": 0}


def _bars(table: pd.DataFrame, point: str, lower: str, upper: str) -> dict:
    """Error bars; none where a bound is open (a preliminary model that lost or won everything)."""
    up = (table[upper] - table[point]).replace([np.inf, -np.inf], np.nan)
    down = (table[point] - table[lower]).replace([np.inf, -np.inf], np.nan)
    return {"type": "data", "symmetric": False, "array": up, "arrayminus": down}


def ratings_figure(table: pd.DataFrame) -> go.Figure:
    """Each model's Bradley-Terry rating with its 95% interval, best on the left; the
    style-controlled rating beside it when the table has one. Preliminary models are left out
    when others are ranked: their open-ended intervals would squash everyone else's."""
    fig = go.Figure()
    if "preliminary" in table and (~table["preliminary"].astype(bool)).any():
        table = table[~table["preliminary"].astype(bool)]
    if not table.empty:
        fig.add_trace(
            go.Scatter(
                x=table["model"],
                y=table["rating"],
                mode="markers",
                name="rating",
                error_y=_bars(table, "rating", "lower", "upper"),
                hovertemplate="%{x}: %{y:.0f}<extra></extra>",
            )
        )
        if "style_rating" in table:
            fig.add_trace(
                go.Scatter(
                    x=table["model"],
                    y=table["style_rating"],
                    mode="markers",
                    name="style-controlled",
                    marker={"symbol": "diamond-open"},
                    error_y=_bars(table, "style_rating", "style_lower", "style_upper"),
                    hovertemplate="%{x} (style control): %{y:.0f}<extra></extra>",
                )
            )
    fig.update_layout(
        title="Rating (Bradley-Terry) with 95% interval",
        xaxis_title="model",
        yaxis_title="rating",
        height=380,
        margin=MARGIN,
        legend=LEGEND,
    )
    return fig


def win_fraction_figure(matrix: pd.DataFrame) -> go.Figure:
    """Row model's share of points against the column model, ties counted half."""
    fig = go.Figure()
    if not matrix.empty:
        fig.add_trace(
            go.Heatmap(
                z=matrix.to_numpy(),
                x=list(matrix.columns),
                y=list(matrix.index),
                zmin=0,
                zmax=1,
                colorscale="RdBu",
                text=_cell_text(matrix),
                texttemplate="%{text}",
                hovertemplate="%{y} vs %{x}: %{z:.2f}<extra></extra>",
            )
        )
    # A short title: plotly does not wrap one, and a longer one was cut off on a phone.
    fig.update_layout(
        title="Win fraction, row vs column model",
        xaxis_title="opponent",
        yaxis_title="model",
        yaxis_autorange="reversed",
        height=420,
        margin=MARGIN,
    )
    return fig


def history_figure(history: pd.DataFrame) -> go.Figure:
    """One line per model: its rating refitted on the battles counted so far."""
    fig = go.Figure()
    for model, rows in history.groupby("model", sort=True) if not history.empty else []:
        fig.add_trace(
            go.Scatter(
                x=rows["battles"],
                y=rows["rating"],
                mode="lines+markers",
                name=str(model),
                hovertemplate=f"{model}: %{{y:.0f}} after %{{x}} battles<extra></extra>",
            )
        )
    # On a phone the legend takes a row per model out of the figure's height: add room for it.
    fig.update_layout(
        title="Ratings as battles accumulate",
        xaxis_title="battles counted",
        yaxis_title="rating",
        height=380 + 20 * min(len(fig.data), 12),
        margin=MARGIN,
        legend=LEGEND,
    )
    return fig


def _cell_text(matrix: pd.DataFrame) -> list[list[str]]:
    """Two decimals; blank where two models never met (and on the diagonal)."""
    return [["" if pd.isna(v) else f"{v:.2f}" for v in row] for row in matrix.to_numpy()]

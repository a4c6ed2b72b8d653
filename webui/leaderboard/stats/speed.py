"""Speed beside quality: each model's median time to first token and tokens/s over the judged
replies of the battles the board counts, so that a reader can see whether a model wins on its
answers or only on being fast on this hardware. Pure pandas.

The speeds are the ones the engine measured for each reply (webui.types.Finished: time from the
request to the first text; completion tokens over the decode time after it), carried by the vote
records (webui.db.columns.SPEED_COLUMNS). Medians, not means: one reply that waited for a model to load
would drag a mean. NaN where no judged reply of the model had a speed logged (older logs,
FastChat's own).
"""

from __future__ import annotations

import pandas as pd

from webui.db.columns import SPEED_FIELDS

SPEED_TABLE_COLUMNS = ("model", *SPEED_FIELDS)


def model_speeds(battles: pd.DataFrame) -> pd.DataFrame:
    """`SPEED_TABLE_COLUMNS`: one row per model of `battles`, the medians of its replies' speeds."""
    if battles.empty:
        return pd.DataFrame(columns=list(SPEED_TABLE_COLUMNS))
    sides = []
    for side in ("a", "b"):
        columns = {f"model_{side}": "model", **{f"{f}_{side}": f for f in SPEED_FIELDS}}
        present = [c for c in columns if c in battles]
        sides.append(battles[present].rename(columns=columns).reindex(columns=list(SPEED_TABLE_COLUMNS)))
    replies = pd.concat(sides, ignore_index=True)
    for field in SPEED_FIELDS:
        replies[field] = pd.to_numeric(replies[field], errors="coerce")
    return replies.groupby("model", sort=True)[list(SPEED_FIELDS)].median().reset_index()

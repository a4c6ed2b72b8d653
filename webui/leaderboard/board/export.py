"""Exports: battles as JSON Lines or Parquet, and preference pairs for DPO-style training.

The battles export keeps every battle vote with its `drop_reason`, so that whoever analyses it
can apply other rules. Preference pairs come only from battles that count (hygiene passed) and
have a winner, and only where both sides saw the same conversation before the judged reply:
always so on the first turn; later turns usually differ, because each model saw its own earlier
answers, and such battles are left out rather than paired against a prompt one side never saw.
Each pair carries both sides' system prompts (`system_chosen`, `system_rejected`): the two
models of a battle may have answered under different hidden system prompts, and a pair trained
on without them teaches the wrong lesson. When both are the same (and not empty) the prompt
starts with it as a system message.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

PAIR_COLUMNS = (
    "prompt",
    "chosen",
    "rejected",
    "model_chosen",
    "model_rejected",
    "system_chosen",
    "system_rejected",
    "battle_id",
    "question_id",
    "turn",
    "anony",
    "tstamp",
    "language",
)
FORMATS = (".jsonl", ".parquet")


def preference_pairs(battles: pd.DataFrame) -> pd.DataFrame:
    """(prompt, chosen, rejected) in the conversational form TRL's DPOTrainer reads: `prompt` is a
    list of messages ending with the user's, `chosen`/`rejected` a one-message assistant list."""
    rows = []
    for battle in battles.itertuples(index=False):
        if battle.winner not in ("model_a", "model_b"):
            continue
        a, b = list(battle.conversation_a), list(battle.conversation_b)
        if not _same_prompt(a, b):
            continue
        a_won = battle.winner == "model_a"
        win, lose = (a, b) if a_won else (b, a)
        models = (battle.model_a, battle.model_b) if a_won else (battle.model_b, battle.model_a)
        systems = [getattr(battle, "system_a", "") or "", getattr(battle, "system_b", "") or ""]
        systems = systems if a_won else systems[::-1]
        shared = [{"role": "system", "content": systems[0]}] if systems[0] and systems[0] == systems[1] else []
        rows.append(
            {
                "prompt": shared + [dict(m) for m in a[:-1]],
                "chosen": [dict(win[-1])],
                "rejected": [dict(lose[-1])],
                "model_chosen": models[0],
                "model_rejected": models[1],
                "system_chosen": systems[0],
                "system_rejected": systems[1],
                "battle_id": battle.battle_id,
                "question_id": battle.question_id,
                "turn": int(battle.turn),
                "anony": bool(battle.anony),
                "tstamp": float(battle.tstamp),
                "language": getattr(battle, "language", None),
            }
        )
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS))


def _same_prompt(a: list[dict[str, str]], b: list[dict[str, str]]) -> bool:
    """Both end with a non-empty reply and agree on every message before it."""
    if not a or not b or a[-1]["role"] != "assistant" or b[-1]["role"] != "assistant":
        return False
    if not a[-1]["content"].strip() or not b[-1]["content"].strip():
        return False
    return a[:-1] == b[:-1] and any(m["role"] == "user" for m in a[:-1])


def parquet_available() -> bool:
    """pyarrow is an extra (170 MB), needed only for Parquet."""
    return importlib.util.find_spec("pyarrow") is not None


def write_table(frame: pd.DataFrame, path: Path) -> Path:
    """Write JSON Lines or Parquet, chosen by the file's suffix."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: export to {' or '.join(FORMATS)} (got {suffix or 'no suffix'})")
    if suffix == ".parquet" and not parquet_available():
        raise ValueError(
            f"{path}: Parquet export needs pyarrow, which is not installed: "
            "pip install 'pairwise-arena[parquet]' (or export to .jsonl, which needs nothing)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        with path.open("w", encoding="utf-8") as out:
            write_jsonl(frame, out)
    return path


def write_jsonl(frame: pd.DataFrame, out: TextIO) -> None:
    """One JSON object a line, missing values as null."""
    for record in _json_rows(frame):
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


def _json_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    rows = frame.to_dict(orient="records")
    return [{k: (None if _is_missing(v) else v) for k, v in row.items()} for row in rows]


def _is_missing(value: Any) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):  # lists and dicts are never "missing"
        return False

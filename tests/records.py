"""Building recorder events in tests: conversations, chat events and votes with real value types;
the indexed rows of a simulated log; and small battles tables written out by hand."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from webui.leaderboard.simulate import simulate
from webui.leaderboard.votes.index import VoteIndex
from webui.records.events import ChatEvent, ClientInfo, Conversation, VoteEvent
from webui.types import Finished, FinishReason, SamplingParams


def conversation(
    model: str,
    reply: str = "hello there",
    *,
    prompt: str = "say hello",
    mode: str = "battle",
    battle_id: str | None = None,
    anonymous: bool = True,
    turn: int = 1,
    messages: Sequence[tuple[str, str]] | None = None,
) -> Conversation:
    return Conversation(
        conv_id=uuid.uuid4().hex,
        model_name=model,
        template_name="tokenizer",
        system_message="",
        messages=list(messages) if messages is not None else [("user", prompt), ("assistant", reply)],
        params=SamplingParams(temperature=0.0, max_new_tokens=16, seed=7),
        mode=mode,
        battle_id=battle_id,
        turn=turn,
        anonymous=anonymous,
    )


def finished(reason: FinishReason = FinishReason.STOP, error: str | None = None) -> Finished:
    return Finished(reason, prompt_tokens=5, completion_tokens=3, ttft_s=0.01, tokens_per_s=42.0, error=error)


def chat_event(
    conv: Conversation, reason: FinishReason = FinishReason.STOP, client: ClientInfo | None = None
) -> ChatEvent:
    now = time.time()
    return ChatEvent(conv, finished(reason), now - 0.5, now, client or ClientInfo("192.0.2.10"))


def battle(
    model_a: str,
    model_b: str,
    replies: tuple[str, str] = ("left reply", "right reply"),
    *,
    anonymous: bool = True,
    prompt: str = "say hello",
) -> tuple[Conversation, Conversation]:
    battle_id = uuid.uuid4().hex
    mode = "battle" if anonymous else "side_by_side"
    return (
        conversation(model_a, replies[0], prompt=prompt, mode=mode, battle_id=battle_id, anonymous=anonymous),
        conversation(model_b, replies[1], prompt=prompt, mode=mode, battle_id=battle_id, anonymous=anonymous),
    )


def vote(kind: str, convs: Sequence[Conversation], client: ClientInfo | None = None, **extra) -> VoteEvent:
    return VoteEvent(kind, list(convs), client or ClientInfo("192.0.2.10"), extra)  # type: ignore[arg-type]


def simulated_rows(logs: Path, battles: int, **simulation: Any) -> pd.DataFrame:
    """The vote index's rows of a log of `battles` simulated votes written into `logs`
    (webui.leaderboard.simulate; `simulation`: its other arguments)."""
    simulate(logs, battles, **simulation)
    index = VoteIndex(logs)
    index.catch_up()
    rows = index.rows()
    index.close()
    return rows


def battle_table(rows: Sequence[tuple[str, str, str]]) -> pd.DataFrame:
    """A battles table (model_a, model_b, winner) from (a, b, winner) rows, one second apart."""
    return pd.DataFrame(
        {
            "model_a": [r[0] for r in rows],
            "model_b": [r[1] for r in rows],
            "winner": [r[2] for r in rows],
            "tstamp": np.arange(len(rows), dtype=float),
        }
    )

"""From log records to a battles table, with the hygiene rules that decide which battles count.

Pure: records (dicts, as `webui.records.storage.read_logs` returns them) in, a pandas DataFrame out. One
row per battle vote, kept or not; `drop_reason` says why a row does not count (None: it counts),
so that the leaderboard can say what it is based on and what it left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from webui.leaderboard.language import detect_language
from webui.records.identity import DEFAULT_IDENTITY_WORDS, leaked_identity

WINNERS = {"leftvote": "model_a", "rightvote": "model_b", "tievote": "tie", "bothbad_vote": "tie (bothbad)"}

BATTLE_COLUMNS = (
    "tstamp", "model_a", "model_b", "winner", "anony", "mode", "battle_id", "question_id", "turn", "judge",
    "language", "drop_reason", "conversation_a", "conversation_b", "system_a", "system_b", "voter", "session",
)
# What older FastChat versions logged as the public names of an anonymous battle (FastChat's own
# cleaner treats "Model A" as anonymous and reads the real names from the states).
ANONYMOUS_NAMES = ("", "Model A", "Model B")


@dataclass(frozen=True)
class Hygiene:
    """Which battles count. `identity_words` should include the registry's model names."""

    identity_words: tuple[str, ...] = DEFAULT_IDENTITY_WORDS
    drop_stopped: bool = True


def battles_frame(records: Iterable[dict[str, Any]], hygiene: Hygiene | None = None) -> pd.DataFrame:
    """One row per battle vote in `records`, oldest first, with `drop_reason` set where it does
    not count: invalid, same_model, identity, error, stopped."""
    hygiene = hygiene or Hygiene()
    rows = [_battle_row(r, hygiene) for r in records if r.get("type") in WINNERS]
    frame = pd.DataFrame([r for r in rows if r is not None], columns=list(BATTLE_COLUMNS))
    return frame.sort_values("tstamp", kind="stable").reset_index(drop=True)


def counted(battles: pd.DataFrame, include_named: bool = False) -> pd.DataFrame:
    """The battles that count: no drop reason, and anonymous unless named ones are asked for."""
    keep = battles["drop_reason"].isna()
    if not include_named:
        keep &= battles["anony"].astype(bool)
    return battles[keep].reset_index(drop=True)


def _battle_row(record: dict[str, Any], hygiene: Hygiene) -> dict[str, Any] | None:
    states = record.get("states")
    models = record.get("models")
    if not (isinstance(states, list) and len(states) == 2 and isinstance(models, list) and len(models) == 2):
        return None
    if not all(isinstance(s, dict) for s in states):
        return None
    models = [public_name(m) for m in models]
    anony = models[0] in ANONYMOUS_NAMES and models[1] in ANONYMOUS_NAMES
    names = [s.get("model_name") for s in states] if anony else list(models)
    convs = [_openai_messages(s) for s in states]
    first_user = next((m["content"] for m in convs[0] if m["role"] == "user"), "")
    ip = record.get("ip") or ""
    row = {
        "tstamp": float(record.get("tstamp", 0.0)),
        "model_a": names[0],
        "model_b": names[1],
        "winner": WINNERS[record["type"]],
        "anony": anony,
        "mode": record.get("mode", "battle" if anony else "side_by_side"),
        "battle_id": record.get("battle_id"),
        "question_id": states[0].get("conv_id"),
        "turn": sum(1 for m in convs[0] if m["role"] == "user"),
        "judge": f"arena_user_{ip}",  # FastChat's form, over the logged (hashed) address
        "language": detect_language(first_user),
        "conversation_a": convs[0],
        "conversation_b": convs[1],
        "system_a": _text(states[0].get("system_message")),
        "system_b": _text(states[1].get("system_message")),
        "voter": voter_of(record),
        "session": _session_key(record),
    }
    row["drop_reason"] = _drop_reason(record, states, models, names, hygiene)
    return row


def public_name(name: Any) -> Any:
    """A logged public name without the HTML heading some FastChat versions wrapped it in."""
    if isinstance(name, str) and name.startswith("<h3>"):
        return name[name.find(": ") + 2:].removesuffix("\n").removesuffix("</h3>")
    return name


def voter_of(record: dict[str, Any]) -> str:
    """Who cast the vote, for per-voter caps and checks: the (hashed) user when logged in, else
    the (hashed) address; "" when the log keeps neither."""
    user, ip = record.get("user") or "", record.get("ip") or ""
    return f"user:{user}" if user else f"ip:{ip}" if ip else ""


def _session_key(record: dict[str, Any]) -> str:
    """The keyed hash of the browser session that voted (webui.records.storage.session_key)."""
    extra = record.get("extra")
    return _text(extra.get("session")) if isinstance(extra, dict) else ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _drop_reason(record: dict[str, Any], states: list[dict], models: list, names: list, hygiene: Hygiene) -> str | None:
    if (models[0] in ANONYMOUS_NAMES) != (models[1] in ANONYMOUS_NAMES):
        return "invalid"
    if not all(isinstance(n, str) and n for n in names):
        return "invalid"
    if not anony_names_match(models, states):
        return "invalid"
    if not any(m["role"] == "user" for m in _openai_messages(states[0])):
        return "invalid"
    if names[0] == names[1]:
        return "same_model"
    if _leaked(record, states, hygiene):
        return "identity"
    reasons = [r for s in states for r in s.get("finish_reasons", [])]
    if "error" in reasons:
        return "error"
    if hygiene.drop_stopped and "cancelled" in reasons:
        return "stopped"
    return None


def anony_names_match(models: list, states: list[dict]) -> bool:
    """A named vote must name the same models its states do (FastChat drops it otherwise)."""
    if models[0] in ANONYMOUS_NAMES:
        return True
    hidden = [s.get("model_name") for s in states]
    return hidden == [None, None] or hidden == list(models)


def _leaked(record: dict[str, Any], states: list[dict], hygiene: Hygiene) -> bool:
    """Re-check the text with today's word list; a redacted vote relies on its write-time check."""
    if any(s.get("redacted") for s in states):
        return bool(record.get("hygiene", {}).get("identity_leak"))
    replies = [m["content"] for s in states for m in _openai_messages(s) if m["role"] == "assistant"]
    return leaked_identity(replies, hygiene.identity_words)


def _openai_messages(state: dict[str, Any]) -> list[dict[str, str]]:
    """The state's messages after its offset as OpenAI dicts. FastChat's own logs name roles after
    the template ("USER", "Human", ...): the first entry of `roles` is the user's."""
    roles = state.get("roles") or ["user", "assistant"]
    msgs = state.get("messages", [])[int(state.get("offset", 0)):]
    return [
        {"role": "user" if m[0] == roles[0] else "assistant", "content": m[1] if isinstance(m[1], str) else ""}
        for m in msgs
        if isinstance(m, (list, tuple)) and len(m) == 2
    ]

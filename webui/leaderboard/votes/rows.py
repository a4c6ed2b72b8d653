"""From log records to a battles table, with the hygiene rules that decide which battles count.

Pure: records (dicts, as `webui.records.storage.read_logs` returns them) in, a pandas DataFrame out. One
row per battle vote, kept or not; `drop_reason` says why a row does not count (None: it counts),
so that the leaderboard can say what it is based on and what it left out.

A model name longer than `MODEL_NAME_MAX_CHARS` (which the models file refuses: only a damaged or
hostile log holds one) makes its vote unreadable, "invalid", with the name left out of the row
and of the identity words: a 10 MB name would otherwise be a 10 MB row on every board.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from webui.db.columns import FINGERPRINT_COLUMNS, ROW_COLUMNS, SPEED_COLUMNS, STYLE_COUNT_COLUMNS
from webui.leaderboard.votes.features import stored_features, text_features
from webui.records.identity import DEFAULT_IDENTITY_WORDS, leaked_identity
from webui.types import MODEL_NAME_MAX_CHARS, PAIR_VOTES

WINNERS = {vote.kind: vote.winner for vote in PAIR_VOTES}

# The row columns of text, which a malformed log may fill with something else (`as_text`).
TEXT_ROW_COLUMNS = (
    "model_a",
    "model_b",
    "mode",
    "battle_id",
    "question_id",
    "language",
    "voter",
    "session",
    "fingerprint_a",
    "fingerprint_b",
)
CONVERSATION_COLUMNS = ("conversation_a", "conversation_b", "system_a", "system_b")
BATTLE_COLUMNS = (*ROW_COLUMNS, "drop_reason", *CONVERSATION_COLUMNS)
# What older FastChat versions logged as the public names of an anonymous battle (FastChat's own
# cleaner treats "Model A" as anonymous and reads the real names from the states).
ANONYMOUS_NAMES = ("", "Model A", "Model B")
# What reading a record whose fields have the wrong types raises; such a vote is "invalid".
MALFORMED = (TypeError, ValueError, AttributeError, IndexError, KeyError, OverflowError)


@dataclass(frozen=True)
class Hygiene:
    """Which battles count. `identity_words` should include the registry's model names."""

    identity_words: tuple[str, ...] = DEFAULT_IDENTITY_WORDS
    drop_stopped: bool = True


def battles_frame(
    records: Iterable[dict[str, Any]], hygiene: Hygiene | None = None, unreadable: list[dict[str, Any]] | None = None
) -> pd.DataFrame:
    """One row per battle vote in `records`, oldest first, with `drop_reason` set where it does
    not count: invalid, same_model, identity, error, stopped. Records nested too deep to read
    (as the vote index counts them: unreadable lines) are left out, and added to `unreadable`."""
    hygiene = hygiene or Hygiene()
    rows = []
    for record in records:
        try:
            row = vote_row(record, hygiene.identity_words)
            if row is None:
                continue
            row.update({column: as_text(row[column]) for column in TEXT_ROW_COLUMNS})  # as the vote index keeps it
            rows.append({**row, **conversation_columns(record)})
        except RecursionError:  # a value json cannot write back: one unreadable line, not a stopped board
            if unreadable is not None:
                unreadable.append(record)
    frame = pd.DataFrame(rows, columns=[c for c in BATTLE_COLUMNS if c != "drop_reason"])
    frame["drop_reason"] = drop_reasons(frame, hygiene.drop_stopped)
    return frame.sort_values("tstamp", kind="stable").reset_index(drop=True)[list(BATTLE_COLUMNS)]


def as_text(value: Any) -> Any:
    """A text column's value: text or None as it is, anything else (a malformed log: a list for a
    model name) as its JSON, which can be compared, hashed and stored."""
    return value if value is None or isinstance(value, str) else json.dumps(value, default=str)


def drop_reasons(rows: pd.DataFrame, drop_stopped: bool) -> pd.Series:
    """Each row's drop reason, first that applies: invalid, same_model, identity, error, stopped."""
    reason = rows["base_reason"].astype(object).where(rows["base_reason"].notna(), None)
    for name, flag in (
        ("identity", rows["leak"]),
        ("error", rows["error"]),
        ("stopped", rows["stopped"] if drop_stopped else None),
    ):
        if flag is not None:
            reason = reason.where(reason.notna() | ~flag.astype(bool), name)
    return reason.astype(object).where(reason.notna(), None)


def counted(battles: pd.DataFrame, include_named: bool = False) -> pd.DataFrame:
    """The battles that count: no drop reason, and anonymous unless named ones are asked for."""
    keep = battles["drop_reason"].isna()
    if not include_named:
        keep &= battles["anony"].astype(bool)
    return battles[keep].reset_index(drop=True)


def vote_row(record: dict[str, Any], identity_words: Sequence[str] | None = None) -> dict[str, Any] | None:
    """The `ROW_COLUMNS` of one battle vote record (None: not a battle vote, or not shaped like
    one). `leak`: the write-time check of a redacted vote; else, for a vote no other reason drops,
    whether a reply names one of `identity_words` (False when they are not given)."""
    found = unchecked_vote_row(record)
    if found is None:
        return None
    row, replies = found
    if identity_words is not None and replies is not None:
        row["leak"] = leaked_identity(replies, identity_words)
    return row


def unchecked_vote_row(record: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...] | None] | None:
    """`vote_row` without identity words, and the replies that the identity check reads (None
    where it does not apply: a redacted vote, or one that another reason drops). The vote index
    checks the replies once it knows every name in their chunk."""
    kind = record.get("type")
    if kind not in WINNERS:
        return None
    states, models = record.get("states"), record.get("models")
    if not (isinstance(states, list) and len(states) == 2 and isinstance(models, list) and len(models) == 2):
        return None
    state_a, state_b = states
    if not (isinstance(state_a, dict) and isinstance(state_b, dict)):
        return None
    if any(_overlong(name) for name in (state_a.get("model_name"), state_b.get("model_name"), *models)):
        return _invalid_row(record), None
    try:
        row, replies_a, replies_b = _row(record, WINNERS[kind], state_a, state_b, models)
    except MALFORMED:
        # a field of the wrong type (a time that is no number, an offset that is no index): a vote
        # that does not count, shown with the others left out; never one that stops the board
        return _invalid_row(record), None
    # A tuple of strings: the garbage collector stops tracking it while it waits for the check.
    return row, ((*replies_a, *replies_b) if not row["redacted"] and row["base_reason"] is None else None)


def _invalid_row(record: dict[str, Any]) -> dict[str, Any]:
    """The row of a vote record that cannot be read: what can be, and "invalid"."""
    row: dict[str, Any] = {
        **dict.fromkeys(STYLE_COUNT_COLUMNS, 0),
        **dict.fromkeys(SPEED_COLUMNS),
        **dict.fromkeys(FINGERPRINT_COLUMNS),
    }
    tstamp = record.get("tstamp")
    models = [None if _overlong(m) else public_name(m) for m in record["models"]]
    row.update(
        {
            "tstamp": float(tstamp) if isinstance(tstamp, (int, float)) and not isinstance(tstamp, bool) else 0.0,
            "model_a": models[0] if isinstance(models[0], str) else None,
            "model_b": models[1] if isinstance(models[1], str) else None,
            "winner": WINNERS[record["type"]],
            "anony": False,
            "mode": _text(record.get("mode")),
            "battle_id": record.get("battle_id") if isinstance(record.get("battle_id"), str) else None,
            "question_id": None,
            "turn": 0,
            "judge": "",
            "language": "",
            "voter": voter_of(record),
            "session": _session_key(record),
            "base_reason": "invalid",
            **dict.fromkeys(("redacted", "leak", "error", "stopped", "coding", "long_prompt"), False),
        }
    )
    return {column: row[column] for column in ROW_COLUMNS}


def _row(
    record: dict[str, Any], winner: str | None, state_a: dict[str, Any], state_b: dict[str, Any], models: list
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The `ROW_COLUMNS` of a battle vote (the identity check left to the caller) and each side's
    replies; one of `MALFORMED` where a field has the wrong type. One dictionary built at once,
    each state read once: this runs for every vote of a cold index."""
    prompts, replies_a = _texts(state_a)
    replies_b = _texts(state_b)[1]
    model_a, model_b = public_name(models[0]), public_name(models[1])
    get = record.get
    anony = model_a in ANONYMOUS_NAMES and model_b in ANONYMOUS_NAMES
    name_a, name_b = (state_a.get("model_name"), state_b.get("model_name")) if anony else (model_a, model_b)
    ip = get("ip") or ""
    reasons = _finish_reasons(state_a) + _finish_reasons(state_b)
    redacted = bool(state_a.get("redacted")) or bool(state_b.get("redacted"))
    hygiene = get("hygiene")
    # counted when the vote was written, where its record says so; else now, the same way
    found = stored_features(get("features")) or text_features(prompts, replies_a, replies_b)
    row = {
        "tstamp": float(get("tstamp", 0.0)),
        "model_a": name_a,
        "model_b": name_b,
        "winner": winner,
        "anony": anony,
        "mode": get("mode", "battle" if anony else "side_by_side"),
        "battle_id": get("battle_id"),
        "question_id": state_a.get("conv_id"),
        "turn": len(prompts),
        "judge": f"arena_user_{ip}",  # FastChat's form, over the logged (hashed) address
        "language": found["language"],
        "voter": voter_of(record),
        "session": _session_key(record),
        "base_reason": _base_reason(state_a, state_b, model_a, model_b, name_a, name_b, prompts),
        "redacted": redacted,
        "leak": redacted and isinstance(hygiene, dict) and bool(hygiene.get("identity_leak")),
        "error": "error" in reasons,
        "stopped": "cancelled" in reasons,
        "coding": found["coding"],
        "long_prompt": found["long_prompt"],
        # STYLE_COUNT_COLUMNS, SPEED_COLUMNS, FINGERPRINT_COLUMNS: named here rather than zipped from
        # those tables (a microsecond a vote); tests/unit/leaderboard/votes/test_leaderboard_fast_paths.py checks the order
        "length_a": found["length_a"],
        "headers_a": found["headers_a"],
        "bold_a": found["bold_a"],
        "lists_a": found["lists_a"],
        "length_b": found["length_b"],
        "headers_b": found["headers_b"],
        "bold_b": found["bold_b"],
        "lists_b": found["lists_b"],
        "ttft_s_a": _judged_speed(state_a.get("ttft_s")),
        "tokens_per_s_a": _judged_speed(state_a.get("tokens_per_s")),
        "ttft_s_b": _judged_speed(state_b.get("ttft_s")),
        "tokens_per_s_b": _judged_speed(state_b.get("tokens_per_s")),
        "fingerprint_a": _fingerprint(state_a),
        "fingerprint_b": _fingerprint(state_b),
    }
    return row, replies_a, replies_b


def written_check(record: dict[str, Any]) -> tuple[str, bool] | None:
    """(the word list's version, did a reply name one of its words?) of the identity check a vote
    record keeps from when it was written (`hygiene`, webui.records.storage.vote_record); None
    where it keeps none (older logs, FastChat's) or not of that shape."""
    hygiene = record.get("hygiene")
    if type(hygiene) is not dict:
        return None
    version, leak = hygiene.get("identity_words"), hygiene.get("identity_leak")
    return (version, leak) if type(version) is str and type(leak) is bool else None


def vote_features(record: dict[str, Any]) -> dict[str, Any] | None:
    """What a battle vote record's "features" key holds when the app writes it
    (`features.text_features` of its states as logged, redacted or not: what the index would count
    from them); None for a record that is no battle vote of a readable shape."""
    states = record.get("states")
    if record.get("type") not in WINNERS or not (isinstance(states, list) and len(states) == 2):
        return None
    if not all(isinstance(state, dict) for state in states):
        return None
    try:
        prompts, replies_a = _texts(states[0])
        return text_features(prompts, replies_a, _texts(states[1])[1])
    except MALFORMED:
        return None


def _finish_reasons(state: dict[str, Any]) -> list:
    """The state's finish reasons as a list: whatever it logged, iterated (a string as its characters)."""
    reasons = state.get("finish_reasons", [])
    return reasons if type(reasons) is list else list(reasons)


def _fingerprint(state: dict[str, Any]) -> str | None:
    """The fingerprint a vote state carries (webui.records.storage.state_dict); None where it does
    not (older logs, FastChat's, a model that could not say what it was)."""
    value = state.get("fingerprint")
    return value if isinstance(value, str) and value else None


def _judged_speed(values: Any) -> float | None:
    """The judged (last) reply's speed of a state's logged `values` (one per turn), None where it
    was not logged (older logs, FastChat's, an engine that did not measure it) or is not a finite
    number."""
    last = values[-1] if isinstance(values, list) and values else None
    if type(last) is float:  # as logged: skip the checks that only other types need
        return last if math.isfinite(last) else None
    if isinstance(last, bool) or not isinstance(last, (int, float)) or not math.isfinite(last):
        return None
    return float(last)


def conversation_columns(record: dict[str, Any]) -> dict[str, Any]:
    """The text a battle vote carries (for exports; never kept in the vote index); none for a
    record that cannot be read."""
    states = record["states"]
    try:
        return _conversation_columns(states)
    except MALFORMED:
        return {"conversation_a": [], "conversation_b": [], "system_a": "", "system_b": ""}


def _conversation_columns(states: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "conversation_a": _openai_messages(states[0]),
        "conversation_b": _openai_messages(states[1]),
        "system_a": _text(states[0].get("system_message")),
        "system_b": _text(states[1].get("system_message")),
    }


def names_in(record: dict[str, Any]) -> set[str]:
    """Every model name a vote record mentions, as the identity words take them: not the
    placeholders of anonymous battles ("Model A" would make every reply that says "model a" a leak)."""
    states, models = record.get("states"), record.get("models")
    found = set()
    if isinstance(states, list):
        for state in states:
            # only text: a name of another type (a list, in a damaged log) is no name, and no error
            if isinstance(state, dict) and isinstance(name := state.get("model_name"), str) and not _overlong(name):
                found.add(name)
    if isinstance(models, list):
        for model in models:
            if isinstance(model, str) and not _overlong(model):
                found.add(public_name(model))
    found.difference_update(ANONYMOUS_NAMES)
    return found


def identity_leak(record: dict[str, Any], words: Sequence[str]) -> bool:
    """Does a reply of this battle vote name a model or maker from `words`?"""
    return leaked_identity([reply for s in record["states"] for reply in _texts(s)[1]], words)


def _overlong(name: Any) -> bool:
    """A model name (as logged, before `public_name`) longer than any the models file allows."""
    return isinstance(name, str) and len(public_name(name)) > MODEL_NAME_MAX_CHARS


def public_name(name: Any) -> Any:
    """A logged public name without the HTML heading some FastChat versions wrapped it in."""
    if isinstance(name, str) and name.startswith("<h3>"):
        return name[name.find(": ") + 2 :].removesuffix("\n").removesuffix("</h3>")
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


def _base_reason(
    state_a: dict, state_b: dict, model_a: Any, model_b: Any, name_a: Any, name_b: Any, prompts: list[str]
) -> str | None:
    anony_a = model_a in ANONYMOUS_NAMES
    if anony_a != (model_b in ANONYMOUS_NAMES):
        return "invalid"
    if not (isinstance(name_a, str) and name_a and isinstance(name_b, str) and name_b):
        return "invalid"
    if not anony_a and not _hidden_names_match(state_a.get("model_name"), state_b.get("model_name"), model_a, model_b):
        return "invalid"
    if not prompts:
        return "invalid"
    if name_a == name_b:
        return "same_model"
    return None


def _hidden_names_match(hidden_a: Any, hidden_b: Any, model_a: Any, model_b: Any) -> bool:
    """A named vote must name the same models its states do, where they name any (FastChat drops
    it otherwise)."""
    # As the lists [hidden_a, hidden_b] and [model_a, model_b] compare: each pair the same object or equal.
    if hidden_a is None and hidden_b is None:
        return True
    return (hidden_a is model_a or hidden_a == model_a) and (hidden_b is model_b or hidden_b == model_b)


def _texts(state: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the user's texts, the assistant's) of `_openai_messages(state)`, without a dict per message."""
    roles = state.get("roles") or ["user", "assistant"]
    users: list[str] = []
    assistants: list[str] = []
    for m in state.get("messages", [])[int(state.get("offset", 0)) :]:
        if isinstance(m, (list, tuple)) and len(m) == 2:
            (users if m[0] == roles[0] else assistants).append(m[1] if isinstance(m[1], str) else "")
    return users, assistants


def _openai_messages(state: dict[str, Any]) -> list[dict[str, str]]:
    """The state's messages after its offset as OpenAI dicts. FastChat's own logs name roles after
    the template ("USER", "Human", ...): the first entry of `roles` is the user's."""
    roles = state.get("roles") or ["user", "assistant"]
    msgs = state.get("messages", [])[int(state.get("offset", 0)) :]
    return [
        {"role": "user" if m[0] == roles[0] else "assistant", "content": m[1] if isinstance(m[1], str) else ""}
        for m in msgs
        if isinstance(m, (list, tuple)) and len(m) == 2
    ]

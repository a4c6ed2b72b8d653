"""Which logged prompts a replay asks: the first user turn of counted battle votes, de-duplicated,
drawn in turn from each category (so that a category with few prompts is not left out), and within
a category the prompts that people decided (a winner, not a tie) first. Seeded: the same logs and
seed give the same prompts.

Each prompt also carries the replies its battles logged to it (the first reply of each side, with
the model's name and fingerprint), so that a replay can reuse a baseline's reply where the model
that wrote it is the one serving now (`logged_reply`) instead of generating it again."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import pandas as pd

from webui.judge.run import counted_rows
from webui.leaderboard.votes.index import VoteIndex
from webui.progress import Progress

MAX_PROMPT_CHARS = 20_000  # a replayed prompt is a question, not a document: longer ones are left out


@dataclass(frozen=True)
class LoggedReply:
    model: str
    fingerprint: str  # of what served it; "" where the log has none
    text: str


@dataclass(frozen=True)
class Prompt:
    text: str
    category: str  # coding, long prompt, or the prompt's language
    decided: bool  # people chose a winner in (one of) its battles
    logged: tuple[LoggedReply, ...] = ()  # first replies to it in its battles, oldest first

    def logged_reply(self, model: str, fingerprint: str | None) -> str | None:
        """A logged reply of `model` written by what has `fingerprint` now; None where there is
        none (or no fingerprint to compare: an unknown server may have changed since)."""
        if not fingerprint:
            return None
        for reply in self.logged:
            if reply.model == model and reply.fingerprint == fingerprint:
                return reply.text
        return None


def category_of(row: pd.Series) -> str:
    if bool(row["coding"]):
        return "coding"
    if bool(row["long_prompt"]):
        return "long prompt"
    language = row["language"]
    return f"language: {language}" if isinstance(language, str) and language else "language: unknown"


def pick_prompts(
    index: VoteIndex,
    count: int,
    seed: int = 0,
    model_names: tuple[str, ...] = (),
    *,
    progress: Progress | None = None,
) -> list[Prompt]:
    """`count` prompts (fewer where the logs hold fewer distinct ones); `progress` counts the
    index's catch-up first."""
    index.catch_up(model_names, progress=progress)
    rows = index.rows()
    if rows.empty:
        return []
    rows = counted_rows(rows)
    rng = random.Random(seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    found: dict[str, Prompt] = {}
    # Read the votes' lines a few hundred at a time, in a random order, until there are enough
    # candidates to choose from (four per prompt wanted), not the whole log.
    for start in range(0, len(order), 400):
        part = rows.iloc[order[start : start + 400]]
        details = index.details(part)
        sides = zip(details["mode"], details["conversation_a"], details["conversation_b"], strict=True)
        for (_, row), (mode, conversation_a, conversation_b) in zip(part.iterrows(), sides, strict=True):
            text = _first_user_turn(conversation_a)
            if text is None:
                continue
            decided = row["winner"] in ("model_a", "model_b")
            known = found.get(text)
            logged = (*(known.logged if known else ()), *_first_replies(row, mode, conversation_a, conversation_b))
            if known is None or (decided and not known.decided):
                found[text] = Prompt(text, category_of(row), decided, logged)
            else:
                found[text] = replace(known, logged=logged)
        if len(found) >= 4 * count:
            break
    return _stratified(list(found.values()), count, rng)


def _first_user_turn(conversation: object) -> str | None:
    if not isinstance(conversation, list):
        return None
    for message in conversation:
        if isinstance(message, dict) and message.get("role") == "user":
            text = message.get("content")
            if isinstance(text, str) and text.strip() and len(text) <= MAX_PROMPT_CHARS:
                return text
            return None
    return None


def _first_replies(row: pd.Series, mode: object, conversation_a: object, conversation_b: object) -> list[LoggedReply]:
    """Each side's reply to the first user turn, in a battle vote (where both models answered with
    their own settings, as a replay asks them)."""
    replies = []
    for side, conversation in (("a", conversation_a), ("b", conversation_b)):
        model, fingerprint = row[f"model_{side}"], row[f"fingerprint_{side}"]
        if mode != "battle" or not isinstance(model, str) or not isinstance(conversation, list):
            continue
        if len(conversation) < 2 or not isinstance(conversation[1], dict):
            continue
        first_user = conversation[0] if conversation and isinstance(conversation[0], dict) else {}
        reply = conversation[1]
        if (
            first_user.get("role") == "user"
            and reply.get("role") == "assistant"
            and isinstance(reply.get("content"), str)
        ):
            replies.append(LoggedReply(model, fingerprint if isinstance(fingerprint, str) else "", reply["content"]))
    return replies


def _stratified(candidates: list[Prompt], count: int, rng: random.Random) -> list[Prompt]:
    by_category: dict[str, list[Prompt]] = {}
    for prompt in candidates:
        by_category.setdefault(prompt.category, []).append(prompt)
    for group in by_category.values():
        rng.shuffle(group)
        group.sort(key=lambda p: not p.decided)  # stable: decided first, shuffled within each
    chosen: list[Prompt] = []
    categories = sorted(by_category)
    while len(chosen) < count and any(by_category.values()):
        for name in categories:
            if by_category[name] and len(chosen) < count:
                chosen.append(by_category[name].pop(0))
    return chosen

"""Which logged prompts a replay asks: the first user turn of counted battle votes, de-duplicated,
drawn in turn from each category (so that a category with few prompts is not left out), and within
a category the prompts that people decided (a winner, not a tie) first. Seeded: the same logs and
seed give the same prompts."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pandas as pd

from webui.judge.run import counted_rows
from webui.leaderboard.votes.index import VoteIndex
from webui.progress import Progress

MAX_PROMPT_CHARS = 20_000  # a replayed prompt is a question, not a document: longer ones are left out


@dataclass(frozen=True)
class Prompt:
    text: str
    category: str  # coding, long prompt, or the prompt's language
    decided: bool  # people chose a winner in (one of) its battles


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
        for (_, row), conversation in zip(part.iterrows(), details["conversation_a"], strict=True):
            text = _first_user_turn(conversation)
            if text is None:
                continue
            decided = row["winner"] in ("model_a", "model_b")
            known = found.get(text)
            if known is None or (decided and not known.decided):
                found[text] = Prompt(text, category_of(row), decided)
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

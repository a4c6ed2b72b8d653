"""Categories: the same leaderboard over a subset of the battles, as lmarena splits its board.

Each category is a yes/no question about a battle's prompt, answered from the battles table
alone (pure): its language (`webui.leaderboard.language`), more than one turn, a long prompt,
a prompt with code. A battle can be in several categories; "all" holds every counted battle.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from webui.leaderboard.ratings import Coded, encode

ALL = "all"
MULTI_TURN = "multi-turn"
LONG_PROMPT = "long prompt"
CODING = "coding"
LANGUAGE_PREFIX = "language: "
LONG_PROMPT_WORDS = 400  # about 500 tokens, lmarena's "longer query"
MIN_LANGUAGE_BATTLES = 1  # a language gets a category once it has this many counted battles

# A prompt "has code" when it holds a fenced block, or a line that only code looks like: one that
# starts (after blanks) with _CODE_LINE, or that ends in {, } or ;. A line's start past the first
# is matched as the newline before it: the pattern then leads with a character the engine scans
# for, rather than trying `^` at every position.
_CODE_LINE = (
    r"\s*(?:def |class \w+|import \w|from \w+ import |#include|function\b|public |private |"
    r"(?:const|let|var) \w+ =|for \(|while \(|if \(|SELECT .+ FROM|console\.log|System\.out|print\(|"
    r"return\b.*;|<\w+[^>]*>.*</\w+>)"
)
_FLAGS = re.MULTILINE | re.IGNORECASE
_CODE_FIRST_LINE = re.compile(_CODE_LINE, _FLAGS)
_CODE_LATER_LINE = re.compile(rf"\n{_CODE_LINE}", _FLAGS)
_CODE_LINE_END = re.compile(r"[{};]\s*$", _FLAGS)


def user_text(conversation: list[dict[str, str]]) -> str:
    return "\n".join(m.get("content", "") for m in conversation if m.get("role") == "user")


def has_code(text: str) -> bool:
    text = text or ""
    if "```" in text or _CODE_FIRST_LINE.match(text) or _CODE_LATER_LINE.search(text):
        return True
    # Searching for one of three characters is slow: look for each of them first.
    return ("{" in text or "}" in text or ";" in text) and _CODE_LINE_END.search(text) is not None


def is_long(text: str) -> bool:
    # Fewer characters than that many words need (one each, a space between): not long.
    text = text or ""
    return len(text) >= 2 * LONG_PROMPT_WORDS - 1 and len(text.split()) >= LONG_PROMPT_WORDS


def category_masks(battles: pd.DataFrame) -> dict[str, pd.Series]:
    """Category name -> which battles are in it (a boolean Series on the battles' index).
    Languages are listed by their number of battles, largest first; "unknown" last."""
    if battles.empty:
        return {name: pd.Series(dtype=bool) for name in (ALL, MULTI_TURN, LONG_PROMPT, CODING)}
    masks = {ALL: pd.Series(True, index=battles.index)}
    codes, names = pd.factorize(battles["language"].fillna("unknown"))
    languages = pd.Series(np.bincount(codes, minlength=len(names)), index=[str(n) for n in names])
    languages = languages.sort_values(ascending=False, kind="stable")
    known = [lang for lang in languages.index if lang != "unknown"] + (["unknown"] if "unknown" in languages else [])
    position = {name: i for i, name in enumerate(str(n) for n in names)}
    for lang in known:
        if languages[lang] >= MIN_LANGUAGE_BATTLES:
            masks[LANGUAGE_PREFIX + lang] = pd.Series(codes == position[lang], index=battles.index)
    masks[MULTI_TURN] = battles["turn"].astype(int) > 1
    if "coding" in battles:  # rows of the vote index: the flags were computed when the vote was read
        masks[LONG_PROMPT], masks[CODING] = battles["long_prompt"].astype(bool), battles["coding"].astype(bool)
    else:
        prompts = battles["conversation_a"].map(user_text)
        masks[LONG_PROMPT] = prompts.map(is_long).astype(bool)
        masks[CODING] = prompts.map(has_code).astype(bool)
    return masks


def category_counts(battles: pd.DataFrame, coded: Coded | None = None) -> pd.DataFrame:
    """Battles per category, and the number of models they involve. (`coded`: the battles, encoded.)"""
    rows = []
    coded = coded or encode(battles)
    for name, mask in category_masks(battles).items():
        chosen = mask.to_numpy(bool) if len(mask) else np.zeros(0, dtype=bool)
        played = np.bincount(coded.a[chosen], minlength=len(coded.models)) + np.bincount(
            coded.b[chosen], minlength=len(coded.models)
        )
        rows.append({"category": name, "battles": int(chosen.sum()), "models": int((played > 0).sum())})
    return pd.DataFrame(rows, columns=["category", "battles", "models"])

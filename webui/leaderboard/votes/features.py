"""What a vote's texts say, counted once: the replies' style (words, markdown headers, bold spans,
list items) for style control, the prompt's language and flags (code, long) for the categories.
Pure functions of text; the vote index stores what they return (webui.leaderboard.votes.rows), and
the statistics read those columns, never the texts.

Counted when the app writes the vote (`text_features`, kept in the record's "features" key with
`FEATURES_VERSION`), and again when a vote is indexed only where its record has none of this
version (older logs, FastChat's, a record changed by hand): `stored_features` says which.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from webui.db.columns import STYLE_COUNT_COLUMNS
from webui.leaderboard.votes.language import detect_language

LONG_PROMPT_WORDS = 400  # about 500 tokens, lmarena's "longer query"
# The features' version in a vote record: raise it whenever a function here (or the language
# detector) would count a text differently, so that the index counts every vote again.
FEATURES_VERSION = 1
FEATURE_FLAGS = ("coding", "long_prompt")
_COUNT_LIMIT = 1 << 63  # what an SQLite INTEGER holds: a larger stored count is no count of ours

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


def text_features(prompts: list[str], replies_a: list[str], replies_b: list[str]) -> dict[str, Any]:
    """A battle's features as a vote record keeps them: `FEATURES_VERSION`, the first prompt's
    language, the prompts' flags (`FEATURE_FLAGS`) and each side's style counts, named by their
    index columns (`STYLE_COUNT_COLUMNS`)."""
    prompt_text = "\n".join(prompts)
    counts = (*text_style("\n".join(replies_a)), *text_style("\n".join(replies_b)))
    return {
        "version": FEATURES_VERSION,
        "language": detect_language(prompts[0] if prompts else ""),
        "coding": has_code(prompt_text),
        "long_prompt": is_long(prompt_text),
        **dict(zip(STYLE_COUNT_COLUMNS, counts, strict=True)),
    }


def stored_features(value: Any) -> dict[str, Any] | None:
    """A record's "features" value if it is what `text_features` of this version writes: the
    version, the language as text, the flags as booleans, each count an int from 0 to what SQLite
    holds (exact types: what JSON gives). None otherwise, and the index counts the texts again.
    webui/leaderboard/votes/_rows.c applies the same test."""
    if type(value) is not dict or value.get("version") != FEATURES_VERSION or type(value.get("version")) is not int:
        return None
    if type(value.get("language")) is not str or any(type(value.get(f)) is not bool for f in FEATURE_FLAGS):
        return None
    for column in STYLE_COUNT_COLUMNS:
        count = value.get(column)
        if type(count) is not int or not 0 <= count < _COUNT_LIMIT:
            return None
    return value


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


_HEADER = re.compile(r"^#{1,6}\s+\S", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+?\*\*|__[^_\n]+?__")
# Each alternative of _BOLD alone, for a text with only its mark: led by a literal, which the engine
# scans for much faster than for one of two characters.
_BOLD_STARS = re.compile(r"\*\*[^*\n]+?\*\*")
_BOLD_UNDERSCORES = re.compile(r"__[^_\n]+?__")
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.MULTILINE)
# The same patterns past the first line, led by the newline that starts a line: the engine scans
# for a literal first character instead of trying `^` at every position. (A match ends with a
# non-space, so the newline before the next one is never inside it: the same matches, one to one.)
_HEADER_AFTER_NEWLINE = re.compile(r"\n#{1,6}\s+\S")
_LIST_AFTER_NEWLINE = re.compile(r"\n\s*(?:[-*+]|\d+[.)])\s+\S")
# ASCII bytes to b" " where str.split() sees whitespace, else to b"x": a word is a run of b"x".
_SPACE_OR_WORD = bytes(0x20 if chr(c).isspace() else 0x78 for c in range(128)).ljust(256, b"x")


def reply_style(messages: list[dict[str, str]]) -> tuple[int, int, int, int]:
    """(words, headers, bold spans, list items) over the assistant messages of one conversation."""
    return text_style("\n".join(m.get("content", "") for m in messages if m.get("role") == "assistant"))


def text_style(text: str) -> tuple[int, int, int, int]:
    """`reply_style` of the assistant messages joined by newlines."""
    # The marks' patterns run only where their characters occur: most replies have no markdown; the
    # ones that start a line look past the first line only where there is one (short replies).
    lines = "\n" in text
    headers = _line_matches(_HEADER, _HEADER_AFTER_NEWLINE, text, lines) if "#" in text else 0
    return word_count(text), headers, _bold_spans(text), _line_matches(_LIST, _LIST_AFTER_NEWLINE, text, lines)


def word_count(text: str) -> int:
    """len(text.split()); for ASCII text without making a string per word."""
    if not text.isascii():
        return len(text.split())
    marks = text.encode("ascii").translate(_SPACE_OR_WORD)
    return marks.count(b"x ") + marks.endswith(b"x")


def _bold_spans(text: str) -> int:
    """len(_BOLD.findall(text))."""
    # A mark's one character first: searching for one character is several times faster than for two.
    stars, underscores = "*" in text and "**" in text, "_" in text and "__" in text
    if stars and underscores:
        return len(_BOLD.findall(text))
    return len(_BOLD_STARS.findall(text)) if stars else len(_BOLD_UNDERSCORES.findall(text)) if underscores else 0


def _line_matches(at_line_start: re.Pattern[str], after_newline: re.Pattern[str], text: str, lines: bool) -> int:
    """len(at_line_start.findall(text)), `after_newline` being its pattern with `^` as a newline;
    `lines`: the text has a newline."""
    first = at_line_start.match(text)
    if not lines:
        return 0 if first is None else 1
    return (first is not None) + len(after_newline.findall(text, first.end() if first else 0))


def style_counts(battles: pd.DataFrame) -> pd.DataFrame:
    """Each side's raw counts: columns length_a, headers_a, ..., length_b, ... (one row per battle)."""
    a = [reply_style(c) for c in battles["conversation_a"]]
    b = [reply_style(c) for c in battles["conversation_b"]]
    rows = [list(x) + list(y) for x, y in zip(a, b, strict=True)]
    return pd.DataFrame(rows, columns=list(STYLE_COUNT_COLUMNS), index=battles.index, dtype=float)


def with_features(battles: pd.DataFrame) -> pd.DataFrame:
    """`battles` with the style counts and the prompt flags its rows lack, counted from its
    conversations: for a table built from conversations alone (tests, a notebook), where the
    index's rows carry them already."""
    added = {}
    if STYLE_COUNT_COLUMNS[0] not in battles:
        added.update(style_counts(battles).to_dict("series"))
    if "coding" not in battles:
        prompts = battles["conversation_a"].map(user_text)
        added["long_prompt"] = prompts.map(is_long).astype(bool)
        added["coding"] = prompts.map(has_code).astype(bool)
    return battles.assign(**added) if added else battles

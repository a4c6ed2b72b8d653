"""Which language a prompt is written in: offline, from Unicode scripts and a few stop-word lists.

FastChat tags battles with polyglot (a C extension and model files); that is too heavy to install
for one column, and it is not needed to split a leaderboard into its main languages. This
detector counts the letters of each script: a script of its own names the language (Hangul:
Korean; kana: Japanese; Han without kana: Chinese; Cyrillic: Russian, or Ukrainian with its own
letters; Arabic: Arabic, or Persian with its own letters; Greek, Hebrew, Thai, Devanagari: Hindi,
...). Latin-script text is told apart by counting common function words of eight languages.

Limits (docs/leaderboard.md): short or mixed text is often "unknown"; Latin-script languages
without a stop-word list here (Polish, Turkish, Vietnamese, ...) come out as "unknown" or,
rarely, as a neighbour; Serbian in Cyrillic reads as Russian; code with English identifiers reads
as English. Names follow polyglot's (the ones FastChat's battles carry): "English", "Chinese", ...
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

UNKNOWN = "unknown"
MIN_LETTERS = 3  # fewer letters than this: "unknown"
MIN_STOPWORDS = 2  # Latin text needs this many function words of one language
MAX_CHARS = 600  # the start of a prompt says its language; a pasted book need not be read whole

# Scripts decided by letters alone: (first code point, last code point, script).
_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0041, 0x024F, "latin"),
    (0x0370, 0x03FF, "greek"),
    (0x0400, 0x04FF, "cyrillic"),
    (0x0530, 0x058F, "armenian"),
    (0x0590, 0x05FF, "hebrew"),
    (0x0600, 0x06FF, "arabic"),
    (0x0900, 0x097F, "devanagari"),
    (0x0980, 0x09FF, "bengali"),
    (0x0B80, 0x0BFF, "tamil"),
    (0x0E00, 0x0E7F, "thai"),
    (0x10A0, 0x10FF, "georgian"),
    (0x1100, 0x11FF, "hangul"),
    (0x3040, 0x30FF, "kana"),
    (0x3400, 0x4DBF, "han"),
    (0x4E00, 0x9FFF, "han"),
    (0xAC00, 0xD7AF, "hangul"),
    (0xF900, 0xFAFF, "han"),
)
# Scripts whose ranges count letters only: Latin's also holds punctuation, signs and controls (÷, ¿).
_LETTERS_ONLY = frozenset({"latin"})
_SCRIPT_LANGUAGE = {
    "greek": "Greek",
    "armenian": "Armenian",
    "hebrew": "Hebrew",
    "devanagari": "Hindi",
    "bengali": "Bengali",
    "tamil": "Tamil",
    "thai": "Thai",
    "georgian": "Georgian",
    "hangul": "Korean",
}
_UKRAINIAN = set("іїєґ")
_PERSIAN = set("پچژگ")
_STOPWORDS: dict[str, frozenset[str]] = {
    "English": frozenset(
        (
            "the and is are of to in it that what how why this with for you can i a an me my do does on be as your from "
            "which write please give explain"
        ).split()
    ),
    "Spanish": frozenset("el la los las de que y es en por para una un cómo qué con se del".split()),
    "French": frozenset("le la les de des et est un une que qui pour dans en pas je vous avec du".split()),
    "German": frozenset("der die das und ist nicht ein eine ich du wie was mit zu den auf für sie".split()),
    "Portuguese": frozenset("o a os as de que e é um uma não para com em do da como você".split()),
    "Italian": frozenset("il lo la gli le di che e è un una non per con sono come cosa del della".split()),
    "Dutch": frozenset("de het een en is van dat niet ik je wat hoe met voor op zijn".split()),
    "Indonesian": frozenset("yang dan di ini itu dengan untuk tidak apa bagaimana saya ada dari".split()),
}
# Letters (or marks) that only some Latin-script languages use; each one counts as a function word.
_MARKS: dict[str, str] = {"Spanish": "ñ¿¡", "German": "ßäöü", "Portuguese": "ãõ", "French": "çèêëœ"}
# Each mark once, with its language (the lists share none): one regex pass finds them all, not a
# count per mark.
_LANGUAGE_OF_MARK = {mark: lang for lang, marks in _MARKS.items() for mark in marks}
_ANY_MARK = re.compile(f"[{''.join(_LANGUAGE_OF_MARK)}]")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
# Keeps ASCII lower-case letters and blanks the rest: split() then gives _WORD's words of lower-case
# ASCII text, without a match object per word.
_ASCII_LETTERS = str.maketrans({c: chr(c) if "a" <= chr(c) <= "z" else " " for c in range(128)})
# Each stop word once, with the languages that use it: one dictionary look-up per word, not eight.
_LANGUAGES_OF: dict[str, tuple[str, ...]] = {}
for _lang, _words in _STOPWORDS.items():
    for _w in _words:
        _LANGUAGES_OF[_w] = (*_LANGUAGES_OF.get(_w, ()), _lang)


def _class_body(first: int, last: int, script: str) -> str:
    """The code points of one range that count for its script, as a regex character class body (the
    Latin range counts its letters only)."""
    points = [c for c in range(first, last + 1) if script not in _LETTERS_ONLY or chr(c).isalpha()]
    spans: list[list[int]] = []
    for c in points:
        if spans and spans[-1][1] == c - 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    return "".join(f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in spans)


_CLASSES: dict[str, str] = {}
for _first, _last, _name in _RANGES:
    _CLASSES[_name] = _CLASSES.get(_name, "") + _class_body(_first, _last, _name)
_RUNS = {script: re.compile(f"[{body}]+") for script, body in _CLASSES.items()}
_ANY_SCRIPT = re.compile(f"[{''.join(_CLASSES.values())}]")


def _script_of(ch: str) -> str:
    code = ord(ch)
    return next(script for first, last, script in _RANGES if first <= code <= last)


def scripts(text: str) -> Counter[str]:
    """How many letters of each script the text holds (in order of first appearance)."""
    return Counter(_script_counts(text))


def _script_counts(text: str) -> dict[str, int]:
    """`scripts` as a plain dict (the detector needs no Counter)."""
    counts: dict[str, int] = {}
    rest = text
    # The regex engine counts, not a Python call per character: find the first letter of a script
    # not yet counted, delete that script's runs and count what went. Removal keeps the order, so
    # scripts come in the order of their first letters, as the detector's ties want.
    while (found := _ANY_SCRIPT.search(rest)) is not None:
        script = _script_of(found.group())
        left = _RUNS[script].sub("", rest)
        counts[script] = len(rest) - len(left)
        rest = left
    return counts


def detect_language(text: str) -> str:
    """The language's English name, or "unknown"."""
    if not isinstance(text, str):
        return UNKNOWN
    text = text[:MAX_CHARS]
    if text.isascii():  # the common case, without looking at each character
        return _latin_language(text)
    counts = _script_counts(unicodedata.normalize("NFC", text))
    if sum(counts.values()) < MIN_LETTERS:
        return UNKNOWN
    if "kana" in counts:
        return "Japanese"
    script = max(counts, key=counts.__getitem__)  # the first of equals, as Counter.most_common(1)
    if script == "han":
        return "Chinese"
    if script == "cyrillic":
        lowered = text.lower()
        return "Ukrainian" if any(ch in lowered for ch in _UKRAINIAN) else "Russian"
    if script == "arabic":
        return "Persian" if any(ch in text for ch in _PERSIAN) else "Arabic"
    if script == "latin":
        return _latin_language(text)
    return _SCRIPT_LANGUAGE.get(script, UNKNOWN)


def _latin_language(text: str) -> str:
    lowered = text.lower()
    ascii_text = text.isascii()
    # ASCII lower-casing maps letters to letters one for one, so the words of the lowered text are
    # the lowered words; otherwise ("İ" lowers to two characters) lower each word as found.
    words = lowered.translate(_ASCII_LETTERS).split() if ascii_text else list(map(str.lower, _WORD.findall(text)))
    if len(words) < MIN_LETTERS and sum(map(len, words)) < MIN_LETTERS:  # each word has a letter
        return UNKNOWN
    hits = dict.fromkeys(_STOPWORDS, 0)
    for languages in filter(None, map(_LANGUAGES_OF.get, words)):
        for lang in languages:
            hits[lang] += 1
    if not ascii_text:  # every mark is a non-ASCII letter
        for mark in _ANY_MARK.findall(lowered):
            hits[_LANGUAGE_OF_MARK[mark]] += 1
    best = max(hits, key=hits.__getitem__)
    top = hits[best]
    if top < MIN_STOPWORDS or list(hits.values()).count(top) > 1:  # too few, or a tie
        return UNKNOWN
    return best

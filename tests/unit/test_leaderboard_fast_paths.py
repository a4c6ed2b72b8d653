"""The fast identity check and language detector give exactly what the plain versions gave.

REFERENCE below is a verbatim copy of the old, straightforward code (before the fast paths):
each fast function is checked against it on simulated arena text, mixed scripts, accented Latin,
names next to digits and letters, case-folding oddities (long s, Kelvin sign, dotted I), empty
strings and non-strings.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections import Counter

import pytest

from webui.leaderboard import language
from webui.leaderboard.simulate import FILLER, ORDINARY, PROMPTS, TRUE
from webui.records import identity
from webui.records.identity import identity_words, word_pattern

# --- REFERENCE: the old implementations, kept as they were ----------------------------------

_REF_TOKEN = re.compile(r"[a-z\u00c0-\u024f]+|[0-9]+")


def ref_find_identity(replies, words):
    patterns = [(identity.first_token(w), re.compile(word_pattern(w), re.IGNORECASE)) for w in words]
    matchers = [(t, p) for w, (t, p) in zip(words, patterns, strict=True) if word_pattern(w) and t]
    texts = [r for r in replies if r]
    if not texts:
        return None
    tokens = set(_REF_TOKEN.findall("\n".join(texts).lower()))
    candidates = [pattern for first, pattern in matchers if first in tokens]
    for reply in texts:
        found = [m.group(0) for m in (p.search(reply) for p in candidates) if m]
        if found:
            return max(found, key=len)
    return None


def ref_script(ch):
    code = ord(ch)
    for first, last, script in language._RANGES:
        if first <= code <= last:
            return script if script != "latin" or ch.isalpha() else None
    return None


def ref_scripts(text):
    return Counter(s for s in map(ref_script, text) if s is not None)


def ref_detect_language(text):
    if not isinstance(text, str):
        return language.UNKNOWN
    text = text[:language.MAX_CHARS]
    if text.isascii():
        return ref_latin_language(text)
    counts = ref_scripts(unicodedata.normalize("NFC", text))
    if sum(counts.values()) < language.MIN_LETTERS:
        return language.UNKNOWN
    if counts["kana"]:
        return "Japanese"
    script, _ = counts.most_common(1)[0]
    if script == "han":
        return "Chinese"
    if script == "cyrillic":
        return "Ukrainian" if language._UKRAINIAN & set(text.lower()) else "Russian"
    if script == "arabic":
        return "Persian" if language._PERSIAN & set(text) else "Arabic"
    if script == "latin":
        return ref_latin_language(text)
    return language._SCRIPT_LANGUAGE.get(script, language.UNKNOWN)


def ref_latin_language(text):
    words = [w.lower() for w in language._WORD.findall(text)]
    if sum(map(len, words)) < language.MIN_LETTERS:
        return language.UNKNOWN
    lowered = text.lower()
    hits = {lang: sum(1 for w in words if w in stop) + sum(lowered.count(ch) for ch in language._MARKS.get(lang, ""))
            for lang, stop in language._STOPWORDS.items()}
    best = max(hits, key=hits.__getitem__)
    ordered = sorted(hits.values(), reverse=True)
    if ordered[0] < language.MIN_STOPWORDS or ordered[0] == ordered[1]:
        return language.UNKNOWN
    return best

# --- generated inputs -----------------------------------------------------------------------


MODELS = [*TRUE, "rare-1b", "command-r", "Qwen2.5-7B", "gpt-4o", "tülu-2", "01-ai", "Yi-34B", "c++bot"]
WORDS = identity_words(MODELS, extra="uc berkeley, .net, ſtral")
PIECES = [*FILLER, *(w for s in ORDINARY for w in s.split()), *(w for ps in PROMPTS.values() for p in ps for w in p.split()),
          "Llama3", "llamas", "GPT-4o", "gpt-40", "CommandR", "Command R", "UCBerkeley", "uc", "Miſtral", "\u212aoala",
          "İnstruct", "SmolLM2-135M", "3llama", "x01.ai", "01.AI", "我是Qwen。", "Tülu", "TULU", "ämistral", "émbër",
          "—", "’", "“", "\n", "  ", "-", "_", "ΣΑΣ", "ΟΔΟΣ'Α", "Гигачат", "їжак", "پچ", "한국", "カタカナ", "ñ", "¿", "ß",
          "Ⅻ", "ª", "µ", "×", "7b", "10.7b", "qwen2.5", "palm", "bard", "google", "Meta AI", "c++", "net", ".NET"]


def texts(seed: int, n: int, size: int) -> list[str]:
    rng = random.Random(seed)
    seps = [" ", " ", " ", "", "\n", ", ", "-", "。"]
    return [("".join(rng.choice(PIECES) + rng.choice(seps) for _ in range(rng.randint(0, size)))) for _ in range(n)]


def test_find_identity_is_unchanged():
    for i, reply_texts in enumerate(texts(1, 3000, 12)):
        rng = random.Random(i)
        replies = [reply_texts, *texts(i + 10_000, rng.randint(0, 3), 8), ""]
        rng.shuffle(replies)
        for words in (WORDS, identity_words(), ["uc berkeley", "mistral", "koala", "instruct"]):
            assert identity.find_identity(replies, words) == ref_find_identity(replies, words), replies


def test_find_identity_on_the_simulated_replies():
    filler = " ".join(FILLER * 20)
    for model in MODELS:
        for reply in (f"I am {model}, a language model.\n{filler}", f"{filler} {model.upper()}", filler,
                      f"{ORDINARY[0]} {filler}", f"## Overview\n**In short:** {ORDINARY[1]}\n- a point\n{filler}"):
            assert identity.find_identity([reply], WORDS) == ref_find_identity([reply], WORDS)
    assert identity.find_identity([], WORDS) is None and identity.find_identity(["", ""], WORDS) is None
    with pytest.raises(TypeError):
        identity.find_identity([b"bytes"], WORDS)


def test_the_non_ascii_lead_is_all_a_case_blind_ascii_letter_adds():
    """The split patterns assume an ASCII letter or digit matches, case-blind, only itself, its
    other case, or non-ASCII characters."""
    every = "".join(map(chr, range(0x110000)))
    for ch in "abcdefghijklmnopqrstuvwxyz0123456789":
        found = set(re.findall(re.escape(ch), every, re.IGNORECASE))
        assert {c for c in found if c.isascii()} == {ch, ch.upper()}


def test_scripts_and_languages_are_unchanged():
    samples = texts(2, 3000, 40) + [p for ps in PROMPTS.values() for p in ps]
    samples += ["", "ok", "x" * 700, "é" * 700, "a" * 599 + "ü", "Какая їжа? " * 80, "e\u0301t\u00e9 et le la les",
                "日本語とカタカナ", "한국 中国 русский", "αβγ אבג", "ab日本", "日本ab", "Il est là, il n'est pas là.",
                "¿Qué? ¡Sí! niño", "Straße und Größe ist", "não é você", "ça va très bien"]
    for text in samples:
        nfc = unicodedata.normalize("NFC", text)
        assert list(language.scripts(nfc).items()) == list(ref_scripts(nfc).items()), text
        assert language.detect_language(text) == ref_detect_language(text), text
    assert {language.detect_language(t) for t in samples} >= {"English", "Chinese", "Japanese", "Russian", "unknown"}
    for value in (None, 3, b"the and is", ["the"]):
        assert language.detect_language(value) == ref_detect_language(value) == language.UNKNOWN  # type: ignore[arg-type]


def test_every_mark_is_non_ascii():
    """The ASCII path skips counting the marks."""
    assert not any(ch.isascii() for marks in language._MARKS.values() for ch in marks)

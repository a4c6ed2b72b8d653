"""The fast identity check, language detector, style counts, prompt flags and vote index rows
give exactly what the plain versions gave.

REFERENCE below is a verbatim copy of the old, straightforward code (before the fast paths):
each fast function is checked against it on simulated arena text, mixed scripts, accented Latin,
names next to digits and letters, case-folding oddities (long s, Kelvin sign, dotted I), empty
strings and non-strings; the rows of the vote index on simulated votes, each also altered at
random into the odd shapes old logs and malformed lines take.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import random
import re
import unicodedata
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from webui.db import columns as db_columns
from webui.leaderboard.stats import elo as elo_module
from webui.leaderboard.stats import style
from webui.leaderboard.votes import features, ingest, language
from webui.leaderboard.votes import rows as vote_rows

try:
    from webui.leaderboard.votes import _rows
except ImportError:  # not built: the tests of the compiled steps skip
    _rows = None  # type: ignore[assignment]
from webui.leaderboard.simulate import CODE_PROMPT, FILLER, ORDINARY, PROMPTS, TRUE, simulate
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
    text = text[: language.MAX_CHARS]
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
    hits = {
        lang: sum(1 for w in words if w in stop) + sum(lowered.count(ch) for ch in language._MARKS.get(lang, ""))
        for lang, stop in language._STOPWORDS.items()
    }
    best = max(hits, key=hits.__getitem__)
    ordered = sorted(hits.values(), reverse=True)
    if ordered[0] < language.MIN_STOPWORDS or ordered[0] == ordered[1]:
        return language.UNKNOWN
    return best


_REF_HEADER = re.compile(r"^#{1,6}\s+\S", re.MULTILINE)
_REF_BOLD = re.compile(r"\*\*[^*\n]+?\*\*|__[^_\n]+?__")
_REF_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.MULTILINE)


def ref_reply_style(messages):
    text = "\n".join(m.get("content", "") for m in messages if m.get("role") == "assistant")
    return len(text.split()), len(_REF_HEADER.findall(text)), len(_REF_BOLD.findall(text)), len(_REF_LIST.findall(text))


_REF_CODE = re.compile(
    r"```|^\s*(?:def |class \w+|import \w|from \w+ import |#include|function\b|public |private |"
    r"(?:const|let|var) \w+ =|for \(|while \(|if \(|SELECT .+ FROM|console\.log|System\.out|print\(|"
    r"return\b.*;|<\w+[^>]*>.*</\w+>)|[{};]\s*$",
    re.MULTILINE | re.IGNORECASE,
)


def ref_has_code(text):
    return bool(_REF_CODE.search(text or ""))


def ref_is_long(text):
    return len((text or "").split()) >= features.LONG_PROMPT_WORDS


def ref_vote_row(record, identity_words=None):
    if record.get("type") not in vote_rows.WINNERS:
        return None
    states, models = record.get("states"), record.get("models")
    if not (isinstance(states, list) and len(states) == 2 and isinstance(models, list) and len(models) == 2):
        return None
    if not all(isinstance(s, dict) for s in states):
        return None
    convs = [ref_openai_messages(s) for s in states]
    row = ref_row(record, states, [ref_public_name(m) for m in models], convs)
    if identity_words is not None and not row["redacted"] and row["base_reason"] is None:
        replies = [m["content"] for c in convs for m in c if m["role"] == "assistant"]
        row["leak"] = ref_find_identity(replies, identity_words) is not None
    return row


def ref_row(record, states, models, convs):
    anony = models[0] in vote_rows.ANONYMOUS_NAMES and models[1] in vote_rows.ANONYMOUS_NAMES
    names = [s.get("model_name") for s in states] if anony else list(models)
    prompts = [m["content"] for m in convs[0] if m["role"] == "user"]
    ip = record.get("ip") or ""
    reasons = [r for s in states for r in s.get("finish_reasons", [])]
    redacted = any(s.get("redacted") for s in states)
    hygiene = record.get("hygiene")
    row = {
        "tstamp": float(record.get("tstamp", 0.0)),
        "model_a": names[0],
        "model_b": names[1],
        "winner": vote_rows.WINNERS[record["type"]],
        "anony": anony,
        "mode": record.get("mode", "battle" if anony else "side_by_side"),
        "battle_id": record.get("battle_id"),
        "question_id": states[0].get("conv_id"),
        "turn": len(prompts),
        "judge": f"arena_user_{ip}",
        "language": ref_detect_language(prompts[0] if prompts else ""),
        "voter": ref_voter_of(record),
        "session": ref_session_key(record),
        "base_reason": ref_base_reason(states, models, names, prompts),
        "redacted": redacted,
        "leak": redacted and isinstance(hygiene, dict) and bool(hygiene.get("identity_leak")),
        "error": "error" in reasons,
        "stopped": "cancelled" in reasons,
        "coding": ref_has_code("\n".join(prompts)),
        "long_prompt": ref_is_long("\n".join(prompts)),
    }
    counts = [ref_reply_style(c) for c in convs]
    row.update(zip(db_columns.STYLE_COUNT_COLUMNS, (*counts[0], *counts[1]), strict=True))
    for side, state in zip("ab", states, strict=True):
        for name in db_columns.SPEED_FIELDS:
            values = state.get(name)
            last = values[-1] if isinstance(values, list) and values else None
            ok = type(last) in (int, float) and math.isfinite(last)
            row[f"{name}_{side}"] = float(last) if ok else None
    for side, state in zip("ab", states, strict=True):
        served = state.get("fingerprint")
        row[f"fingerprint_{side}"] = served if type(served) is str and served != "" else None
    return row


def ref_public_name(name):
    if isinstance(name, str) and name.startswith("<h3>"):
        return name[name.find(": ") + 2 :].removesuffix("\n").removesuffix("</h3>")
    return name


def ref_voter_of(record):
    user, ip = record.get("user") or "", record.get("ip") or ""
    return f"user:{user}" if user else f"ip:{ip}" if ip else ""


def ref_session_key(record):
    extra = record.get("extra")
    return ref_text(extra.get("session")) if isinstance(extra, dict) else ""


def ref_text(value):
    return value if isinstance(value, str) else ""


def ref_base_reason(states, models, names, prompts):
    if (models[0] in vote_rows.ANONYMOUS_NAMES) != (models[1] in vote_rows.ANONYMOUS_NAMES):
        return "invalid"
    if not all(isinstance(n, str) and n for n in names):
        return "invalid"
    if not ref_anony_names_match(models, states):
        return "invalid"
    if not prompts:
        return "invalid"
    if names[0] == names[1]:
        return "same_model"
    return None


def ref_anony_names_match(models, states):
    if models[0] in vote_rows.ANONYMOUS_NAMES:
        return True
    hidden = [s.get("model_name") for s in states]
    return hidden == [None, None] or hidden == list(models)


def ref_names_in(record):
    states, models = record.get("states"), record.get("models")
    found = {s.get("model_name") for s in states if isinstance(s, dict)} if isinstance(states, list) else set()
    found |= {ref_public_name(m) for m in models if isinstance(m, str)} if isinstance(models, list) else set()
    return {n for n in found if isinstance(n, str) and n not in vote_rows.ANONYMOUS_NAMES}


def ref_openai_messages(state):
    roles = state.get("roles") or ["user", "assistant"]
    msgs = state.get("messages", [])[int(state.get("offset", 0)) :]
    return [
        {"role": "user" if m[0] == roles[0] else "assistant", "content": m[1] if isinstance(m[1], str) else ""}
        for m in msgs
        if isinstance(m, (list, tuple)) and len(m) == 2
    ]


def ref_derive(data, start, at_end, known_names, model_names, extra_words):
    end = data.rfind(b"\n") + 1
    records, bad = ref_parse_lines(data[:end], start)
    names = set().union(*(ref_names_in(r) for _, _, r in records)) if records else set()
    words = identity_words([*model_names, *sorted(set(known_names) | names)], extra_words)
    rows = []
    for offset, length, record in records:
        row = ref_vote_row(record, words)
        if row is not None:
            checked = not row["redacted"] and row["base_reason"] is None
            rows.append((offset, length, checked, *ref_sql_values(row)))
    return ingest.Chunk(start, start + end, rows, names, words, bad, at_end and bool(data[end:].strip()))


def ref_sql_values(row):
    out = [row[column] for column in db_columns.ROW_COLUMNS]
    for flag in db_columns.BOOL_COLUMNS:  # since: 0/1, as SQLite keeps them (sqlite3 binds an int sooner)
        out[db_columns.ROW_COLUMNS.index(flag)] = int(out[db_columns.ROW_COLUMNS.index(flag)])
    for position in ingest._TEXT_POSITIONS:
        value = out[position]
        if value is not None and not isinstance(value, str):
            out[position] = json.dumps(value, default=str)
    return out


def ref_parse_lines(data, base):
    records, bad, position = [], 0, 0
    for raw in data.split(b"\n")[:-1]:
        start, position = position, position + len(raw) + 1
        if not raw.strip():
            continue
        record = ingest.parse(raw)
        if record is None:
            bad += 1
        else:
            records.append((base + start, len(raw), record))
    return records, bad


def ref_style_matrix(counts):
    out = []
    for f in db_columns.FEATURES:
        a, b = counts[f"{f}_a"].to_numpy(float), counts[f"{f}_b"].to_numpy(float)
        total = a + b
        out.append(np.divide(a - b, total, out=np.zeros_like(total), where=total > 0))
    diff = np.column_stack(out)
    columns = [diff[:, j].copy() for j in range(diff.shape[1])]
    mean, spread = np.array([c.mean() for c in columns]), np.array([c.std() for c in columns])
    safe = np.where(spread > 0, spread, 1.0)
    return np.where(spread > 0, (diff - mean) / safe, 0.0)


# --- generated inputs -----------------------------------------------------------------------


MODELS = [*TRUE, "rare-1b", "command-r", "Qwen2.5-7B", "gpt-4o", "tülu-2", "01-ai", "Yi-34B", "c++bot"]
WORDS = identity_words(MODELS, extra="uc berkeley, .net, ſtral")
PIECES = [
    *FILLER,
    *(w for s in ORDINARY for w in s.split()),
    *(w for ps in PROMPTS.values() for p in ps for w in p.split()),
    "Llama3",
    "llamas",
    "GPT-4o",
    "gpt-40",
    "CommandR",
    "Command R",
    "UCBerkeley",
    "uc",
    "Miſtral",
    "\u212aoala",
    "İnstruct",
    "SmolLM2-135M",
    "3llama",
    "x01.ai",
    "01.AI",
    "我是Qwen。",
    "Tülu",
    "TULU",
    "ämistral",
    "émbër",
    "—",
    "’",
    "“",
    "\n",
    "  ",
    "-",
    "_",
    "ΣΑΣ",
    "ΟΔΟΣ'Α",
    "Гигачат",
    "їжак",
    "پچ",
    "한국",
    "カタカナ",
    "ñ",
    "¿",
    "ß",
    "Ⅻ",
    "ª",
    "µ",
    "×",
    "7b",
    "10.7b",
    "qwen2.5",
    "palm",
    "bard",
    "google",
    "Meta AI",
    "c++",
    "net",
    ".NET",
]


def texts(seed: int, n: int, size: int) -> list[str]:
    rng = random.Random(seed)
    seps = [" ", " ", " ", "", "\n", ", ", "-", "。"]
    return [("".join(rng.choice(PIECES) + rng.choice(seps) for _ in range(rng.randint(0, size)))) for _ in range(n)]


NOT_BUILT = "the C extensions are not built here (pip install -e . builds them; setup.py)"


def built() -> bool:
    return elo_module._compiled_elo_updates is not None and ingest._compiled_vote_values is not None


@pytest.fixture(params=["compiled", "python"])
def compiled(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The compiled steps (webui/leaderboard/stats/_elo.c, webui/leaderboard/votes/_rows.c), then the
    Python versions that run where those were not built."""
    if request.param == "python":
        monkeypatch.setattr(ingest, "_compiled_vote_values", None)
        monkeypatch.setattr(elo_module, "_compiled_elo_updates", None)
    elif not built():
        pytest.skip(NOT_BUILT)
    return request.param


def test_find_identity_is_unchanged():
    for i, reply_texts in enumerate(texts(1, 3000, 12)):
        rng = random.Random(i)
        replies = [reply_texts, *texts(i + 10_000, rng.randint(0, 3), 8), ""]
        rng.shuffle(replies)
        for words in (
            WORDS,
            identity_words(),
            ["uc berkeley", "mistral", "koala", "instruct"],
            ["tülu", "01.ai", "ſtral"],
            ["llama"],
        ):
            expected = ref_find_identity(replies, words)
            assert identity.find_identity(replies, words) == expected, replies
            assert identity.leaked_identity(replies, words) == (expected is not None), replies


def test_the_json_token_scan_finds_every_first_token_the_parsed_text_holds():
    """Where json_first_tokens answers, it holds every first token that the parsed reply has (an
    escaped character only splits runs: more found, never fewer); it answers None on some lines."""
    word_lists = [tuple(WORDS), tuple(identity_words()), ("late", "kimi", "7b"), ()]
    rng = random.Random(6)
    samples = [json.dumps({"reply": t}).encode() for t in texts(7, 1500, 30)]
    pieces = ["Late", "KIMI", "7b", "x", " ", "\n", '"', "\\", "\u212a", "\u0130", "\u00e9", "\x07", "中", "\U0001f600"]
    samples += [
        json.dumps({"reply": "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))}).encode()
        for _ in range(3000)
    ]
    samples += [json.dumps({"reply": "kimi \u00e9"}, ensure_ascii=False).encode(), b'"\\u12"', b'"kimi \\uzz"']
    samples += [b'"kimi\\', b"kimi \\u0041", b"KIMI \\U212A", b"\\\\u0041 kimi", b""]
    outcomes = set()
    for line in samples:
        try:
            reply = json.loads(line)["reply"]
        except (ValueError, TypeError):
            reply = None  # not a record: only that it answers
        for words in word_lists:
            found = identity.json_first_tokens(line, words)
            outcomes.add("none" if found is None else "some" if found else "empty")
            if found is not None and reply is not None:
                firsts = {first.decode() for first in identity._ascii_firsts(words)}
                assert found >= identity._tokens_of(reply.lower(), words) & firsts, line
    assert outcomes == {"none", "some", "empty"}


def test_find_identity_on_the_simulated_replies():
    filler = " ".join(FILLER * 20)
    for model in MODELS:
        for reply in (
            f"I am {model}, a language model.\n{filler}",
            f"{filler} {model.upper()}",
            filler,
            f"{ORDINARY[0]} {filler}",
            f"## Overview\n**In short:** {ORDINARY[1]}\n- a point\n{filler}",
        ):
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
    samples += [
        "",
        "ok",
        "x" * 700,
        "é" * 700,
        "a" * 599 + "ü",
        "Какая їжа? " * 80,
        "e\u0301t\u00e9 et le la les",
        "日本語とカタカナ",
        "한국 中国 русский",
        "αβγ אבג",
        "ab日本",
        "日本ab",
        "Il est là, il n'est pas là.",
        "¿Qué? ¡Sí! niño",
        "Straße und Größe ist",
        "não é você",
        "ça va très bien",
        "ÇA VA TRÈS BIEN, ŒUVRE",
        "ÄRGER ÜBER GRÖSSE, ẞ und Ö",
        "AÑO ¡SÍ! NIÑO ÃÕ",
    ]
    for text in samples:
        nfc = unicodedata.normalize("NFC", text)
        assert list(language.scripts(nfc).items()) == list(ref_scripts(nfc).items()), text
        assert language.detect_language(text) == ref_detect_language(text), text
    assert {language.detect_language(t) for t in samples} >= {"English", "Chinese", "Japanese", "Russian", "unknown"}
    for value in (None, 3, b"the and is", ["the"]):
        assert language.detect_language(value) == ref_detect_language(value) == language.UNKNOWN  # type: ignore[arg-type]


def test_every_mark_is_non_ascii_and_of_one_language():
    """The ASCII path skips counting the marks; a mark found counts for its one language."""
    marks = [ch for marks in language._MARKS.values() for ch in marks]
    assert not any(ch.isascii() for ch in marks) and len(set(marks)) == len(marks)


STOPWORDS = sorted(set().union(*language._STOPWORDS.values()))


def word_soup(rng: random.Random) -> str:
    """A few stop words of the eight lists (ties are common), in any case, among other words and
    the characters that end a word."""
    others = ["theory", "thee", "th", "x", "i1", "don't", "abcdefghijkl", "abcdefghijklm", "Deutsch"]
    seps = [" ", "  ", ", ", ".", "\n", "-", "'", "1", "_", "?", "\t"]
    words = rng.choices(STOPWORDS + others, k=rng.randint(0, 9))
    cased = [rng.choice([w, w.upper(), w.capitalize()]) for w in words]
    return "".join(w + rng.choice(seps) for w in cased)


def test_the_ascii_path_answers_as_the_reference():
    """_latin_language against the REFERENCE on ASCII text: simulated prompts, word soups of the
    stop-word lists (ties among them), short and empty texts."""
    rng = random.Random(8)
    samples = [p for ps in PROMPTS.values() for p in ps] + ORDINARY + FILLER + [CODE_PROMPT, " ".join(FILLER)]
    samples += [word_soup(rng) for _ in range(20_000)] + texts(9, 2000, 12)
    samples += ["", " ", "a", "I", "ab", "abc", "a b", "a b c", "1 2 3", "the", "THE of", "de la", "the de"]
    samples += ["the of " * 300, "x" * 600, "de la " * 100 + "the " * 100]
    asked = [t for t in samples if t.isascii()]
    answers = Counter()
    for text in asked:
        answer = language.detect_language(text)
        assert answer == language._latin_language(text) == ref_latin_language(text), text
        answers[answer] += 1
    ties = sum(map(tied, asked))
    assert ties > 1000 and set(answers) >= {*language._STOPWORDS, language.UNKNOWN}, answers


def tied(text: str) -> bool:
    """Do two languages share the most stop words, at least MIN_STOPWORDS of them?"""
    words = [w.lower() for w in language._WORD.findall(text)]
    hits = sorted((sum(w in stop for w in words) for stop in language._STOPWORDS.values()), reverse=True)
    return hits[0] >= language.MIN_STOPWORDS and hits[0] == hits[1]


def test_the_script_count_counts_as_the_reference():
    """Every code point of the BMP (and two beyond) alone, all of them at once, and mixtures, in
    the order of first appearance."""
    every = [*map(chr, range(0x10000)), "\U0001f600", "\U00020000"]
    for ch in every:
        assert language.scripts(ch) == ref_scripts(ch), hex(ord(ch))
    counted = [ch for ch in every if ref_scripts(ch)]
    rng = random.Random(10)
    samples = ["".join(every), "".join(reversed(every)), ""]
    samples += ["".join(rng.choices(counted + every[:0x250], k=rng.randint(0, 60))) for _ in range(2000)]
    for text in samples:
        assert list(language.scripts(text).items()) == list(ref_scripts(text).items())


# --- vote index rows ------------------------------------------------------------------------

MARKDOWN = [
    "#",
    "## ",
    "######",
    "####### ",
    "-",
    "- ",
    "* ",
    "+ ",
    "1. ",
    "12) ",
    "3.",
    "**",
    "__",
    "**bold**",
    "__b__",
    "\n",
    "\n\n",
    "\t",
    "\r",
    "\x0b",
    "\x1c",
    "\x85",
    "\u00a0",
    "\u2028",
    "\u3000",
    " ",
    "  ",
    "x",
    "é",
    "日本",
]
CODE = [
    "```",
    "def f(x):",
    "class X",
    "import os",
    "from a import b",
    "#include <x>",
    "function",
    "public ",
    "private ",
    "const a = 1",
    "let b =",
    "for (",
    "while (",
    "if (",
    "SELECT a FROM b",
    "ſelect a from b",
    "console.log",
    "System.out",
    "print(",
    "return 1;",
    "<b>x</b>",
    "{",
    "}",
    ";",
    " ",
    "\n",
    "\t",
    "\u00a0",
    "x",
    "K",
    "İf (",
]


def pieces(rng: random.Random, choices: list[str], size: int) -> str:
    return "".join(rng.choice(choices) for _ in range(rng.randint(0, size)))


def ref_elo_updates(rating, a, b, score, k, scale, base):
    rating = list(rating)
    for i, j, s in zip(a.tolist(), b.tolist(), score.tolist(), strict=True):
        old_i, old_j = rating[i], rating[j]
        change = k * (s - 1.0 / (1.0 + base ** ((old_j - old_i) / scale)))
        rating[i], rating[j] = old_i + change, old_j - change
    return rating


def test_the_online_elo_is_unchanged(compiled: str):
    """To the last bit, on long runs where ratings drift far apart, with other steps and bases,
    from codes of another integer type, and on no battles."""
    rng = np.random.default_rng(11)
    for n, count, k, scale, base in (
        (2, 1, 4.0, 400.0, 10.0),
        (9, 60_000, 4.0, 400.0, 10.0),
        (40, 20_000, 32.0, 173.0, 2.5),
    ):
        a = rng.integers(0, n, count)
        b = (a + rng.integers(1, n, count)) % n if n > 1 else a
        score = rng.choice([0.0, 0.5, 1.0], count, p=[0.2, 0.1, 0.7])  # skewed: ratings spread wide
        start = list(rng.normal(1000.0, 300.0, n))
        got = elo_module.elo_updates(start, a, b, score, k, scale, base)
        assert got == ref_elo_updates(start, a, b, score, k, scale, base)
        assert elo_module.elo_updates(start, a.astype(np.int32), b.astype(np.int16), score, k, scale, base) == got
    nothing = np.zeros(0, np.int64)
    assert elo_module.elo_updates([1000.0, 1010.0], nothing, nothing, np.zeros(0)) == [1000.0, 1010.0]


def test_the_compiled_online_elo_refuses_what_it_cannot_rate():
    if elo_module._compiled_elo_updates is None:
        pytest.skip(NOT_BUILT)
    elo = elo_module._compiled_elo_updates
    one, two = np.array([0]), np.array([2])
    with pytest.raises(IndexError, match="model 2 of 2"):
        elo([1000.0, 1000.0], one, two, np.array([1.0]), 4.0, 400.0, 10.0)
    with pytest.raises(ValueError, match="differ in length"):
        elo([1000.0, 1000.0], one, np.array([1, 0]), np.array([1.0]), 4.0, 400.0, 10.0)
    with pytest.raises(TypeError, match="8-byte integers"):
        elo([1000.0, 1000.0], one.astype(np.int32), one, np.array([1.0]), 4.0, 400.0, 10.0)
    with pytest.raises(OverflowError):
        elo([0.0, 1e6], np.array([0]), np.array([1]), np.array([1.0]), 4.0, 1.0, 10.0)
    with pytest.raises(OverflowError):
        ref_elo_updates([0.0, 1e6], np.array([0]), np.array([1]), np.array([1.0]), 4.0, 1.0, 10.0)


@pytest.mark.parametrize("kind", [int, float])
def test_the_style_matrix_is_unchanged(kind: type):
    """Standardised in place, a column at a time, from counts as the index stores them (integers)
    or as conversations give them (floats): the very same numbers, a constant feature all 0."""
    rng = np.random.default_rng(3)
    columns = [f"{f}_{side}" for side in ("a", "b") for f in db_columns.FEATURES]
    counts = pd.DataFrame(rng.integers(0, 40, (5_000, len(columns))), columns=columns).astype(kind)
    counts.loc[rng.random(5_000) < 0.3, ["headers_a", "headers_b"]] = 0  # both 0: a difference of 0
    counts["bold_a"], counts["bold_b"] = 9, 3  # the same difference in every battle: no spread
    x = style.style_matrix(counts)
    assert np.array_equal(x, ref_style_matrix(counts)) and not x[:, 2].any()
    assert np.array_equal(style.style_differences(counts), battles_differences(counts))


def battles_differences(counts):
    return np.column_stack(
        [
            np.divide(a - b, a + b, out=np.zeros(len(a)), where=a + b > 0)
            for a, b in (
                (counts[f"{f}_a"].to_numpy(float), counts[f"{f}_b"].to_numpy(float)) for f in db_columns.FEATURES
            )
        ]
    )


def test_style_counts_and_prompt_flags_are_unchanged():
    rng = random.Random(7)
    samples = [pieces(rng, MARKDOWN + CODE, 14) for _ in range(20_000)] + texts(3, 1000, 30)
    samples += [
        "#\n# a",
        "-\n- x",
        "- \n- x",
        "\n- x",
        "1.\n2. y",
        "## a\n## b",
        "a\n\n   - b",
        "",
        CODE_PROMPT,
        "w " * 399,
        "w " * 400,
        "w" + " w" * 399,
        "w" + " w" * 398,
        "w\u3000" * 400,
    ]
    samples += [c + w for c in map(chr, range(128)) for w in ("", "a", "a" + c + "b")]
    for text in samples:
        conversation = [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": text},
            {"role": "assistant", "content": text[::-1]},
        ]
        assert features.reply_style(conversation) == ref_reply_style(conversation), text
        assert features.text_style(text) == ref_reply_style(conversation[1:2]), text  # one line or several
        assert features.word_count(text) == len(text.split()), text
        assert features.word_count(text + "\u2003" + text) == len((text + "\u2003" + text).split()), text
        assert features.has_code(text) == ref_has_code(text), text
        assert features.is_long(text) == ref_is_long(text), text
    assert features.has_code(None) is False and features.is_long(None) is False  # type: ignore[arg-type]
    spaces = "".join(c for c in map(chr, range(0x3100)) if c.isspace())
    latin = "".join(map(chr, range(256)))  # one byte a character: the compiled version's table
    for text in (
        spaces,
        "x" + spaces + "y" + spaces + "\U0001f600",
        "\U0001f600 \u0085\u00a0é",
        latin * 2,
        "a\u0085b\xa0cé",
    ):
        assert features.word_count(text) == len(text.split()), text


def _reply(r, state, k, rng):
    set_text(state, -1, pieces(rng, MARKDOWN + PIECES, 40))


def _prompt(r, state, k, rng):
    prompt = rng.choice(
        [
            pieces(rng, CODE + PIECES, 20),
            " ".join(rng.choices(FILLER, k=rng.randint(390, 410))),
            rng.choice([p for ps in PROMPTS.values() for p in ps]),
            "",
        ]
    )
    for s in r["states"]:
        set_text(s, 0, prompt)


def _redacted(r, state, k, rng):
    state["redacted"] = True
    r["hygiene"] = rng.choice([{"identity_leak": True}, {"identity_leak": False}, "x", None])


def _models(r, state, k, rng):
    r["models"] = rng.choice(
        [
            ["Model A", "Model B"],
            ["", "x"],
            ["<h3>Model A: granite-3-8b</h3>\n", "<h3>B: x</h3>"],
            [r["states"][0].get("model_name")] * 2,
            [["x"], 3],
            [None, None],
            ["a"],
        ]
    )


def _named(r, state, k, rng):
    r["models"] = [s.get("model_name") for s in r["states"]]
    for s in r["states"]:
        if rng.random() < 0.8:
            s.pop("model_name", None)  # a named battle's states without the names


def _model_name(r, state, k, rng):
    state["model_name"] = rng.choice([None, "", 7, r["states"][1 - k].get("model_name"), "Qwen2.5-7B", "Model A"])


def _reasons(r, state, k, rng):
    state["finish_reasons"] = rng.choice([["error"], ["cancelled"], [], ["stop", "error"], "error", {"error": 1}, None])


def _speed(r, state, k, rng):
    odd_values = [[], [2], [True], [float("inf")], [float("nan")], [10**400], ["3"], "x", None, [0.5, None], [1.5, 2.5]]
    state[rng.choice(db_columns.SPEED_FIELDS)] = rng.choice(odd_values)


def _roles(r, state, k, rng):
    state["roles"] = ["Human", "Assistant"]
    state["messages"] = [
        [state["roles"][i % 2], m[1]] if isinstance(m, list) and len(m) == 2 else m
        for i, m in enumerate(state["messages"])
    ]


def _odd_message(r, state, k, rng):
    state["messages"].insert(
        rng.randint(0, 2),
        rng.choice([["user", "x", 1], ["assistant", None], "text", ["assistant", 5], ["Human", "odd role"], []]),
    )


def _offset(r, state, k, rng):
    state["offset"] = rng.choice([1, 2, "1", 0, "a"])


def _type(r, state, k, rng):
    r["type"] = rng.choice(["chat", "upvote", "leftvote", "bothbad_vote", "tievote", "rightvote"])


def _missing(r, state, k, rng):
    r.pop(rng.choice(["tstamp", "ip", "extra", "mode", "battle_id", "models", "states"]), None)


def _voter(r, state, k, rng):
    r["extra"], r["user"] = rng.choice(["s", {"session": 5}, {}, {"session": "k"}]), rng.choice(["", "u1", None])


def _states(r, state, k, rng):
    r["states"] = rng.choice([r["states"][:1], [r["states"][0], "x"], [*r["states"], r["states"][0]], "states"])


def _messages(r, state, k, rng):
    state["messages"] = rng.choice([[], [["assistant", "only a reply"]], None])


def _leak(r, state, k, rng):
    set_text(state, -1, f"{pieces(rng, PIECES, 5)} I am {rng.choice(MODELS)}. {pieces(rng, PIECES, 5)}")


def _not_text(r, state, k, rng):
    r[rng.choice(["battle_id", "mode"])] = rng.choice([["not", "text"], {"x": 1}, 5, None])


def _fingerprint(r, state, k, rng):
    state["fingerprint"] = rng.choice(["", "1a2b3c4d5e6f", 7, None, ["x"], {"id": "x"}])


def _tstamp(r, state, k, rng):
    r["tstamp"] = rng.choice([0, 1.5, "17", True, "soon"])


CHANGES = [
    _reply,
    _prompt,
    _redacted,
    _models,
    _named,
    _model_name,
    _reasons,
    _roles,
    _odd_message,
    _offset,
    _type,
    _missing,
    _voter,
    _states,
    _messages,
    _leak,
    _not_text,
    _tstamp,
    _fingerprint,
    _speed,
]


def odd(record: dict, rng: random.Random) -> dict:
    """A simulated vote altered at random: shapes that old, hand-made or damaged logs hold."""
    r = copy.deepcopy(record)
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(2)
        states = r.get("states")
        if not (
            isinstance(states, list)
            and len(states) == 2
            and all(isinstance(s, dict) and isinstance(s.get("messages"), list) for s in states)
        ):
            break  # past changing
        rng.choice(CHANGES)(r, states[k], k, rng)
    # No longer the record the app wrote: without what it kept from then, its rows are counted from
    # its text, which the reference does (tests/unit/leaderboard/votes/test_written_features.py tests the kept ones).
    r.pop("features", None)
    if isinstance(r.get("hygiene"), dict):
        r["hygiene"].pop("identity_words", None)
    return r


def set_text(state: dict, position: int, text: str) -> None:
    messages = state["messages"]
    if (
        isinstance(messages, list)
        and messages
        and isinstance(messages[position], list)
        and len(messages[position]) == 2
    ):
        messages[position][1] = text


@pytest.fixture(scope="module")
def odd_records(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    logs = tmp_path_factory.mktemp("simulated")
    simulate(logs, 300, seed=4, days=2)
    records = [json.loads(line) for path in sorted(logs.glob("*-conv.json")) for line in path.read_text().splitlines()]
    rng = random.Random(11)
    return records + [odd(r, rng) for r in records for _ in range(4)]


def typed(values) -> list:
    """Values with their types: True == 1 and 1 == 1.0, but a column must not change its type."""
    return [(type(v), v) for v in values]


def test_vote_rows_are_unchanged(odd_records: list[dict]):
    raised = 0
    for record in odd_records:
        for words in (None, WORDS):
            try:
                expected = ref_vote_row(copy.deepcopy(record), words)
            except Exception:  # a field of the wrong type: now a vote that does not count
                raised += 1
                row = vote_rows.vote_row(record, words)
                assert row is not None and row["base_reason"] == "invalid", record
                assert list(row) == list(db_columns.ROW_COLUMNS) and all(
                    v is None or isinstance(v, (str, int, float, bool)) for v in row.values()
                ), row
                continue
            row = vote_rows.vote_row(record, words)
            assert (row is None) == (expected is None)
            if row is not None:
                assert list(row) == list(expected) and typed(row.values()) == typed(expected.values()), record
                if row["base_reason"] is None and not row["redacted"]:
                    assert vote_rows.identity_leak(record, WORDS) == (
                        ref_find_identity(
                            [
                                m["content"]
                                for s in record["states"]
                                for m in ref_openai_messages(s)
                                if m["role"] == "assistant"
                            ],
                            WORDS,
                        )
                        is not None
                    )
    assert 0 < raised < len(odd_records) // 4


def test_the_compiled_vote_row_answers_as_python_or_leaves_it_to_python(odd_records: list[dict]):
    """webui/leaderboard/votes/_rows.c: where it answers, the values, replies and names the Python path
    gives; it answers for every vote as we log them, and leaves odd shapes to Python."""
    if not built():
        pytest.skip(NOT_BUILT)
    answered = left = 0
    plain = len(odd_records) // 5  # the fixture's simulated votes come first, unaltered
    for i, record in enumerate(odd_records):
        fast = ingest._compiled_vote_values(copy.deepcopy(record))
        unchecked = vote_rows.unchecked_vote_row(record)
        if fast is None:
            assert i >= plain, record
            left += 1
            continue
        answered += 1
        values, replies, names = fast
        assert unchecked is not None, record
        row, expected_replies = unchecked
        expected = list(ingest.sql_values(row))
        assert typed(values) == typed(expected), record
        assert replies == expected_replies and type(replies) is type(expected_replies), record
        assert names == vote_rows.names_in(record), record
    assert answered > plain and left > len(odd_records) // 20


def test_the_compiled_name_scan_finds_what_the_expression_finds():
    """webui/leaderboard/votes/_rows.c's model_names_in against ingest._python_model_names_in, on log
    bytes cut at random places and on soups of the pieces that trip a scanner."""
    if not built():
        pytest.skip(NOT_BUILT)
    lines = [json.dumps(r).encode() for r in simulated_votes()]
    lines += [json.dumps(r, separators=(",", ":"), ensure_ascii=False).encode() for r in simulated_votes()[:50]]
    data = b"\n".join(lines)
    rng = random.Random(5)
    for _ in range(300):
        start = rng.randrange(len(data))
        piece = data[start : start + rng.randint(0, 5000)]
        assert _rows.model_names_in(piece) == ingest._python_model_names_in(piece)
    parts = [
        b'"model_name"',
        b":",
        b" ",
        b"\t",
        b"\n",
        b'"',
        b"\\",
        b'\\"',
        b"x",
        b"\xc3\xa9",
        b"model_name",
        b"\\u00e9",
    ]
    for _ in range(3000):
        soup = b"".join(rng.choices(parts, k=rng.randint(0, 30)))
        assert _rows.model_names_in(soup) == ingest._python_model_names_in(soup), soup
    assert _rows.model_names_in(b'{"model_name" :\t"a\\"b", "model_name": 3, "model_name":"c"}') == {b'a\\"b', b"c"}
    assert _rows.model_names_in(bytearray(b'"model_name":"d"')) == {b"d"}


def test_logged_names_are_the_names_the_lines_give(tmp_path, compiled: str):
    path = tmp_path / "2026-01-01-conv.json"
    lines = [
        b'{"type": "chat", "states": [{"model_name": "caf\\u00e9-7b"}, {"model_name": "Model A"}]}',
        b'{"model_name": ""}',
        b'not a record, "model_name": "ghost-1b"',
        b'{"model_name": "bad \\x escape"}',
        b'{"model_name":"tail-2b"}',
    ]
    path.write_bytes(b"\n".join(lines) + b"\n" + b'{"model_name": "torn')
    assert ingest.logged_names(path, 0, 1) == {"café-7b", "ghost-1b", "tail-2b"}
    second = len(lines[0]) + 1
    assert ingest.logged_names(path, second, second + 1) == {"ghost-1b", "tail-2b"}
    assert ingest.logged_names(path, path.stat().st_size, path.stat().st_size + 1) == set()
    assert ingest.logged_names(tmp_path / "gone.json", 0, 10) == set()


def simulated_votes() -> list[dict]:
    return [json.loads(line) for line in _simulated_lines()]


@functools.lru_cache(maxsize=1)
def _simulated_lines() -> tuple[str, ...]:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        simulate(Path(folder), 200, seed=6, days=2)
        return tuple(
            line for path in sorted(Path(folder).glob("*-conv.json")) for line in path.read_text().splitlines()
        )


class Text(str):
    """Text of another type than str, which only the Python path writes as the index keeps it."""


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.update(mode=Text("battle")),
        lambda r: r["states"][0]["messages"][1].__setitem__(1, Text("a reply")),
        lambda r: r["states"][0].update(model_name=Text("x")),
        lambda r: r["states"][0].update(messages=tuple(r["states"][0]["messages"])),
        lambda r: r["states"][1].update(offset=-1),
        lambda r: r["states"][1].update(offset=2**70),
        lambda r: r["states"][1].update(ttft_s=[3]),
        lambda r: r.update(models=["<h3>Model A: x</h3>", "<h3>Model B: y</h3>"]),
        lambda r: r.update(tstamp=1),
        lambda r: r.update(ip=0),
        lambda r: r.update(type=Text("leftvote")),
        lambda r: r.update(states=tuple(r["states"])),
    ],
)
def test_the_compiled_vote_row_leaves_odd_shapes_to_python(odd_records: list[dict], change):
    if not built():
        pytest.skip(NOT_BUILT)
    record = copy.deepcopy(odd_records[0])
    assert ingest._compiled_vote_values(record) is not None
    change(record)
    assert ingest._compiled_vote_values(record) is None
    assert ingest._compiled_vote_values(list(record.items())) is None


def test_vote_index_chunks_are_unchanged(odd_records: list[dict], compiled: str):
    rng = random.Random(12)
    lines = []
    for record in odd_records:
        try:
            ref_vote_row(copy.deepcopy(record), WORDS)
        except Exception:  # test_vote_rows_are_unchanged checks these
            continue
        lines.append(json.dumps(record, ensure_ascii=rng.random() < 0.5).encode())
        if rng.random() < 0.05:
            lines.append(rng.choice([b"{", b"[]", b'{"type": 3}', b"null", b"", b"  ", b"\t", b'{"type": "chat"}']))
    data = b"\n".join(lines) + b'\n{"torn": '
    start, seen = 0, 0
    while start < len(data) - 10:
        size = rng.randint(1, 60_000)
        piece = data[start : start + size]
        at_end = start + size >= len(data)
        for known, models, extra in (([], (), ""), (["late-7b", "rare-1b"], ("ember-7b",), "foo, uc berkeley")):
            chunk = ingest.derive(piece, 100 + start, at_end, known, models, extra)
            expected = ref_derive(piece, 100 + start, at_end, known, models, extra)
            assert chunk.rows == expected.rows and [typed(r) for r in chunk.rows] == [typed(r) for r in expected.rows]
            assert chunk == expected
            seen += len(chunk.rows) if known else 0
        start += max(piece.rfind(b"\n") + 1, 1)
    assert seen > len(odd_records) // 2


@pytest.mark.parametrize("where", ["hidden name", "public name"])
def test_an_overlong_model_name_makes_an_unreadable_vote_on_either_path(where: str, compiled: str, tmp_path):
    """A name longer than the models file allows (a damaged or hostile log: 10 MB of it) is no board
    row: the vote is invalid, the name kept nowhere (not in the row, not among the identity words),
    and the compiled path leaves the vote to Python, which says so, rather than answering apart."""
    from webui.leaderboard.board.build import BoardOptions, board_from_index
    from webui.leaderboard.votes.index import VoteIndex
    from webui.types import MODEL_NAME_MAX_CHARS

    longest = "m" * MODEL_NAME_MAX_CHARS
    huge = "x" * (MODEL_NAME_MAX_CHARS + 1) if where == "hidden name" else "y" * 10_000_000
    records = simulated_votes()[:40]
    record = copy.deepcopy(next(r for r in records if r["models"] == ["", ""]))
    if where == "hidden name":
        record["states"][0]["model_name"] = huge
    else:  # a named vote (side by side) names its models in public too
        record["models"] = [huge, record["states"][1]["model_name"]]
        record["states"][0]["model_name"] = huge
    row = vote_rows.vote_row(record, WORDS)
    assert row is not None and row["base_reason"] == "invalid" and huge not in (row["model_a"], row["model_b"])
    assert huge not in vote_rows.names_in(record)
    if compiled == "compiled":
        assert ingest._compiled_vote_values(copy.deepcopy(record)) is None  # Python's to decide
    at_cap = copy.deepcopy(record)
    at_cap["states"][0]["model_name"] = longest
    if where == "public name":
        at_cap["models"][0] = longest
    assert vote_rows.vote_row(at_cap, WORDS)["base_reason"] is None  # the longest allowed name counts
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = [json.dumps(r) for r in [*records, record]]
    (logs / "2026-01-01-conv.json").write_text("\n".join(lines) + "\n")
    assert huge not in ingest.logged_names(logs / "2026-01-01-conv.json", 0, 1)
    board = board_from_index(VoteIndex(logs, tmp_path / "index.sqlite3"), BoardOptions(rounds=0, min_battles=0))
    assert board.dropped.get("invalid") == 1 and board.votes_read == len(records) + 1
    assert max(len(name) for name in board.table["model"]) < MODEL_NAME_MAX_CHARS

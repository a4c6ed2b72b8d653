"""Replies that give away which model wrote them: the identity words, and the check itself.

Votes are stamped with this check when they are written (so that a redacted vote still carries
it), and the leaderboard re-runs it over the text with today's word list; both use this module.

Words and names match as whole words, case-insensitively: "ember" (of a model named ember-7b)
must not match "Remember to drink water", nor "nous" (nous-hermes) "poisonous". FastChat matches
substrings; that silently drops ordinary replies, and which ones depends on the topic and on the
models in the arena, which biases the ratings. Rules, in order:

* a match may not start right after a letter or digit (Latin letters, accented ones included;
  Chinese or Japanese text next to a name does not count as a letter, since it has no spaces);
* a name ending in a letter may be followed by digits but not by a letter ("llama3" and
  "Qwen2.5" match "llama" and "qwen"; "llamas" does not match "llama");
* a name ending in a digit may be followed by letters but not by a digit ("gpt-4o" matches
  "gpt-4"; "gpt-40" does not);
* inside a multi-part name, "-", "_", spaces or nothing separate the parts ("command-r",
  "Command R" and "CommandR" all match the name command-r; so do "SmolLM2 135M Instruct" and
  "SmolLM2-135M-Instruct").

A model also gives itself away by its name's stem, the name less its size, version and tuning
("Glacier" of glacier-1b, "Atlas" of atlas-70b-instruct), but a stem is often an ordinary word
("the Atlas mountains", "This is rare"). So a stem counts only where a reply introduces itself by
it: written as a name (a capital first letter), right after "I am", "I'm", "This is", "My name
is" or "Call me", or as "As Glacier," (`self_words`). "I'm late" and "Atlas holds up the sky" stay
ordinary text; a lower-case "i'm glacier" is missed, the price of the first.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence

# Words that give away who is answering. FastChat's list (minus its canned error strings, which our
# finish reasons cover) plus the families of the models people run today. Matched as whole words
# (see the module docstring), so a word inside an ordinary word never counts.
DEFAULT_IDENTITY_WORDS: tuple[str, ...] = (
    "vicuna",
    "lmsys",
    "koala",
    "uc berkeley",
    "open assistant",
    "laion",
    "chatglm",
    "chatgpt",
    "gpt-3",
    "gpt-4",
    "gpt-5",
    "openai",
    "anthropic",
    "claude",
    "bard",
    "palm",
    "lamda",
    "google",
    "llama",
    "qianwan",
    "alibaba",
    "mistral",
    "mixtral",
    "zhipu",
    "keg lab",
    "01.ai",
    "ai2",
    "tülu",
    "tulu",
    "qwen",
    "gemma",
    "gemini",
    "smollm",
    "hugging face",
    "huggingface",
    "deepseek",
    "meta ai",
    "microsoft",
)

_LETTER = "a-z\u00c0-\u024f"  # ASCII and accented Latin letters (lower case: matching ignores case)
_SEPARATORS = re.compile(r"[\s\-_]+")


def family_of(name: str) -> str | None:
    """The family a model name adds as a word of its own: its first part ("smollm2" of
    "SmolLM2-135M-Instruct"), only when that part looks like a coined name (a digit in it, or a
    capital inside it: "SmolLM2", "DeepSeek", "OLMo") and has at least four characters. A plain
    lower-case word ("command" of command-r, "solar", "falcon", "granite", "tiny") cannot be told
    from English without a dictionary, so it is not added alone; the whole name still matches."""
    first = _SEPARATORS.split(name.strip())[0] if name.strip() else ""
    if len(first) < 4 or not any(ch.isalpha() for ch in first):
        return None
    coined = any(ch.isdigit() for ch in first) or any(ch.isupper() for ch in first[1:])
    return first.lower() if coined else None


# A name's parts that say its size, version or tuning rather than which model it is: "1b", "70B",
# "8x7b", "v2", "3.1", "instruct", "(base)" (compared without brackets, in lower case)
_SUFFIX = re.compile(
    r"(?:\d+(?:\.\d+)?[kmbt]|\d+x\d+(?:\.\d+)?[kmbt]|v?\d+(?:\.\d+)*[a-z]?|a\d+(?:\.\d+)?b|instruct|chat|base|it"
    r"|sft|dpo|rlhf|preview|latest|hf|gguf|awq|gptq|fp\d+|bf16|int\d|q\d\w*)"
)
SELF = "self:"  # a word that counts only as a self-introduction (see the module docstring)
_INTRODUCTIONS = ("i am", "i'm", "i\u2019m", "this is", "my name is", "call me")


def name_stem(name: str) -> str | None:
    """The part of a model name that says which model it is, lower case ("glacier" of glacier-1b,
    "nous hermes" of nous-hermes-2); None when nothing is left or it is the whole name (the name
    itself is an identity word already)."""
    parts = [p for p in _SEPARATORS.split(name.strip().lower()) if p]
    whole = " ".join(parts)
    while parts and _SUFFIX.fullmatch(parts[-1].strip("()[]")):
        parts.pop()
    stem = " ".join(parts)
    return stem if len(stem) >= 3 and stem != whole and any(ch.isalpha() for ch in stem) else None


def self_words(name: str) -> tuple[str, ...]:
    """The self-introduction word of a model name (`SELF` + its stem), or none."""
    stem = name_stem(name)
    return (SELF + stem,) if stem else ()


def identity_words(model_names: Iterable[str] = (), extra: str | Sequence[str] = "") -> tuple[str, ...]:
    """The default words, every model name, each name's family when it looks coined (see
    `family_of`), its stem as a self-introduction (`self_words`), and any extra comma-separated
    words."""
    words = list(DEFAULT_IDENTITY_WORDS)
    for name in model_names:
        lowered = name.strip().lower()
        if not lowered:
            continue
        words.append(lowered)
        family = family_of(name)
        if family:
            words.append(family)
        words.extend(self_words(name))
    extras = extra.split(",") if isinstance(extra, str) else list(extra)
    words.extend(w.strip().lower() for w in extras if w.strip())
    return tuple(dict.fromkeys(words))


# The rules' own version, part of a word list's (`word_list_version`): a change to how words match
# (this module's patterns) must make every stored check count as made with another list.
IDENTITY_RULES = 1


def word_list_version(words: Iterable[str]) -> str:
    """Which word list (and matching rules) a check was made with, as a vote record keeps it
    (`hygiene.identity_words`): 16 hex characters of a hash of the set of words. Equal lists give
    equal versions whatever their order or repeats, so the leaderboard can reuse a check made when
    the vote was written wherever its own list is the same, and check again elsewhere."""
    text = json.dumps([IDENTITY_RULES, sorted(set(words))])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def word_pattern(word: str) -> str:
    """The regular expression for one word or name (see the module docstring for the rules)."""
    if word.startswith(SELF):
        return _self_pattern(word[len(SELF) :])
    parts = [re.escape(p) for p in _SEPARATORS.split(word.strip().lower()) if p]
    if not parts:
        return ""
    body = r"[\s\-_]*".join(parts)
    last = parts[-1][-1]
    after = r"(?![0-9])" if last.isdigit() else rf"(?![{_LETTER}])" if last.isalpha() else ""
    before = rf"(?<![{_LETTER}0-9])" if parts[0][0].isalnum() else ""
    return before + body + after


def _self_pattern(stem: str) -> str:
    """A stem introduced as a name: "I am Glacier", "This is Glacier", "As Glacier," (matched case-
    blind but for the stem's first letter, which must be a capital). Each introduction is a
    lookbehind of its own (those must be of fixed width), so a match starts at the stem."""
    parts = [re.escape(p) for p in _SEPARATORS.split(stem.strip().lower()) if p]
    if not parts or not parts[0][0].isalpha():
        return ""
    first, rest = parts[0][0], parts[0][1:]
    body = rf"(?-i:{first.upper()}){rest}" + "".join(rf"[\s\-_]*{p}" for p in parts[1:])
    after = r"(?![0-9])" if parts[-1][-1].isdigit() else rf"(?![{_LETTER}])"
    said = (r"\s".join(re.escape(word) for word in i.split()) for i in _INTRODUCTIONS)
    introduced = "|".join(rf"(?<=\b{words}\s)" for words in said)
    return rf"(?:(?:{introduced}){body}{after}|(?<=\bas\s){body}(?=,))"


_TOKEN = re.compile(rf"[{_LETTER}]+|[0-9]+")


def first_token(word: str) -> str:
    """The run of letters (or digits) that every match of `word` starts with ("" if none)."""
    if word.startswith(SELF):
        word = word[len(SELF) :]  # a match starts at the stem
    tokens = _TOKEN.findall(word.strip().lower())
    return tokens[0] if tokens else ""


_Variants = tuple[re.Pattern[str], ...]


@functools.lru_cache(maxsize=32)
def _matchers(words: tuple[str, ...]) -> tuple[tuple[str, _Variants, _Variants], ...]:
    """(the first token of the word, its patterns for ASCII text, for any text) per word (see
    `_variants`). A match starts with a whole run of letters (or digits) equal to that token, so
    whether the text has that token decides which words can match at all."""
    out = []
    for word in words:
        pattern, token = word_pattern(word), first_token(word)
        if pattern and token:
            out.append((token, *_variants(pattern)))
    return tuple(out)


def _variants(pattern: str) -> tuple[_Variants, _Variants]:
    """(for ASCII text, for any text): patterns whose matches together are exactly `pattern`'s.
    Why: led by a lookbehind, `pattern` is tried at every position (30x slower); a pattern led by a
    case-sensitive literal is scanned for fast. So each variant takes its first character as one
    of: the first letter in lower case, in upper case, or any non-ASCII character (a case-blind
    ASCII letter matches nothing else), then a lookbehind checks that the letter matches it and that
    no letter or digit precedes it. The non-ASCII variant cannot match ASCII text."""
    before = rf"(?<![{_LETTER}0-9])"
    first = pattern[len(before) : len(before) + 1]
    if not pattern.startswith(before) or not (first.isascii() and first.isalnum()):
        single = (re.compile(pattern, re.IGNORECASE),)
        return single, single
    rest = rf"(?<={before}{first}){pattern[len(before) + 1 :]}"
    # (Non-ASCII as a negated class: a range up to U+10FFFF takes the compiler a walk over it.)
    leads = dict.fromkeys((first.lower(), first.upper(), r"[^\x00-\x7f]"))
    compiled = tuple(re.compile(rf"(?-i:{lead}){rest}", re.IGNORECASE) for lead in leads)
    return compiled[:-1], compiled


def _leftmost(variants: _Variants, reply: str) -> str | None:
    """The first match in `reply` of the pattern that `variants` split up: the leftmost of theirs
    (no two of them can start at one place)."""
    found = [m for m in (p.search(reply) for p in variants) if m]
    return min(found, key=lambda m: m.start()).group(0) if found else None


_FEW_WORDS = 4
_ACCENTED = re.compile("[\u00c0-\u024f]")  # the non-ASCII letters of _TOKEN
# Byte tables that keep ASCII lower-case letters (or digits) and blank everything else: a split
# then yields _TOKEN's maximal runs of that kind, without a regex match object per token.
_LETTERS_ONLY = bytes(c if 0x61 <= c <= 0x7A else 0x20 for c in range(256))
_DIGITS_ONLY = bytes(c if 0x30 <= c <= 0x39 else 0x20 for c in range(256))


@functools.lru_cache(maxsize=32)
def _ascii_firsts(words: tuple[str, ...]) -> frozenset[bytes]:
    return frozenset(m[0].encode("ascii") for m in _matchers(words) if m[0].isascii())


def _tokens_of(lowered: str, words: tuple[str, ...]) -> set[str]:
    """The first tokens of `words` among `_TOKEN`'s tokens of `lowered` (or, for text with accented
    letters, all those tokens). Without accented letters every non-ASCII character only separates
    runs, as the "?" it encodes to does, so the byte tables give the very same runs."""
    if not lowered.isascii() and _ACCENTED.search(lowered):
        return set(_TOKEN.findall(lowered))
    return _tokens_in(lowered.encode("ascii", "replace"), _ascii_firsts(words))


def _tokens_in(raw: bytes, firsts: frozenset[bytes]) -> set[str]:
    """The members of `firsts` that are whole runs of a-z, or of 0-9, in `raw` (lower-cased ASCII)."""
    found = firsts.intersection(raw.translate(_LETTERS_ONLY).split())
    found |= firsts.intersection(raw.translate(_DIGITS_ONLY).split())
    return {token.decode("ascii") for token in found}


_JSON_ESCAPE = re.compile(rb"\\(u(?:[0-9a-f]{4})?|.)", re.DOTALL)  # on lowered bytes
_UNCLEAR_CODES = frozenset((0x130, 0x212A))


def json_first_tokens(line: bytes, words: Sequence[str]) -> set[str] | None:
    """The ASCII first tokens of `words` (see `first_token`) that are whole runs of letters, or of
    digits, in the text of a JSON `line` as written; None where the bytes cannot tell.

    Why it can tell: in JSON of ASCII (as json.dumps writes) every character is itself but for
    escapes (\\n, \\" and \\uXXXX for what is not ASCII), and the characters escaped only
    separate runs here, as they do for `find_identity` (an accented letter splits a run it would
    keep whole: more tokens found, never fewer). So every token of every string in the line is
    found, and a word can only match where its first token is. It cannot tell for a byte beyond
    ASCII, an escaped ASCII character, or one that lowers to ASCII letters (U+0130 lowers to "i"
    and a combining dot, U+212A to "k"): parse those lines."""
    lowered = line.lower()
    if not lowered.isascii():
        return None
    unclear = False

    def blank(escape: re.Match[bytes]) -> bytes:
        nonlocal unclear
        body = escape.group(1)
        if body[:1] == b"u":
            code = int(body[1:], 16) if len(body) == 5 else 0
            unclear = unclear or code < 0x80 or code in _UNCLEAR_CODES
        return b" "

    blanked = _JSON_ESCAPE.sub(blank, lowered)
    return None if unclear else _tokens_in(blanked, _ascii_firsts(tuple(words)))


def find_identity(replies: Iterable[str], words: Sequence[str]) -> str | None:
    """The identity word or name found in the first reply that has one (the longest match there),
    as written; None if none."""
    for reply, variants in _candidates(replies, words):
        found = [m for m in (_leftmost(v, reply) for v in variants) if m]
        if found:
            return max(found, key=len)  # the whole name rather than its family
    return None


def leaked_identity(replies: Iterable[str], words: Sequence[str]) -> bool:
    """Does any reply name a model, maker or product? (Replies only: a user asking "are you
    llama?" does not disqualify the answer; the answer "I am Llama" does.) `find_identity` is not
    None, without finding which match comes first: any one will do."""
    return any(
        pattern.search(reply) for reply, variants in _candidates(replies, words) for v in variants for pattern in v
    )


def _candidates(replies: Iterable[str], words: Sequence[str]) -> Iterator[tuple[str, list[_Variants]]]:
    """(reply, the patterns of each word whose first token the replies hold, for that reply's
    text) for each non-empty reply, in order; none where no reply holds such a token."""
    texts = [r for r in replies if r]
    if not texts:
        return
    key = tuple(words)
    lowered, matchers = "\n".join(texts).lower(), _matchers(key)
    # A first token in the text is a substring of it: for a few words (a recheck of the words just
    # added), a search for each rules out most texts sooner than splitting the text into tokens.
    if len(matchers) <= _FEW_WORDS and not any(first in lowered for first, _, _ in matchers):
        return
    tokens = _tokens_of(lowered, key)
    if not tokens:
        return
    candidates = [(ascii_only, every) for first, ascii_only, every in matchers if first in tokens]
    for reply in texts:
        yield reply, [ascii_only if reply.isascii() else every for ascii_only, every in candidates]

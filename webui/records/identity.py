"""Replies that give away which model wrote them: the identity words, and the check itself.

Votes are stamped with this check when they are written (so that a redacted vote still carries
it), and the leaderboard re-runs it over the text with today's word list; both use this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# Words that give away who is answering. FastChat's list (minus its canned error strings, which our
# finish reasons cover) plus the families of the models people run today. Matched as lower-case
# substrings, like FastChat, so short words that occur inside ordinary words are left out.
DEFAULT_IDENTITY_WORDS: tuple[str, ...] = (
    "vicuna", "lmsys", "koala", "uc berkeley", "open assistant", "laion", "chatglm", "chatgpt", "gpt-3", "gpt-4",
    "gpt-5", "openai", "anthropic", "claude", "bard", "palm", "lamda", "google", "llama", "qianwan", "alibaba",
    "mistral", "mixtral", "zhipu", "keg lab", "01.ai", "ai2", "tülu", "tulu", "qwen", "gemma", "gemini",
    "smollm", "hugging face", "huggingface", "deepseek", "meta ai", "microsoft",
)

def identity_words(model_names: Iterable[str] = (), extra: str | Sequence[str] = "") -> tuple[str, ...]:
    """The default words, every model name, each name's family (its first part, "gemma" of
    "gemma-3-270m", when that is at least four characters) and any extra comma-separated words."""
    words = list(DEFAULT_IDENTITY_WORDS)
    for name in model_names:
        lowered = name.strip().lower()
        if not lowered:
            continue
        words.append(lowered)
        family = lowered.replace("_", "-").split("-")[0]
        if len(family) >= 4 and any(ch.isalpha() for ch in family):
            words.append(family)
    extras = extra.split(",") if isinstance(extra, str) else list(extra)
    words.extend(w.strip().lower() for w in extras if w.strip())
    return tuple(dict.fromkeys(words))


def leaked_identity(replies: Iterable[str], words: Sequence[str]) -> bool:
    """Does any reply name a model, maker or product? (Replies only: a user asking "are you
    llama?" does not disqualify the answer; the answer "I am Llama" does.)"""
    text = " ".join(r for r in replies if r).lower()
    return any(word in text for word in words)

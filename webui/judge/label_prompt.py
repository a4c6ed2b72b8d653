"""The category-labelling prompt: a text file with two placeholders, and the strict parsing of the
one category mark it asks for.

The file is ours (default_label_prompt.txt, docs/judge.md explains it) or the operator's
(`--label-prompt FILE`). `{categories}` becomes the declared categories, one `[[NAME]]` mark per
line with its description, then `[[none]]`; `{prompt}` becomes the battle's first user message.
The version is a hash of the text sent with the categories filled in, so that a changed prompt or
a changed categories file starts a new series of labels instead of mixing with the old one;
leading "#" lines are comments, not sent, not hashed. Parsing is strict: an answer is a label only
when every `[[...]]` mark in it is the same declared name (or `none`); no mark, marks that
disagree, or a name not declared is unparsed (None), never a guess.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from webui.errors import ConfigError
from webui.leaderboard.votes.declared import Category, Declared
from webui.leaderboard.votes.labels import NONE
from webui.types import Message

DEFAULT_LABEL_PROMPT = Path(__file__).with_name("default_label_prompt.txt")
CATEGORIES, PROMPT = "{categories}", "{prompt}"
MAX_PROMPT_BYTES = 1 << 20  # a prompt file is a page of text; anything this big is a mistake
_MARK = re.compile(r"\[\[(.*?)\]\]", re.DOTALL)


@dataclass(frozen=True)
class LabelPrompt:
    head: str  # the text sent before the user's prompt: comments removed, the categories filled in
    tail: str  # and after it
    version: str  # a hash of both
    names: tuple[str, ...]  # the declared categories offered, in the file's order

    @classmethod
    def load(cls, declared: Declared, path: Path | None = None) -> LabelPrompt:
        """The prompt in `path` (default: ours) for `declared`, or a ConfigError saying what is wrong."""
        path = Path(path) if path is not None else DEFAULT_LABEL_PROMPT
        try:
            if path.stat().st_size > MAX_PROMPT_BYTES:
                raise ConfigError(f"label prompt {path}: larger than {MAX_PROMPT_BYTES} bytes")
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"label prompt {path}: cannot be read ({exc})") from exc
        return cls.from_text(text, declared, origin=f"label prompt {path}")

    @classmethod
    def from_text(cls, text: str, declared: Declared, origin: str = "label prompt") -> LabelPrompt:
        if not declared:
            raise ConfigError(f"{origin}: no categories declared to label into (--categories-file FILE)")
        for category in declared.categories:
            if category.name == NONE or "[[" in category.name or "]]" in category.name:
                raise ConfigError(
                    f"{declared.source or 'categories file'}: a category named {category.name!r} cannot be "
                    f"labelled: [[{NONE}]] is the answer for no category and a name cannot hold [[ or ]]; rename it"
                )
        lines = text.splitlines(keepends=True)
        while lines and lines[0].startswith("#"):
            lines.pop(0)
        template = "".join(lines).strip() + "\n"
        for placeholder in (CATEGORIES, PROMPT):
            count = template.count(placeholder)
            if count != 1:
                raise ConfigError(
                    f"{origin}: needs the placeholder {placeholder} exactly once (found {count}); "
                    f"the prompt must hold both {CATEGORIES} and {PROMPT}"
                )
        # split first, then filled: a description or a user's prompt holding a placeholder's text
        # is never filled in again; the version covers the categories offered
        head, tail = (part.replace(CATEGORIES, listing(declared.categories)) for part in template.split(PROMPT))
        version = hashlib.sha256(f"{head}{PROMPT}{tail}".encode()).hexdigest()[:12]
        return cls(head, tail, version, declared.names)

    def render(self, prompt: str) -> str:
        return self.head + prompt + self.tail

    def messages(self, prompt: str) -> list[Message]:
        return [Message("user", self.render(prompt))]

    def parse(self, answer: str) -> str | None:
        """The declared name, or "none", when every mark in the answer is that one; else None."""
        found = set(_MARK.findall(answer or ""))
        if len(found) != 1:
            return None
        mark = found.pop()
        return mark if mark == NONE or mark in self.names else None


def listing(categories: tuple[Category, ...]) -> str:
    """The categories as the judge reads them: a mark per line, with what the file says of it."""
    lines = []
    for category in categories:
        about = category.description or (f"about: {', '.join(category.keywords)}" if category.keywords else "")
        lines.append(f"[[{category.name}]]" + (f": {about}" if about else ""))
    lines.append(f"[[{NONE}]]: none of the categories above")
    return "\n".join(lines)

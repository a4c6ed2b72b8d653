"""The judge's prompt: a text file with two placeholders, and the verdict marks it asks for.

The file is ours (default_prompt.txt, docs/judge.md explains it) or the operator's
(`--judge-prompt FILE`). Its version is a hash of the text sent, so that verdicts asked with
different prompts are never mixed up; leading "#" lines are comments, not sent, not hashed.
Parsing is strict: exactly one kind of mark in the answer is a verdict; none, or marks that
disagree, is unparsed (None), never a guess.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from webui.errors import ConfigError
from webui.types import Message

DEFAULT_PROMPT = Path(__file__).with_name("default_prompt.txt")
# The verdict first and alone, no reasoning: for judges too small to reason usefully (docs/judge.md).
MARK_FIRST_PROMPT = Path(__file__).with_name("mark_first_prompt.txt")
PLACEHOLDERS = ("{conversation_a}", "{conversation_b}")
# The mark in an answer -> the verdict about the replies as shown (A first, B second).
MARKS = {"[[A]]": "A", "[[B]]": "B", "[[tie]]": "tie", "[[bothbad]]": "bothbad"}
_MARK = re.compile("|".join(re.escape(m) for m in MARKS))
# A verdict line: a line that ends with a mark (trailing spaces, a full stop or markdown's bold
# stars allowed), ended by its newline. A mark inside a line ("[[A]] if A is better,": a judge
# echoing the instructions) is not one, so echoing the list of marks still reads as unparsed.
_VERDICT_LINE = re.compile(f"(?:{_MARK.pattern})[ \t.*]*(?=\r?\n)")
MAX_PROMPT_BYTES = 1 << 20  # a prompt file is a page of text; anything this big is a mistake


@dataclass(frozen=True)
class JudgePrompt:
    template: str  # the text sent, comments removed, with both placeholders
    version: str  # a hash of `template`

    @classmethod
    def load(cls, path: Path | None = None) -> JudgePrompt:
        """The prompt in `path` (default: ours), or a ConfigError saying what is wrong with it."""
        path = Path(path) if path is not None else DEFAULT_PROMPT
        try:
            if path.stat().st_size > MAX_PROMPT_BYTES:
                raise ConfigError(f"judge prompt {path}: larger than {MAX_PROMPT_BYTES} bytes")
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"judge prompt {path}: cannot be read ({exc})") from exc
        return cls.from_text(text, origin=str(path))

    @classmethod
    def from_text(cls, text: str, origin: str = "judge prompt") -> JudgePrompt:
        lines = text.splitlines(keepends=True)
        while lines and lines[0].startswith("#"):
            lines.pop(0)
        template = "".join(lines).strip() + "\n"
        for placeholder in PLACEHOLDERS:
            count = template.count(placeholder)
            if count != 1:
                raise ConfigError(
                    f"{origin}: needs the placeholder {placeholder} exactly once (found {count}); "
                    f"the prompt must hold both {' and '.join(PLACEHOLDERS)}"
                )
        if not any(mark in template for mark in MARKS):
            raise ConfigError(f"{origin}: asks for none of the verdict marks {', '.join(MARKS)}")
        return cls(template, hashlib.sha256(template.encode("utf-8")).hexdigest()[:12])

    def render(self, shown_a: Sequence[Mapping[str, str]], shown_b: Sequence[Mapping[str, str]]) -> str:
        """The prompt for one order: `shown_a` is the conversation shown as assistant A's."""
        # One pass, so that a conversation holding a placeholder's text is never filled in again.
        fill = {PLACEHOLDERS[0]: transcript(shown_a), PLACEHOLDERS[1]: transcript(shown_b)}
        return re.sub("|".join(re.escape(p) for p in PLACEHOLDERS), lambda m: fill[m.group(0)], self.template)

    def messages(self, shown_a: Sequence[Mapping[str, str]], shown_b: Sequence[Mapping[str, str]]) -> list[Message]:
        return [Message("user", self.render(shown_a, shown_b))]


def transcript(conversation: Sequence[Mapping[str, str]]) -> str:
    """A whole conversation, every turn, as the judge reads it (the system prompt left out: the
    two sides may have had different ones, and the judge rates the replies)."""
    turns = [m for m in conversation if m.get("role") in ("user", "assistant")]
    return "\n\n".join(f"### {m['role'].capitalize()}:\n{m.get('content', '')}" for m in turns)


def verdict_line_end(answer: str) -> int | None:
    """Where the answer's first verdict line ends (before its newline); None while it has none.
    A judge is stopped there: what it would write after its verdict is not read."""
    found = _VERDICT_LINE.search(answer)
    return found.end() if found else None


def parse_verdict(answer: str) -> str | None:
    """ "A", "B", "tie" or "bothbad" when the answer holds marks of one kind only; else None."""
    found = {MARKS[m] for m in _MARK.findall(answer or "")}
    return found.pop() if len(found) == 1 else None


@dataclass(frozen=True)
class JudgeChoice:
    """Which model judges, with which prompt, and what its verdicts weigh in the composite board."""

    name: str
    prompt: JudgePrompt
    weight: float | str  # the models file's judge: block's, else "auto"
    max_tokens: int | None = None  # the block's cap on one answer (for this judge); None: the entry's own


def choose_judge(models_file: Path, judge: str | None, prompt_file: Path | None) -> JudgeChoice:
    """The judge the command line names, else the models file's `judge:` block's; its prompt:
    `prompt_file`, else the block's (when the block names this judge), else ours; the block's
    `max_tokens` likewise only for the judge it names. A ConfigError
    where no judge is named anywhere or the prompt cannot be used."""
    from webui.models.specs import load_judge

    block = load_judge(models_file)
    name = judge or (block.model if block else None)
    if not name:
        raise ConfigError(f"no judge: name one with --judge NAME, or in a judge: block of {models_file}")
    from_block = block.prompt if block is not None and block.model == name else None
    prompt = JudgePrompt.load(prompt_file or (Path(from_block) if from_block else None))
    cap = block.max_tokens if block is not None and block.model == name else None
    return JudgeChoice(name, prompt, block.weight if block is not None else "auto", cap)

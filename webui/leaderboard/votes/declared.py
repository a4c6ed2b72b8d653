"""Categories the operator declares (`--categories-file`): the file, its rules, and which of them a
battle vote belongs to.

The file is YAML, a list of categories under `categories:`, each a name and a rule made of any of
these conditions on the battle's first prompt, combined as `match:` says (`all`, the default, or
`any`):

    categories:
      - name: maths
        keywords: [integral, equation, prove]   # any of them, whole words, any case
        regex: '\\d+\\s*[-+*/]\\s*\\d+'            # Python re.search, any case
        min_chars: 40                            # the prompt's length in characters
        language: English                        # as the built-in language categories name it
        match: any

A category with no condition holds only the battles visitors tagged with it (`--visitor-tags`).
A vote is in a category when its rule matches or when the visitor tagged the battle with it.

Guarantees: a file that is not as above (not YAML, an unknown key, a wrong type, a regular
expression that does not compile, a name used twice or taken by a built-in category) is refused
with a `ConfigError` naming the file, the line and the reason, so the server does not start on it.

Why the rules are evaluated when the board is built, from each vote's own log line, and not stored
in the vote index: the index keeps no prompt text (a guarantee of its own), so a rule evaluated at
index time would need the rules in the index and a rebuild of every row whenever the file changes;
read at board time, a changed file takes effect at the next start, nothing to invalidate. Each
vote's line is read once per process (`Membership` remembers the answers by row id), so a board
rebuild reads only the new votes. The cost: a server sharing a PostgreSQL index sees the categories
of the votes in its own log folder only (another server's lines are not on its disk).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from webui.db.columns import DECLARED_PREFIX as PREFIX
from webui.errors import ConfigError
from webui.leaderboard.votes.labels import LabelBook, Place
from webui.leaderboard.votes.language import detect_language
from webui.leaderboard.votes.rows import _texts

MATCHES = ("all", "any")
KEYS = ("name", "keywords", "regex", "min_chars", "language", "match", "description")
TAG_FIELD = "category_tag"  # the key of a visitor's tag in a vote record's `extra` (webui.records.storage)
# Names the built-in categories use (webui.leaderboard.stats.categories); a declared one may not take them.
RESERVED = ("all", "multi-turn", "long prompt", "coding")


@dataclass(frozen=True)
class Category:
    """One declared category: its name and its rule (no condition: tags only)."""

    name: str
    keywords: tuple[str, ...] = ()
    regex: re.Pattern[str] | None = None
    min_chars: int | None = None
    language: str | None = None
    match: str = "all"
    description: str = ""
    _keywords: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.keywords and self._keywords is None:
            words = "|".join(re.escape(w) for w in sorted(self.keywords, key=len, reverse=True))
            object.__setattr__(self, "_keywords", re.compile(rf"(?<!\w)(?:{words})(?!\w)", re.IGNORECASE))

    @property
    def has_rule(self) -> bool:
        return bool(self.keywords) or self.regex is not None or self.min_chars is not None or bool(self.language)

    def matches(self, prompt: str, language: Callable[[str], str] = detect_language) -> bool:
        """Whether the rule holds for a first prompt (False for a category without a rule)."""
        checks: list[Callable[[], bool]] = []
        if self._keywords is not None:
            checks.append(lambda: self._keywords.search(prompt) is not None)  # type: ignore[union-attr]
        if self.regex is not None:
            checks.append(lambda: self.regex.search(prompt) is not None)  # type: ignore[union-attr]
        if self.min_chars is not None:
            checks.append(lambda: len(prompt) >= self.min_chars)  # type: ignore[operator]
        if self.language:
            checks.append(lambda: language(prompt) == self.language)
        if not checks:
            return False
        return any(c() for c in checks) if self.match == "any" else all(c() for c in checks)


@dataclass(frozen=True)
class Declared:
    """The declared categories of one file, in its order (empty: none declared)."""

    categories: tuple[Category, ...] = ()
    source: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.categories)

    def __bool__(self) -> bool:
        return bool(self.categories)

    def of(self, record: Mapping[str, Any]) -> tuple[str, ...]:
        """The declared categories a battle vote record is in: by its first prompt, or its visitor's tag."""
        return self.placed(record)[0]

    def placed(self, record: Mapping[str, Any]) -> tuple[tuple[str, ...], bool]:
        """`of(record)`, and whether a judge's label may place the vote (webui.judge.labels): only
        where no rule matches and the visitor left no tag (any tag: a visitor's word always wins)."""
        prompt = first_prompt(record)
        tag = visitor_tag(record)
        names = tuple(c.name for c in self.categories if c.name == tag or (prompt is not None and c.matches(prompt)))
        return names, not names and not tag and prompt is not None


def first_prompt(record: Mapping[str, Any]) -> str | None:
    """The first user message of a vote record's first state (None where it has none)."""
    states = record.get("states")
    if not (isinstance(states, list) and states and isinstance(states[0], dict)):
        return None
    try:
        prompts = _texts(states[0])[0]
    except (TypeError, ValueError, AttributeError, IndexError, KeyError):
        return None
    return prompts[0] if prompts else None


def visitor_tag(record: Mapping[str, Any]) -> str:
    """The category a visitor tagged the battle with ("" where none)."""
    extra = record.get("extra")
    tag = extra.get(TAG_FIELD) if isinstance(extra, dict) else None
    return tag if isinstance(tag, str) else ""


def load(path: str | Path) -> Declared:
    """The categories of `path` ("" or None: none); a `ConfigError` with the line and the reason
    when it is not a categories file."""
    if not path:
        return Declared()
    where = f"categories file {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    return parse(text, where)


def parse(text: str, where: str = "categories file") -> Declared:
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{where}{line}: not YAML: {getattr(exc, 'problem', None) or exc}") from None
    if root is None:
        raise ConfigError(f"{where}: empty; it must hold `categories:`, a list of categories (docs/leaderboard.md)")
    top = _mapping(root, where, "the file")
    if set(top) != {"categories"}:
        extra = sorted(set(top) - {"categories"})
        node = top[extra[0]][0] if extra else root
        raise ConfigError(
            f"{_at(where, node)}: the file holds one key, `categories:`, not {', '.join(extra) or 'none'}"
        )
    listing = top["categories"][1]
    if not isinstance(listing, yaml.SequenceNode) or not listing.value:
        raise ConfigError(f"{_at(where, listing)}: `categories:` must be a non-empty list of categories")
    found: list[Category] = []
    for node in listing.value:
        category = _category(node, where)
        if category.name in {c.name for c in found}:
            raise ConfigError(f"{_at(where, node)}: the name {category.name!r} is declared twice")
        found.append(category)
    return Declared(tuple(found), where)


def _category(node: yaml.Node, where: str) -> Category:
    fields = _mapping(node, where, "a category")
    for key, (key_node, _) in fields.items():
        if key not in KEYS:
            raise ConfigError(f"{_at(where, key_node)}: unknown key {key!r}; a category has {', '.join(KEYS)}")
    if "name" not in fields:
        raise ConfigError(f"{_at(where, node)}: a category needs a `name:`")
    values = {key: _value(value_node) for key, (_, value_node) in fields.items()}
    for key, value in values.items():
        problem = _CHECKS[key](value)
        if problem:
            raise ConfigError(f"{_at(where, fields[key][1])}: `{key}:` {problem}, got {value!r}")
    regex = values.get("regex")
    try:
        pattern = re.compile(regex, re.IGNORECASE) if regex is not None else None
    except re.error as exc:
        raise ConfigError(f"{_at(where, fields['regex'][1])}: `regex:` does not compile: {exc}") from None
    return Category(
        values["name"],
        tuple(k.strip() for k in values.get("keywords", [])),
        pattern,
        values.get("min_chars"),
        values.get("language"),
        values.get("match", "all"),
        values.get("description", ""),
    )


def _name_problem(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or name != name.strip() or "," in name:
        return "must be text, without surrounding spaces or commas"
    if name.lower() in RESERVED or name.startswith("language: "):
        return "is a built-in category's name; choose another"
    return ""


def _text_problem(value: Any) -> str:
    return "" if isinstance(value, str) and value.strip() else "must be text"


# What is wrong with each key's value ("": nothing); the regular expression is compiled apart.
_CHECKS: dict[str, Callable[[Any], str]] = {
    "name": _name_problem,
    "keywords": lambda v: (
        ""
        if isinstance(v, list) and all(isinstance(k, str) and k.strip() for k in v)
        else "must be a list of words (text)"
    ),
    "regex": lambda v: _text_problem(v) and "must be a regular expression (text)",
    "min_chars": lambda v: "" if type(v) is int and v >= 1 else "must be a whole number of at least 1",
    "language": lambda v: _text_problem(v) and "must be a language's English name (as the language categories say)",
    "match": lambda v: "" if v in MATCHES else f"must be one of {', '.join(MATCHES)}",
    "description": lambda v: "" if isinstance(v, str) else "must be text",
}


def _mapping(node: yaml.Node, where: str, what: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{_at(where, node)}: {what} must be a mapping of keys to values")
    found: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if not isinstance(key, str):
            raise ConfigError(f"{_at(where, key_node)}: keys must be text")
        if key in found:
            raise ConfigError(f"{_at(where, key_node)}: the key {key!r} is given twice")
        found[key] = (key_node, value_node)
    return found


def _value(node: yaml.Node) -> Any:
    """A node's value as safe_load reads it."""
    return yaml.SafeLoader(yaml.serialize(node)).get_single_data()


def _at(where: str, node: yaml.Node) -> str:
    return f"{where}, line {node.start_mark.line + 1}"


class Membership:
    """Which declared categories each vote index row is in, read from the row's own log line once
    and then remembered by the line's place and time (file, offset, tstamp): a file rewritten
    under the same name is read again where its lines differ. With `labels`, a row that no rule
    and no visitor's tag places takes the category a judge labelled it with (the book is read
    again, incrementally, at each call, so labels written since count at the next build)."""

    def __init__(self, declared: Declared, labels: LabelBook | None = None) -> None:
        self.declared, self.labels = declared, labels
        # place -> (the categories of its rules and tag, whether a judge's label may place it)
        self._known: dict[Place, tuple[tuple[str, ...], bool]] = {}

    @classmethod
    def with_labels(cls, declared: Declared, log_dir: Path) -> Membership:
        """Membership that reads the judge's category labels beside the logs in `log_dir`."""
        return cls(declared, LabelBook(Path(log_dir)))

    def columns(
        self, rows: pd.DataFrame, read: Callable[[pd.DataFrame], Iterable[tuple[int, Mapping[str, Any] | None]]]
    ) -> pd.DataFrame:
        """`rows` with a boolean column `PREFIX + name` per declared category. `read(some)` yields
        (position in `some`, record or None) for the rows given whose log line it has (the
        vote index's `records`)."""
        if not self.declared or rows.empty:
            return rows.assign(
                **{PREFIX + n: pd.Series(False, index=rows.index, dtype=bool) for n in self.declared.names}
            )
        keys = list(
            zip(rows["file"].astype(str), rows["offset"].astype(int), rows["tstamp"].astype(float), strict=True)
        )
        unknown = [i for i, key in enumerate(keys) if key not in self._known]
        if unknown:
            for position, record in read(rows.iloc[unknown]):
                self._known[keys[unknown[position]]] = (
                    self.declared.placed(record) if record is not None else ((), False)
                )
        found = [self._known.get(key, ((), False)) for key in keys]
        labels = self.labels.refresh() if self.labels is not None else {}
        names = set(self.declared.names)
        placed = [
            _with_label(rule_or_tag, labels.get(key) if open_ else None, names)
            for key, (rule_or_tag, open_) in zip(keys, found, strict=True)
        ]
        return rows.assign(
            **{
                PREFIX + n: pd.Series([n in p for p in placed], index=rows.index, dtype=bool)
                for n in self.declared.names
            }
        )


def _with_label(placed: tuple[str, ...], label: str | None, names: set[str]) -> tuple[str, ...]:
    """A judge's label where it names a category declared now; else the rules' and tag's answer."""
    return (label,) if label is not None and label in names else placed

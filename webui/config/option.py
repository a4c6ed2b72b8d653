"""One row of the settings table: `setting(...)` declares a field of `Settings` together with its
flag, help text and check, and everything else is derived from the row:

- the environment variable: ARENA_ and the field's name in capitals (`env_name`), for every field;
- the type of its text, on the command line and in the environment: the default's (`kind_of`), or
  the row's own reader;
- the command-line flag (webui/config/cli.py): a value flag, or for a boolean without a metavar a
  switch that turns the default over (--share, --no-preload);
- the check run when a `Settings` is made (webui/config/settings.py), with `choices` a check too;
- the old spellings a renamed setting keeps (`aliases`, its former flags): each flag is accepted
  beside the row's, and its variable (--vllm-concurrency: ARENA_VLLM_CONCURRENCY, `alias_env_name`)
  read when the field's own is unset or empty, so the new name wins where both are given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, overload

from webui.config.values import Check, one_of, read_list
from webui.errors import ConfigError

T = TypeVar("T")
ROW = "arena_option"  # the key of a field's row in its metadata


@dataclass(frozen=True)
class Option:
    """How one setting is given and what it must be (the row `setting` stores on its field)."""

    flag: str | None = None  # None: environment only (a secret `ps` would show) or not for users
    help: str = ""
    metavar: str | None = None  # also: a boolean with a metavar takes a value (on|off), not a switch
    read: Callable[[str], Any] | None = None  # text to value, for the flag and the variable alike
    check: Check | None = None
    choices: tuple[str, ...] = ()  # the only values accepted; the flag offers them
    aliases: tuple[str, ...] = ()  # former flags, kept for the commands and environments people have

    def variables(self, name: str) -> tuple[str, ...]:
        """The ARENA_* variables that give field `name`, the one that wins first."""
        return (env_name(name), *(alias_env_name(alias) for alias in self.aliases))

    def checks(self) -> tuple[Check, ...]:
        return tuple(c for c in (self.check, one_of(self.choices) if self.choices else None) if c)


@overload
def setting(
    default: T,
    *,
    flag: str | None = None,
    help: str = "",
    metavar: str | None = None,
    read: Callable[[str], Any] | None = None,
    check: Check | None = None,
    choices: tuple[str, ...] = (),
    aliases: tuple[str, ...] = (),
    private: bool = False,
) -> T: ...


@overload
def setting(
    *,
    factory: Callable[[], T],
    flag: str | None = None,
    help: str = "",
    metavar: str | None = None,
    read: Callable[[str], Any] | None = None,
    check: Check | None = None,
    choices: tuple[str, ...] = (),
    aliases: tuple[str, ...] = (),
    private: bool = False,
) -> T: ...


def setting(
    default: Any = dataclasses.MISSING,
    *,
    factory: Any = dataclasses.MISSING,
    private: bool = False,
    **row: Any,
) -> Any:
    """A `Settings` field with its row. `factory` computes the default when a Settings is made;
    `private` keeps the value out of repr (it may hold a password or a key)."""
    metadata = {ROW: Option(**row)}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, repr=not private, metadata=metadata)
    return dataclasses.field(default=default, repr=not private, metadata=metadata)


def option_of(f: dataclasses.Field) -> Option:
    option = f.metadata.get(ROW)
    if not isinstance(option, Option):
        raise TypeError(f"Settings.{f.name} is declared without setting(...), so it has no row")
    return option


def env_name(name: str) -> str:
    return f"ARENA_{name.upper()}"


def alias_env_name(flag: str) -> str:
    """The variable that went with a former flag: --vllm-concurrency was ARENA_VLLM_CONCURRENCY."""
    return env_name(flag.removeprefix("--").replace("-", "_"))


def kind_of(f: dataclasses.Field) -> type:
    """The type a field's text is read as: its default's (a factory's is computed)."""
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[operator]
    return Path if isinstance(default, Path) else type(default)


def read_text(name: str, raw: str, kind: type, variable: str | None = None) -> Any:
    """`raw` as a value of `kind`; a ConfigError naming the variable (ARENA_<NAME> unless given) otherwise."""
    try:
        if kind is bool:
            lowered = raw.strip().lower()
            if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError(raw)
            return lowered in ("1", "true", "yes", "on")
        if issubclass(kind, Path):
            return Path(raw)
        if kind is tuple:  # comma-separated list
            return read_list(raw)
        return kind(raw)  # type: ignore[call-arg]  # int, float or str here
    except ValueError:
        raise ConfigError(f"{variable or env_name(name)}: cannot read {raw!r} as {kind.__name__}") from None


def read_environment(fields: tuple[dataclasses.Field, ...], environ: Mapping[str, str]) -> dict[str, Any]:
    """The values the ARENA_* variables in `environ` give (an empty one gives none); of a field's own
    variable and its aliases', the first set wins."""
    values: dict[str, Any] = {}
    for f in fields:
        option = option_of(f)
        given = [(variable, environ[variable]) for variable in option.variables(f.name) if environ.get(variable)]
        if not given:
            continue
        variable, raw = given[0]
        values[f.name] = option.read(raw) if option.read else read_text(f.name, raw, kind_of(f), variable)
    return values

"""The command line, derived from the settings table: one flag per row that names one, in the
table's order, with the row's former flags (its aliases) as other spellings of it, each flag's
value read as the environment variable's is. Options given win over the environment; a flag left
out leaves the setting to the environment or the default."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from webui.config.option import Option, kind_of, option_of, read_text
from webui.config.settings import Settings
from webui.errors import ConfigError


def _program_name() -> str:
    """How the user started us, for the usage line: app.py, pairwise-arena or python -m webui."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "app.py"
    return "python -m webui" if name == "__main__.py" else name


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_program_name(),
        description="Pairwise Arena: chat with language models and compare them side by side.",
        epilog="Every option can also be set with an environment variable ARENA_<OPTION>, "
        "e.g. ARENA_PORT=8000. Options given here win.",
    )
    for f in dataclasses.fields(Settings):
        option = option_of(f)
        if option.flag:
            parser.add_argument(option.flag, *option.aliases, dest=f.name, help=help_of(option), **_how_given(f))
    return parser


def help_of(option: Option) -> str:
    """The row's help, saying which spellings are former ones (--help lists them all alike)."""
    if not option.aliases:
        return option.help
    return f"{option.help} ({', '.join(option.aliases)}: the old name, still accepted)"


def _how_given(f: dataclasses.Field) -> dict[str, Any]:
    """argparse's arguments for `f`'s flag: a switch, or a value read into the field's type.
    Every default is None, so that a flag left out is told apart from one given."""
    option, kind = option_of(f), kind_of(f)
    if kind is bool and option.metavar is None:  # a switch turns the default over
        return {"action": "store_false" if f.default else "store_true", "default": None}
    how: dict[str, Any] = {"type": _value_type(f.name, kind, option.read)}
    if option.metavar is not None:
        how["metavar"] = option.metavar
    if option.choices:
        how["choices"] = option.choices
    return how


def _value_type(name: str, kind: type, read: Callable[[str], Any] | None) -> Any:
    if read is not None:
        return _cli(read)
    if kind is str:
        return None  # the text itself
    if kind in (int, float, Path):
        return kind  # argparse names it in its message: "invalid int value: 'x'"
    # on|off, a comma-separated list: read as the variable is, refused with its message (a ConfigError)
    return functools.partial(read_text, name, kind=kind)


def _cli(parse: Any) -> Any:
    """An argparse type from a parser that raises ConfigError, so that argparse reports its message."""

    def convert(raw: str) -> Any:
        try:
            return parse(raw)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def settings_from_cli(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    args = build_parser().parse_args(argv)
    return Settings.from_env(environ, **vars(args))

"""The settings table (webui/config/): one row per setting, and what is derived from the rows (the
flag, the ARENA_* variable, the checks) agrees with the row and with itself."""

from __future__ import annotations

import dataclasses
import re

import pytest

from webui.config import Settings, build_parser, settings_from_cli
from webui.config.cli import help_of
from webui.config.option import alias_env_name, env_name, kind_of, option_of
from webui.errors import ConfigError

FIELDS = dataclasses.fields(Settings)
FLAGGED = [f for f in FIELDS if option_of(f).flag]
# Settings with no flag: a secret on the command line would show in `ps` (docs/deploy.md), and the
# thread join timeout is for tests. Giving one of these a flag is a decision, not a slip.
ENVIRONMENT_ONLY = {"api_keys", "auth", "ip_hash_secret", "operator_key", "secret", "thread_join_timeout_s"}


def test_every_setting_is_one_row_with_at_most_one_flag() -> None:
    flags = [flag for f in FLAGGED for flag in (option_of(f).flag, *option_of(f).aliases)]
    assert len(flags) == len(set(flags)), "two settings share a flag"
    assert all(option_of(f).flag for f in FIELDS if option_of(f).aliases), "an alias of no flag"
    assert all(re.fullmatch(r"--[a-z0-9]+(-[a-z0-9]+)*", flag or "") for flag in flags), flags
    assert {f.name for f in FIELDS} - {f.name for f in FLAGGED} == ENVIRONMENT_ONLY
    assert all(option_of(f).help for f in FLAGGED), "a flag without help"


def test_the_parser_offers_each_row_once_as_the_row_says() -> None:
    actions = [a for a in build_parser()._actions if a.dest != "help"]
    assert [(a.dest, a.option_strings, a.help) for a in actions] == [
        (f.name, [option_of(f).flag, *option_of(f).aliases], help_of(option_of(f))) for f in FLAGGED
    ]
    variables = [v for f in FIELDS for v in option_of(f).variables(f.name)]
    assert len(variables) == len(set(variables)), "an alias's variable is another setting's"


# A renamed setting keeps its old spellings: scripts and deployments name them.
RENAMED = [("batch_slots", "--batch-slots", "--vllm-concurrency", "ARENA_VLLM_CONCURRENCY")]


@pytest.mark.parametrize(("name", "flag", "old_flag", "old_variable"), RENAMED)
def test_a_renamed_setting_takes_its_old_flag_as_its_new_one(name, flag, old_flag, old_variable) -> None:
    assert alias_env_name(old_flag) == old_variable
    by_new, by_old = (settings_from_cli([given, "3"], environ={}) for given in (flag, old_flag))
    assert getattr(by_new, name) == getattr(by_old, name) == 3
    assert by_new == by_old
    assert getattr(settings_from_cli([old_flag, "3", flag, "5"], environ={}), name) == 5  # the last given


@pytest.mark.parametrize(("name", "flag", "old_flag", "old_variable"), RENAMED)
def test_a_renamed_setting_reads_its_old_variable_unless_the_new_one_is_set(name, flag, old_flag, old_variable) -> None:
    new_variable = env_name(name)
    assert getattr(Settings.from_env({new_variable: "3"}), name) == 3
    assert getattr(Settings.from_env({old_variable: "4"}), name) == 4
    assert getattr(Settings.from_env({new_variable: "3", old_variable: "4"}), name) == 3
    assert getattr(Settings.from_env({new_variable: "", old_variable: "4"}), name) == 4  # empty: not set
    assert getattr(settings_from_cli([flag, "5"], environ={old_variable: "4"}), name) == 5  # a flag wins
    with pytest.raises(ConfigError, match=f"^{old_variable}: cannot read 'x'"):  # the variable given is named
        Settings.from_env({old_variable: "x"})
    with pytest.raises(ConfigError, match="at least 1"):  # the row's check holds for the old name too
        Settings.from_env({old_variable: "0"})


@pytest.mark.parametrize(("name", "flag", "old_flag", "old_variable"), RENAMED)
def test_help_shows_the_new_flag_and_calls_the_old_one_old(name, flag, old_flag, old_variable, capsys) -> None:
    with pytest.raises(SystemExit):
        settings_from_cli(["--help"], environ={})
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    assert f"{flag} {name.upper()}, {old_flag} {name.upper()}" in shown
    assert f"({old_flag}: the old name, still accepted)" in shown


def outcome(make) -> object:
    """What the user gets: the settings or the error's message, where "unreadable TEXT" and "not a
    choice TEXT" stand for the two refusals that argparse and the variable reader word differently."""
    try:
        return make()
    except ConfigError as exc:
        return worded_alike(str(exc))


def worded_alike(message: str) -> str:
    for pattern, said in (
        (r"ARENA_\w+: cannot read (.*) as \w+|invalid \w+ value: (.*)", "unreadable"),
        (r"\w+: must be one of [\w, ]+, got (.*)|invalid choice: (.*) \(choose from .*\)", "not a choice"),
    ):
        if match := re.fullmatch(pattern, message):
            return f"{said} {match.group(1) or match.group(2)}"
    return message


def from_flag(flag: str, text: str, capsys: pytest.CaptureFixture[str]) -> object:
    try:
        return outcome(lambda: settings_from_cli([flag, text], environ={}))
    except SystemExit:
        message = capsys.readouterr().err.strip().splitlines()[-1]
        # argparse names a flag with its other spellings: "argument --batch-slots/--vllm-concurrency: ..."
        return worded_alike(re.split(rf"argument {flag}(?:/[-\w]+)*: ", message, maxsplit=1)[1])


TEXTS = ["0", "1", "-1", "2.5", "7", "x", "on", "off", "auto", "weighted", "a, b,", "127.0.0.1", "1h"]


@pytest.mark.parametrize(
    "f", [f for f in FLAGGED if kind_of(f) is not bool or option_of(f).metavar], ids=lambda f: f.name
)
def test_a_flag_reads_its_text_as_its_variable_does(f: dataclasses.Field, capsys, monkeypatch) -> None:
    monkeypatch.delenv("GRADIO_SERVER_PORT", raising=False)
    flag = option_of(f).flag or ""
    for text in TEXTS:
        by_variable = outcome(lambda text=text: Settings.from_env({env_name(f.name): text}))
        assert from_flag(flag, text, capsys) == by_variable, f"{flag} {text!r} vs {env_name(f.name)}={text!r}"


@pytest.mark.parametrize(
    "f", [f for f in FLAGGED if kind_of(f) is bool and not option_of(f).metavar], ids=lambda f: f.name
)
def test_a_switch_turns_its_default_over_as_its_variable_can(f: dataclasses.Field) -> None:
    flag, turned = option_of(f).flag or "", not f.default
    needs = ["--categories-file", "c.yaml"] if f.name == "visitor_tags" else []
    by_flag = settings_from_cli([flag, *needs], environ={})
    by_variable = settings_from_cli(needs, environ={env_name(f.name): "true" if turned else "false"})
    assert getattr(by_flag, f.name) is turned
    assert by_variable == by_flag


def test_each_help_that_states_a_default_states_the_rows(monkeypatch) -> None:
    """The help text is the one place a default is written twice: it must say the row's."""
    for name in ("GRADIO_SERVER_PORT", "GRADIO_SERVER_NAME", "SPACE_ID"):
        monkeypatch.delenv(name, raising=False)
    defaults = Settings()
    stated = {
        f.name: float(m.group(1))
        for f in FLAGGED
        if (m := re.search(r"default (\d+(?:\.\d+)?)(?=[\s;,)]|$)", option_of(f).help))
    }
    assert len(stated) > 20  # most numeric settings say their default
    assert {name: float(getattr(defaults, name)) for name in stated} == stated

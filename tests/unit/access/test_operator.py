"""The operator key (webui/access/operator.py): where it comes from, what a short or doubled one
does to the start, and the gate's answers, wrong-key limit included (on an injected clock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from webui.access.operator import WRONG_KEYS_PER_MINUTE, OperatorGate, OperatorRefused, load_operator_key
from webui.access.ratelimit import RateLimited
from webui.config import Settings, settings_from_cli
from webui.errors import ConfigError
from webui.records.events import ClientInfo

KEY = "a-long-enough-operator-key"
GUESSER = ClientInfo(address="192.0.2.1")
OPERATOR = ClientInfo(address="198.51.100.2")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_key_comes_from_the_environment_or_a_file(tmp_path: Path) -> None:
    assert load_operator_key(Settings.from_env({"ARENA_OPERATOR_KEY": KEY})) == KEY
    key_file = tmp_path / "operator.key"
    key_file.write_text(f"\n{KEY}\n")
    key_file.chmod(0o600)
    settings = settings_from_cli(["--operator-key-file", str(key_file)], environ={})
    assert load_operator_key(settings) == KEY and OperatorGate.from_settings(settings).enabled
    assert KEY not in repr(Settings(operator_key=KEY))
    assert not OperatorGate.from_settings(Settings()).enabled
    assert not OperatorGate.from_settings(Settings(operator_key=KEY, ui_export="off")).enabled


def test_bad_keys_stop_the_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least 16 characters"):
        load_operator_key(Settings(operator_key="short"))
    with pytest.raises(ConfigError, match="not both"):
        Settings(operator_key=KEY, operator_key_file=str(tmp_path / "k"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_operator_key(Settings(operator_key_file=str(tmp_path / "missing")))
    (tmp_path / "two").write_text(f"{KEY}\n{KEY}x\n")
    with pytest.raises(ConfigError, match="on one line"):
        load_operator_key(Settings(operator_key_file=str(tmp_path / "two")))
    with pytest.raises(ConfigError, match="'on' needs an operator key"):
        Settings(ui_export="on")
    assert Settings(ui_export="on", operator_key=KEY).ui_export == "on"


def test_the_gate_admits_the_key_alone() -> None:
    gate = OperatorGate(KEY)
    gate.admit(KEY, OPERATOR)
    for offered, message in (
        (None, "needs the operator key"),
        ("", "needs the operator key"),
        (KEY + "x", "Wrong operator key"),
        (KEY[:-1], "Wrong operator key"),
    ):
        with pytest.raises(OperatorRefused, match=message):
            gate.admit(offered, OPERATOR)
    with pytest.raises(OperatorRefused, match="ARENA_OPERATOR_KEY"):
        OperatorGate().admit(KEY, OPERATOR)  # none configured: nothing opens it, and it says how


def test_wrong_keys_are_limited_per_client_and_then_even_the_right_one_waits() -> None:
    clock = Clock()
    gate = OperatorGate(KEY, clock=clock)
    for i in range(WRONG_KEYS_PER_MINUTE):
        with pytest.raises(OperatorRefused, match="Wrong operator key"):
            gate.admit(f"guess {i}", GUESSER)
    for offered in ("another guess", KEY):
        with pytest.raises(RateLimited, match="Too many wrong operator keys"):
            gate.admit(offered, GUESSER)
    gate.admit(KEY, OPERATOR)  # someone else's guesses do not lock the operator out
    with pytest.raises(OperatorRefused):
        gate.admit("", GUESSER)  # no key: refused as such, nothing guessed, nothing counted
    clock.now += 61
    gate.admit(KEY, GUESSER)

"""The values particular settings accept: their choices and patterns, the readers of their text
(durations, proxies) and the checks the settings table names.

A check is `check(name, value)`: it returns nothing for a good value and raises a ConfigError that
names the setting otherwise. `Rule` is the common kind, whose message says what the value must be.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webui.errors import ConfigError

Check = Callable[[str, Any], None]

IP_LOGGING_MODES: tuple[str, ...] = ("hash", "raw", "none")
# How a battle's pair is chosen (webui/arena/pairing.py, docs/leaderboard.md "Pairing").
PAIRING_MODES: tuple[str, ...] = ("smart", "weighted")
UI_EXPORT_MODES: tuple[str, ...] = ("auto", "on", "off")
BATCHING_MODES: tuple[str, ...] = ("auto", "on", "off")  # --transformers-batching
DATABASE_SCHEMES = ("postgresql://", "postgres://")
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")  # it goes into log file names
# An HTTP header name (RFC 9110 token), for --auth-header and --auth-email-header.
HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*")
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


@dataclass(frozen=True)
class Rule:
    """A check whose message reads "NAME: must be MUST, got VALUE"."""

    test: Callable[[Any], bool]
    must: str

    def __call__(self, name: str, value: Any) -> None:
        if not self.test(value):
            raise ConfigError(f"{name}: must be {self.must}, got {value!r}")


AT_LEAST_1 = Rule(lambda v: v >= 1, "at least 1")
OFF_OR_MORE = Rule(lambda v: v >= 0, "0 (off / automatic) or more")
POSITIVE = Rule(lambda v: v > 0, "> 0")
PORT = Rule(lambda v: 0 < v < 65536, "1..65535")
# A paged KV cache sized from free memory: the forward pass needs room beside it (the load check's 80%)
SHARE_OF_FREE_MEMORY = Rule(lambda v: 0 < v <= 0.8, "more than 0 and at most 0.8")


def one_of(choices: tuple[str, ...]) -> Rule:
    return Rule(lambda v: v in choices, f"one of {', '.join(choices)}")


def read_list(raw: str) -> tuple[str, ...]:
    """Comma-separated items, each stripped, empty ones left out ("a, b," is ("a", "b"))."""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def parse_trusted_proxies(raw: str) -> int | tuple[str, ...]:
    """--trusted-proxies: a count ("1") or comma-separated addresses and networks ("127.0.0.1,10.0.0.0/8")."""
    text = raw.strip()
    if text.isdigit():
        return int(text)
    value = read_list(text)
    check_trusted_proxies(value)
    return value


def check_trusted_proxies(value: int | tuple[str, ...]) -> None:
    """A count of 0 or more, or at least one address or network (CIDR) that parses."""
    if isinstance(value, tuple):
        if not value:
            raise ConfigError("trusted_proxies: give a count (0, 1, ...) or the proxies' addresses, got nothing")
        for part in value:
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ConfigError(
                    f"trusted_proxies: {part!r} is neither an address nor a network like 10.0.0.0/8; give a "
                    "count (e.g. 1) or comma-separated addresses (e.g. 127.0.0.1,10.1.2.0/24)"
                ) from None
    elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"trusted_proxies: must be 0 (off / automatic) or more, or addresses, got {value!r}")


def parse_duration(name: str, text: str) -> float:
    """Seconds in "30m", "6h", "24h", "1d" (or "45s"); a ConfigError naming `name` otherwise."""
    match = DURATION.fullmatch(text)
    seconds = float(match.group(1)) * DURATION_UNITS[match.group(2)] if match else 0.0
    if seconds <= 0:
        raise ConfigError(
            f"{name}: must be a duration with its unit, like 30m, 6h, 24h or 1d (s, m, h, d), got {text!r}"
        )
    return seconds


def check_trusted(name: str, value: int | tuple[str, ...]) -> None:
    check_trusted_proxies(value)  # its messages name trusted_proxies already


def check_duration(name: str, text: str) -> None:
    """Empty (off) or a duration that parse_duration reads."""
    if text:
        parse_duration(name, text)


def check_keys(name: str, keys: tuple[str, ...]) -> None:
    if any(not isinstance(k, str) or not k or k != k.strip() for k in keys):
        raise ConfigError(f"{name}: each key must be a non-empty string without surrounding spaces")


def check_names(name: str, names: tuple[str, ...]) -> None:
    if any(not each or each != each.strip() for each in names):
        raise ConfigError(f"{name}: each name must be non-empty, without surrounding spaces")


def check_header(name: str, value: str) -> None:
    if value and not HEADER_NAME.fullmatch(value):
        raise ConfigError(f"{name}: must be an HTTP header name like X-Forwarded-User, got {value!r}")


def check_server_name(name: str, value: str) -> None:
    if value and not SERVER_NAME.fullmatch(value):
        raise ConfigError(
            f"{name}: letters, digits, '.', '_' and '-' (at most 63, a letter or digit first), got {value!r}"
        )


def check_database(name: str, url: str) -> None:
    if url and not url.startswith(DATABASE_SCHEMES):
        raise ConfigError(
            f"{name}: must be a PostgreSQL URL like postgresql://USER@HOST:PORT/DBNAME "
            "(leave it out for the SQLite file beside the logs)"
        )


def check_webhook(name: str, url: str) -> None:
    if url and not url.startswith(("https://", "http://")):
        raise ConfigError(f"{name}: must be an http:// or https:// webhook URL (a Slack incoming webhook's)")

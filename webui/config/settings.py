"""`Settings`: every setting in one frozen object, and the checks between settings.

The table is in three parts, each a dataclass of rows declared with `setting(...)`
(webui/config/option.py): serving.py (models, engines, one request's limits), leaderboard.py
(addresses, logs, the board) and deploy.py (several servers, sign-in, limits, Hub, snapshots).
Each row's field is its name, type and default; its flag, help and check come with it, and the
environment variable (ARENA_<NAME>), the parser (webui/config/cli.py) and the checks are derived.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webui.config.deploy import DeploySettings
from webui.config.leaderboard import LeaderboardSettings
from webui.config.option import option_of, read_environment
from webui.config.serving import ServingSettings
from webui.config.values import parse_duration
from webui.errors import ConfigError


# A dataclass lists its bases' fields from the last base to the first: serving's, the leaderboard's,
# then deploy's, the order --help shows them in.
@dataclass(frozen=True)
class Settings(DeploySettings, LeaderboardSettings, ServingSettings):
    """What the arena runs with: read once at start (webui/config/cli.py), passed down, never
    changed; a wrong value or combination is a ConfigError naming the setting."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            for check in option_of(f).checks():
                check(f.name, getattr(self, f.name))
        _check_operator(self)
        _check_database(self)
        _check_schedule(self)
        _check_signin(self)
        if self.visitor_tags and not self.categories_file:
            raise ConfigError("visitor_tags: needs --categories-file, the categories visitors may choose from")

    @property
    def snapshot_every_s(self) -> float:
        """`snapshot_every` in seconds (0: no snapshots)."""
        return parse_duration("snapshot_every", self.snapshot_every) if self.snapshot_every else 0.0

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """The settings the ARENA_* variables give, with `overrides` (those not None) winning."""
        values = read_environment(dataclasses.fields(cls), os.environ if environ is None else environ)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


# The checks between settings: each one's message names the setting to change and how.


def _check_signin(s: Settings) -> None:
    if s.hf_oauth and (s.auth_file or s.auth):
        raise ConfigError(
            "hf_oauth: use either Hugging Face OAuth or a password login (auth_file / ARENA_AUTH), not both"
        )
    if s.auth_email_header and not s.auth_header:
        raise ConfigError("auth_email_header: needs --auth-header (the person's name comes from the proxy)")
    if s.auth_header and (s.auth_file or s.auth or s.hf_oauth):
        raise ConfigError(
            "auth_header: the proxy signs people in; leave out the app's own login (auth_file, ARENA_AUTH, hf_oauth)"
        )
    if s.auth_header and not isinstance(s.trusted_proxies, tuple):
        raise ConfigError(
            "auth_header: the sign-in header is believed only from the proxy's own address: give "
            "--trusted-proxies as addresses or networks (e.g. --trusted-proxies 127.0.0.1 for nginx on this "
            f"machine), not a count (got {s.trusted_proxies!r}); docs/deploy.md"
        )
    if s.operators and not (s.auth_header or s.auth_file or s.auth or s.hf_oauth):
        raise ConfigError(
            "operators: named operators need a sign-in (--auth-header, --auth-file, ARENA_AUTH or --hf-oauth): "
            "without one, a name is whatever a visitor says; use ARENA_OPERATOR_KEY instead"
        )
    if s.operators and (s.operator_key or s.operator_key_file):
        raise ConfigError(
            "operators: with named operators the operator key is not used; leave out ARENA_OPERATOR_KEY "
            "and --operator-key-file"
        )


def _check_operator(s: Settings) -> None:
    if s.operator_key and s.operator_key_file:
        raise ConfigError("operator_key: set ARENA_OPERATOR_KEY or --operator-key-file, not both")
    if s.ui_export == "on" and not (s.operator_key or s.operator_key_file or s.operators):
        raise ConfigError(
            "ui_export: 'on' needs an operator key, which the exports and the voter check now "
            "require: set ARENA_OPERATOR_KEY or --operator-key-file (docs/leaderboard.md)"
        )


def _check_database(s: Settings) -> None:
    if s.database and not s.server_name:
        raise ConfigError(
            "server_name: --database needs --server-name: each server sharing the vote index "
            "writes log files named for it, so that two servers' day files never collide"
        )
    if s.secret and s.secret_file:
        raise ConfigError("secret: set ARENA_SECRET or --secret-file, not both")
    if s.database and not (s.secret or s.secret_file):
        raise ConfigError(
            "secret: --database needs a secret shared by every server (--secret-file FILE or "
            "ARENA_SECRET), so that each accepts the others' sessions and counts one client's "
            'rate limits and votes under one name (docs/deploy.md, "Several servers")'
        )


def _check_schedule(s: Settings) -> None:
    if s.notify_url and not s.snapshot_every:
        raise ConfigError("notify_url: announces each snapshot's changes, so it needs --snapshot-every (e.g. 24h)")

"""Settings: the one place that reads the command line and environment variables.

Everything else receives a `Settings` object. Environment variables use the `ARENA_` prefix and the
upper-case field name (ARENA_PORT=8000); command-line options win over the environment.

    settings.py   the table: one `setting(...)` row per field (flag, help, check), and the checks
                  between settings
    option.py     what a row holds and what is derived from it: the variable, how text is read
    cli.py        the argparse parser built from the rows; `settings_from_cli`
    values.py     the values particular settings accept: choices, patterns, durations, proxies
    defaults.py   defaults that depend on the machine or the platform (Spaces, XDG, Gradio's variables)

Adding a setting is one row in serving.py, leaderboard.py or deploy.py, placed where --help should
list it: `rate_x: int = setting(5, flag="--rate-x", help="...; default 5", check=OFF_OR_MORE)`.
ARENA_RATE_X, the flag's type (the default's), the check and --help follow. A check that ties two
settings together goes with the others at the end of settings.py. tests/unit/config/test_config_table.py
checks that the help states the row's default and that the flag and the variable read text alike.
"""

from __future__ import annotations

from webui.config.cli import build_parser, settings_from_cli
from webui.config.defaults import DEFAULT_MODELS_FILE, PACKAGE_DIR
from webui.config.settings import Settings
from webui.config.values import (
    DATABASE_SCHEMES,
    HEADER_NAME,
    IP_LOGGING_MODES,
    PAIRING_MODES,
    SERVER_NAME,
    check_trusted_proxies,
    parse_duration,
    parse_trusted_proxies,
)

__all__ = [
    "DATABASE_SCHEMES",
    "DEFAULT_MODELS_FILE",
    "HEADER_NAME",
    "IP_LOGGING_MODES",
    "PACKAGE_DIR",
    "PAIRING_MODES",
    "SERVER_NAME",
    "Settings",
    "build_parser",
    "check_trusted_proxies",
    "parse_duration",
    "parse_trusted_proxies",
    "settings_from_cli",
]

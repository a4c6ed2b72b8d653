"""Settings: the one place that reads the command line and environment variables.

Everything else receives a `Settings` object. Environment variables use the `ARENA_` prefix and the
upper-case field name (ARENA_PORT=8000); command-line options win over the environment.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webui.errors import ConfigError

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_MODELS_FILE = PACKAGE_DIR.parent / "assets" / "models.yaml"
IP_LOGGING_MODES: tuple[str, ...] = ("hash", "raw", "none")
DATABASE_SCHEMES = ("postgresql://", "postgres://")
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")  # it goes into log file names
# An HTTP header name (RFC 9110 token), for --auth-header and --auth-email-header.
HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
# How a battle's pair is chosen (webui/arena/pairing.py, docs/leaderboard.md "Pairing").
PAIRING_MODES: tuple[str, ...] = ("smart", "weighted")


def _default_log_dir() -> Path:
    # Hugging Face Spaces mounts persistent storage at /data; anywhere else, ./logs.
    data = Path("/data")
    if data.is_dir() and os.access(data, os.W_OK):
        return data / "logs"
    return Path("logs")


def _default_host() -> str:
    # Hugging Face Spaces (and anything else that starts Gradio apps) set GRADIO_SERVER_NAME/PORT,
    # so that `python app.py` with no arguments listens where the platform expects.
    if os.environ.get("GRADIO_SERVER_NAME"):
        return os.environ["GRADIO_SERVER_NAME"]
    return "0.0.0.0" if os.environ.get("SPACE_ID") else "127.0.0.1"


def _default_port() -> int:
    raw = os.environ.get("GRADIO_SERVER_PORT", "")
    return int(raw) if raw.isdigit() else 7860


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pairwise-arena"


@dataclass(frozen=True)
class Settings:
    models_file: Path = DEFAULT_MODELS_FILE
    host: str = field(default_factory=_default_host)
    port: int = field(default_factory=_default_port)
    share: bool = False
    log_dir: Path = field(default_factory=_default_log_dir)
    cache_dir: Path = field(default_factory=_default_cache_dir)
    preload: bool = True  # load every model in the background at start
    load_parallel: int = 2  # models loading at once (vLLM starts overlap well; 1: one after another)
    max_concurrency: int = 2  # simultaneous generations per set of weights (a models-file entry may override)
    queue_timeout_s: float = 60.0  # how long a request waits for a free generation slot
    queue_per_slot: int = 4  # requests that may wait per generation slot before new ones are refused at once
    max_input_chars: int = 12_000
    max_turns: int = 20
    # In a battle, a pane on its model's own settings is cut at this length, the same for both:
    # each model's own max_new_tokens would tell them apart before the vote (docs/ui.md).
    battle_max_new_tokens: int = 256
    # smart: the pair whose vote is expected to narrow the ratings most (a new model first); weighted: by the
    # models-file weights alone. Smart is the default: on simulated votes it needs 2-4x fewer (docs/leaderboard.md).
    pairing: str = "smart"
    thread_join_timeout_s: float = 30.0
    # vLLM (docs/models.md): the interpreter that has it ("" finds the installer's .venv-vllm; "none" turns it
    # off), how long a server may take to start, and the generations one vLLM model runs at once by default
    vllm_python: str = field(default_factory=lambda: os.environ.get("ARENA_VLLM_PYTHON", ""))
    vllm_start_timeout_s: float = 600.0
    vllm_concurrency: int = 8  # llama.cpp's and transformers' batching slots too: all batch one model's generations
    # Requests in flight to each replica of a `backend: openai` entry without max_concurrency: a GPU server
    # (vLLM, SGLang, TGI) batches far more than this at little cost per request, and a visitor beyond the
    # slots waits a whole reply (docs/api.md, "Remote backends")
    remote_concurrency: int = 16
    # transformers (docs/models.md): continuous batching (one manager per set of weights) or one
    # generate() thread per reply (off, the default until one chat is shown no slower on it:
    # docs/performance.md), and the tokens of its paged KV cache, allocated at load
    transformers_batching: bool = False
    transformers_kv_cache_tokens: int = 8192
    # llama.cpp's llama-server (docs/models.md): "" finds the installer's .llama.cpp/bin or PATH's; "none" turns it off
    llama_server: str = field(default_factory=lambda: os.environ.get("ARENA_LLAMA_SERVER", ""))
    # Keys the HTTP API (/v1) accepts as `Authorization: Bearer KEY`; empty means no key needed.
    # Environment only (ARENA_API_KEYS=key1,key2): a command-line key would show in `ps`.
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    # Votes, logs and the leaderboard (docs/logging.md, docs/leaderboard.md)
    # The reverse proxies in front of the app: a count (their X-Forwarded-For entries counted from the right are
    # believed) or their addresses and networks (a tuple: only a peer among them is believed, which header
    # sign-in needs). --trusted-proxies takes either: "1" or "127.0.0.1,10.0.0.0/8" (parse_trusted_proxies).
    trusted_proxies: int | tuple[str, ...] = 0
    ip_logging: str = "hash"  # hash | raw | none
    ip_hash_secret: str = field(default="", repr=False)  # empty: generated once, kept beside the logs
    log_transcripts: bool = True  # off: votes are still recorded, `chat` records are not
    leaderboard_rounds: int = 200  # bootstrap rounds for the confidence intervals
    leaderboard_include_named: bool = False  # count side-by-side battles whose names were shown
    leaderboard_drop_stopped: bool = True  # drop battles where a reply was stopped before it ended
    leaderboard_min_battles: int = 50  # fewer battles: the model is preliminary (no rank, likelihood-ratio interval)
    leaderboard_votes_per_day: int = 0  # counted votes per voter per UTC day on the board (0: no cap)
    leaderboard_exclude_flagged: bool = False  # leave out the votes of voters flagged as anomalous
    # comma-separated model names rated as one row whatever served them ("*": every name); others get a
    # row per fingerprint when what a name serves changed (docs/leaderboard.md, "Fingerprints")
    leaderboard_merge_fingerprints: str = ""
    # comma-separated name prefixes, each a family of variants: the board warns when its best is the best
    # of many (docs/leaderboard.md, "The best of many")
    leaderboard_families: str = ""
    # Categories the operator declares (docs/leaderboard.md, "Categories you declare"): a YAML file of names and
    # rules, each a board in the Category menu, shrunk toward the overall board by a normal prior of this sd
    # (Elo points; 0: not shrunk); visitor tags: a visitor may tag a battle with one of them before voting.
    categories_file: str = ""
    category_prior_sd: float = 50.0
    visitor_tags: bool = False
    identity_words: str = ""  # extra comma-separated words that disqualify a battle (model names are added)
    # Several servers, one board (docs/deploy.md): the vote index in this PostgreSQL database instead of the SQLite
    # file beside the logs, and this server's name, which its log file names carry (needed with a database).
    database: str = field(default="", repr=False)  # the URL may hold a password
    server_name: str = ""
    board_lease_s: float = 30.0  # with a database: a board builder silent this long is replaced by another server
    # What every server of one arena shares, so that any of them accepts a session another issued and
    # hashes an address alike (the logs, the shared rate limits): ARENA_SECRET (environment only: `ps` shows
    # arguments) or the file --secret-file names. None: a key per process, and one kept beside the logs.
    secret: str = field(default="", repr=False)
    secret_file: str = ""
    # The operator's views in the Leaderboard tab (the voter check, the exports of every conversation) answer only
    # a request that carries this key (docs/leaderboard.md); none set: they are not offered at all. The key comes
    # from ARENA_OPERATOR_KEY (environment only: `ps` shows arguments) or the file --operator-key-file names.
    operator_key: str = field(default="", repr=False)
    operator_key_file: str = ""
    ui_export: str = "auto"  # auto | on | off: the operator's views (auto: when an operator key is set; on: must be)
    # Deploy: login, rate limits, server limits, Hub sync (docs/deploy.md)
    auth_file: str = ""  # username:password lines; empty (and no ARENA_AUTH): no login, the local default
    auth: str = field(default="", repr=False)  # ARENA_AUTH=user:pw,user2:pw2 (environment only: `ps` shows arguments)
    hf_oauth: bool = False  # "Sign in with Hugging Face" on a Space whose README has hf_oauth: true
    # Sign-in through a trusted proxy (docs/deploy.md, "Sign-in through your company's proxy"): the person's name
    # (and optionally email) from these headers, believed only from --trusted-proxies addresses.
    auth_header: str = ""
    auth_email_header: str = ""
    # Named operators (with a sign-in): these people see the operator's views without the operator key.
    operators: tuple[str, ...] = ()
    rate_messages: int = 20  # chat messages per client per minute (0: no limit)
    rate_votes: int = 30  # votes per client per minute (0: no limit)
    rate_votes_day: int = 200  # votes per client per day (0: no limit)
    queue_size: int = 0  # UI events waiting before new ones are refused at once; 0: sized to the models
    max_request_mb: float = 2.0  # largest request body or upload
    hub_dataset: str = ""  # also push the logs to this Hub dataset repo (owner/name; needs HF_TOKEN)
    hub_every_min: float = 10.0  # minutes between pushes
    # The arena's own board snapshots (webui/server/schedule.py): every period ("30m", "6h", "24h", "1d") one
    # server writes LOG_DIR/snapshots/board-<UTC time>.json; empty: none. Each new snapshot's changes go to
    # --notify-url (Slack-compatible JSON) and, with hub_dataset, the snapshots and exports to the Hub.
    snapshot_every: str = ""
    notify_url: str = field(default="", repr=False)  # a webhook's URL holds its secret
    # A browser session (Gradio's per-session copy of the page, the tab's conversations) unused this long is
    # removed, with its binding to the browser's secret (docs/deploy.md); an open tab touches it every 2 s.
    session_idle_min: float = 30.0
    # A stop (Ctrl-C, SIGTERM) ends every generation at once, as Stop does, and then gives open connections this
    # long to close before it cuts them off and stops the engines (webui/server/stopping.py): a container manager
    # kills a process that takes longer than its own grace (10 s for `docker stop`).
    shutdown_grace_s: float = 5.0

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ConfigError(f"port: must be 1..65535, got {self.port}")
        for names, check, rule in _RULES:
            for name in names:
                if not check(getattr(self, name)):
                    raise ConfigError(f"{name}: must be {rule}, got {getattr(self, name)!r}")
        for name, choices in (
            ("ip_logging", IP_LOGGING_MODES),
            ("ui_export", ("auto", "on", "off")),
            ("pairing", PAIRING_MODES),
        ):
            if getattr(self, name) not in choices:
                raise ConfigError(f"{name}: must be one of {', '.join(choices)}, got {getattr(self, name)!r}")
        if any(not isinstance(k, str) or not k or k != k.strip() for k in self.api_keys):
            raise ConfigError("api_keys: each key must be a non-empty string without surrounding spaces")
        self._check_operator()
        self._check_database()
        self._check_schedule()
        self._check_signin()
        if self.visitor_tags and not self.categories_file:
            raise ConfigError("visitor_tags: needs --categories-file, the categories visitors may choose from")

    def _check_signin(self) -> None:
        if self.hf_oauth and (self.auth_file or self.auth):
            raise ConfigError(
                "hf_oauth: use either Hugging Face OAuth or a password login (auth_file / ARENA_AUTH), not both"
            )
        check_trusted_proxies(self.trusted_proxies)
        for name in ("auth_header", "auth_email_header"):
            value = getattr(self, name)
            if value and not HEADER_NAME.fullmatch(value):
                raise ConfigError(f"{name}: must be an HTTP header name like X-Forwarded-User, got {value!r}")
        if self.auth_email_header and not self.auth_header:
            raise ConfigError("auth_email_header: needs --auth-header (the person's name comes from the proxy)")
        if self.auth_header and (self.auth_file or self.auth or self.hf_oauth):
            raise ConfigError(
                "auth_header: the proxy signs people in; leave out the app's own login (auth_file, ARENA_AUTH, hf_oauth)"
            )
        if self.auth_header and not isinstance(self.trusted_proxies, tuple):
            raise ConfigError(
                "auth_header: the sign-in header is believed only from the proxy's own address: give "
                "--trusted-proxies as addresses or networks (e.g. --trusted-proxies 127.0.0.1 for nginx on this "
                f"machine), not a count (got {self.trusted_proxies!r}); docs/deploy.md"
            )
        if any(not name or name != name.strip() for name in self.operators):
            raise ConfigError("operators: each name must be non-empty, without surrounding spaces")
        if self.operators and not (self.auth_header or self.auth_file or self.auth or self.hf_oauth):
            raise ConfigError(
                "operators: named operators need a sign-in (--auth-header, --auth-file, ARENA_AUTH or --hf-oauth): "
                "without one, a name is whatever a visitor says; use ARENA_OPERATOR_KEY instead"
            )
        if self.operators and (self.operator_key or self.operator_key_file):
            raise ConfigError(
                "operators: with named operators the operator key is not used; leave out ARENA_OPERATOR_KEY "
                "and --operator-key-file"
            )

    def _check_operator(self) -> None:
        if self.operator_key and self.operator_key_file:
            raise ConfigError("operator_key: set ARENA_OPERATOR_KEY or --operator-key-file, not both")
        if self.ui_export == "on" and not (self.operator_key or self.operator_key_file or self.operators):
            raise ConfigError(
                "ui_export: 'on' needs an operator key, which the exports and the voter check now "
                "require: set ARENA_OPERATOR_KEY or --operator-key-file (docs/leaderboard.md)"
            )

    def _check_database(self) -> None:
        if self.server_name and not SERVER_NAME.fullmatch(self.server_name):
            raise ConfigError(
                f"server_name: letters, digits, '.', '_' and '-' (at most 63, a letter or digit first), "
                f"got {self.server_name!r}"
            )
        if self.database and not self.database.startswith(DATABASE_SCHEMES):
            raise ConfigError(
                "database: must be a PostgreSQL URL like postgresql://USER@HOST:PORT/DBNAME "
                "(leave it out for the SQLite file beside the logs)"
            )
        if self.database and not self.server_name:
            raise ConfigError(
                "server_name: --database needs --server-name: each server sharing the vote index "
                "writes log files named for it, so that two servers' day files never collide"
            )
        if self.secret and self.secret_file:
            raise ConfigError("secret: set ARENA_SECRET or --secret-file, not both")
        if self.database and not (self.secret or self.secret_file):
            raise ConfigError(
                "secret: --database needs a secret shared by every server (--secret-file FILE or "
                "ARENA_SECRET), so that each accepts the others' sessions and counts one client's "
                'rate limits and votes under one name (docs/deploy.md, "Several servers")'
            )

    def _check_schedule(self) -> None:
        every = self.snapshot_every_s  # a ConfigError for a duration it cannot read
        if self.notify_url and not self.notify_url.startswith(("https://", "http://")):
            raise ConfigError("notify_url: must be an http:// or https:// webhook URL (a Slack incoming webhook's)")
        if self.notify_url and not every:
            raise ConfigError("notify_url: announces each snapshot's changes, so it needs --snapshot-every (e.g. 24h)")

    @property
    def snapshot_every_s(self) -> float:
        """`snapshot_every` in seconds (0: no snapshots)."""
        return parse_duration("snapshot_every", self.snapshot_every) if self.snapshot_every else 0.0

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(f"ARENA_{f.name.upper()}")
            if raw is not None and raw != "" and f.name in _PARSERS:
                values[f.name] = _PARSERS[f.name](raw)
            elif raw is not None and raw != "":
                values[f.name] = _convert(f.name, raw, _field_type(f))
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


# (settings, test, what the message says they must be)
_RULES: tuple[tuple[tuple[str, ...], Any, str], ...] = (
    (
        (
            "max_concurrency",
            "max_input_chars",
            "max_turns",
            "queue_per_slot",
            "vllm_concurrency",
            "remote_concurrency",
            "transformers_kv_cache_tokens",
            "load_parallel",
            "battle_max_new_tokens",
        ),
        lambda v: v >= 1,
        "at least 1",
    ),
    (
        (
            "leaderboard_rounds",
            "leaderboard_min_battles",
            "leaderboard_votes_per_day",
            "rate_messages",
            "rate_votes",
            "rate_votes_day",
            "queue_size",
        ),
        lambda v: v >= 0,
        "0 (off / automatic) or more",
    ),
    (
        (
            "queue_timeout_s",
            "max_request_mb",
            "hub_every_min",
            "vllm_start_timeout_s",
            "session_idle_min",
            "board_lease_s",
        ),
        lambda v: v > 0,
        "> 0",
    ),
    (("category_prior_sd",), lambda v: 0 <= v <= 1000, "0 (not shrunk) to 1000 Elo points"),
    (("shutdown_grace_s",), lambda v: 0 <= v <= 3600, "0 to 3600 seconds (0: cut open connections off at once)"),
)


def parse_trusted_proxies(raw: str) -> int | tuple[str, ...]:
    """--trusted-proxies: a count ("1") or comma-separated addresses and networks ("127.0.0.1,10.0.0.0/8")."""
    text = raw.strip()
    if text.isdigit():
        return int(text)
    value = tuple(part.strip() for part in text.split(",") if part.strip())
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


# Settings whose text is read by a parser of their own, on the command line and in the environment alike.
_PARSERS = {"trusted_proxies": parse_trusted_proxies}


DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*")
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def parse_duration(name: str, text: str) -> float:
    """Seconds in "30m", "6h", "24h", "1d" (or "45s"); a ConfigError naming `name` otherwise."""
    match = DURATION.fullmatch(text)
    seconds = float(match.group(1)) * DURATION_UNITS[match.group(2)] if match else 0.0
    if seconds <= 0:
        raise ConfigError(
            f"{name}: must be a duration with its unit, like 30m, 6h, 24h or 1d (s, m, h, d), got {text!r}"
        )
    return seconds


def _field_type(f: dataclasses.Field) -> type:
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[operator]
    return Path if isinstance(default, Path) else type(default)


def _convert(name: str, raw: str, kind: type) -> Any:
    try:
        if kind is bool:
            lowered = raw.strip().lower()
            if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError(raw)
            return lowered in ("1", "true", "yes", "on")
        if issubclass(kind, Path):
            return Path(raw)
        if kind is tuple:  # comma-separated list
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        return kind(raw)  # type: ignore[call-arg]  # int, float or str here
    except ValueError:
        raise ConfigError(f"ARENA_{name.upper()}: cannot read {raw!r} as {kind.__name__}") from None


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
    add = parser.add_argument
    add("--models", dest="models_file", type=Path, help=f"models file (YAML); default {DEFAULT_MODELS_FILE}")
    add("--host", help="address to listen on; default 127.0.0.1 (use 0.0.0.0 to serve a network)")
    add("--port", type=int, help="port; default 7860")
    add("--share", action="store_true", default=None, help="create a public Gradio share link (needs internet)")
    add(
        "--log-dir",
        dest="log_dir",
        type=Path,
        help="where votes and transcripts go; default ./logs (/data/logs on Spaces)",
    )
    add(
        "--cache-dir",
        dest="cache_dir",
        type=Path,
        help="cache for dequantised weights; default ~/.cache/pairwise-arena",
    )
    add(
        "--no-preload",
        dest="preload",
        action="store_false",
        default=None,
        help="load models on first use instead of at start",
    )
    add(
        "--load-parallel",
        dest="load_parallel",
        type=int,
        help="models loading at once at start; default 2 (1: one after another)",
    )
    add("--max-concurrency", dest="max_concurrency", type=int, help="simultaneous generations per model; default 2")
    add(
        "--queue-timeout",
        dest="queue_timeout_s",
        type=float,
        help="seconds a request waits for a free slot; default 60",
    )
    add(
        "--vllm-python",
        dest="vllm_python",
        help="Python interpreter with vLLM installed; default: .venv-vllm beside the app if the installer made one; "
        "'none' serves every model with transformers",
    )
    add(
        "--vllm-start-timeout",
        dest="vllm_start_timeout_s",
        type=float,
        help="seconds a vLLM server may take to become ready; default 600",
    )
    add(
        "--vllm-concurrency",
        dest="vllm_concurrency",
        type=int,
        help="simultaneous generations per model served by vLLM, llama.cpp or transformers' continuous batching "
        "(they batch them); default 8",
    )
    add(
        "--remote-concurrency",
        dest="remote_concurrency",
        type=int,
        help="requests in flight to each replica of a `backend: openai` model without max_concurrency (the "
        "server batches them); default 16",
    )
    add(
        "--transformers-batching",
        dest="transformers_batching",
        choices=[True, False],
        type=lambda raw: _convert("transformers_batching", raw, bool),
        metavar="on|off",
        help="on|off: transformers serves a model's replies in one continuous batch (on) or one generate() per "
        "reply (off, the default until one chat is measured no slower on the batch)",
    )
    add(
        "--transformers-kv-cache-tokens",
        dest="transformers_kv_cache_tokens",
        type=int,
        help="tokens of the paged KV cache each transformers model allocates for continuous batching; default 8192",
    )
    add(
        "--llama-server",
        dest="llama_server",
        help="llama.cpp's llama-server binary; default: .llama.cpp/bin/llama-server beside the app (the installer "
        "builds it) or one on PATH; 'none' keeps `auto` GGUF models off llama.cpp",
    )
    add(
        "--queue-per-slot",
        dest="queue_per_slot",
        type=int,
        help="requests that may wait per generation slot of a model before new ones are refused at once; default 4",
    )
    add("--max-input-chars", dest="max_input_chars", type=int, help="longest accepted message; default 12000")
    add(
        "--max-turns",
        dest="max_turns",
        type=int,
        help="turns per conversation before a new round is needed; default 20",
    )
    add(
        "--battle-max-new-tokens",
        dest="battle_max_new_tokens",
        type=int,
        help="one length cap for both models of a battle (their own would tell them apart); default 256",
    )
    add(
        "--pairing",
        dest="pairing",
        choices=PAIRING_MODES,
        help="how a battle's pair is chosen: smart (default) favours the pair whose vote narrows the ratings most, "
        "new models first; weighted draws by the models-file weights alone. Weight 0 keeps a model out in both",
    )
    add(
        "--trusted-proxies",
        dest="trusted_proxies",
        type=_cli(parse_trusted_proxies),
        metavar="N|ADDRESSES",
        help="the reverse proxies in front of the app: how many (1 on Hugging Face Spaces; the client address is "
        "read from X-Forwarded-For only that far) or their comma-separated addresses and networks "
        "(127.0.0.1,10.0.0.0/8: only requests from them are believed; --auth-header needs this); default 0",
    )
    add(
        "--ip-logging",
        dest="ip_logging",
        choices=IP_LOGGING_MODES,
        help="how client addresses are kept in the logs: a keyed hash (default), raw, or none",
    )
    add(
        "--no-transcripts",
        dest="log_transcripts",
        action="store_false",
        default=None,
        help="do not log chat transcripts (votes are still recorded, with the conversations they judge)",
    )
    add(
        "--leaderboard-rounds",
        dest="leaderboard_rounds",
        type=int,
        help="bootstrap rounds for the leaderboard's 95%% intervals; default 200 (0: none)",
    )
    add(
        "--leaderboard-include-named",
        dest="leaderboard_include_named",
        action="store_true",
        default=None,
        help="also count side-by-side votes where the model names were visible",
    )
    add(
        "--keep-stopped",
        dest="leaderboard_drop_stopped",
        action="store_false",
        default=None,
        help="keep battles in which a reply was stopped early",
    )
    add(
        "--leaderboard-min-battles",
        dest="leaderboard_min_battles",
        type=int,
        help="models with fewer battles are shown as preliminary, without a rank; default 50 (0: none)",
    )
    add(
        "--leaderboard-votes-per-day",
        dest="leaderboard_votes_per_day",
        type=int,
        help="count at most this many votes per voter per day on the leaderboard; default 0 (no cap)",
    )
    add(
        "--leaderboard-exclude-flagged",
        dest="leaderboard_exclude_flagged",
        action="store_true",
        default=None,
        help="leave out the votes of voters whose votes disagree with everyone else's far beyond chance",
    )
    add(
        "--identity-words",
        dest="identity_words",
        help="extra comma-separated words that disqualify a battle when a reply contains one",
    )
    add(
        "--merge-fingerprints",
        dest="leaderboard_merge_fingerprints",
        metavar="NAMES",
        help="comma-separated model names whose fingerprints (weights, engine, template) the leaderboard rates "
        "as one row; '*' for every model. Default: a row per fingerprint when a name's changed",
    )
    add(
        "--leaderboard-families",
        dest="leaderboard_families",
        metavar="PREFIXES",
        help="comma-separated name prefixes, each a family of variants (e.g. my-model-): the leaderboard says "
        "when its top row is the best of several, and how much of its lead that alone explains",
    )
    add(
        "--categories-file",
        dest="categories_file",
        metavar="FILE",
        help="a YAML file of categories you declare (a name and a rule: keywords, a regular expression on the first "
        "prompt, a minimum length, a language); each becomes a board in the Leaderboard's Category menu "
        "(docs/leaderboard.md). A malformed file stops the start with its line and the reason",
    )
    add(
        "--category-prior-sd",
        dest="category_prior_sd",
        type=float,
        help="a declared category's board is shrunk toward the overall board by a normal prior of this standard "
        "deviation in Elo points, so that a small category does not swing wildly; default 50 (0: not shrunk)",
    )
    add(
        "--visitor-tags",
        dest="visitor_tags",
        action="store_true",
        default=None,
        help="let visitors tag a battle with one of the declared categories before voting (needs --categories-file); "
        "the tag is kept in the vote record and counts for the category alongside its rule",
    )
    add(
        "--database",
        dest="database",
        help="keep the vote index in this PostgreSQL database (postgresql://USER@HOST:PORT/DBNAME), shared by "
        "several servers; default: an SQLite file beside the logs. Needs --server-name",
    )
    add(
        "--server-name",
        dest="server_name",
        help="this server's name among those sharing --database; its log files are named YYYY-MM-DD-NAME-conv.json",
    )
    add(
        "--board-lease-s",
        dest="board_lease_s",
        type=float,
        help="with --database, one server builds the board; when it falls silent this long (it died), another "
        "takes over. Keep it above the longest board build; default 30",
    )
    add(
        "--secret-file",
        dest="secret_file",
        help="a file holding the secret every server of this arena shares (at least 32 characters; or set "
        "ARENA_SECRET): sessions signed by one are accepted by the others, addresses hash alike. Needed "
        "with --database; default: a random key per process",
    )
    add(
        "--operator-key-file",
        dest="operator_key_file",
        help="a file holding the operator key (at least 16 characters; or set ARENA_OPERATOR_KEY): the "
        "Leaderboard tab's voter check and downloads of every conversation answer only requests that carry it; "
        "without a key they are not offered, whatever address the app listens on",
    )
    add(
        "--ui-export",
        dest="ui_export",
        choices=("auto", "on", "off"),
        help="the operator's views in the Leaderboard tab: auto (default) offers them when an operator key is "
        "set; on refuses to start without one; off never offers them",
    )
    add(
        "--auth-file",
        dest="auth_file",
        help="require a login: a file of username:password lines (passwords can also come from ARENA_AUTH)",
    )
    add(
        "--hf-oauth",
        dest="hf_oauth",
        action="store_true",
        default=None,
        help="require 'Sign in with Hugging Face' (on a Space with hf_oauth: true)",
    )
    add(
        "--auth-header",
        dest="auth_header",
        metavar="HEADER",
        help="sign-in through a proxy in front (oauth2-proxy and the like): the person's name comes from this "
        "header (e.g. X-Forwarded-User), believed only from --trusted-proxies addresses; any other request with "
        "it is refused, and so is a page request from the proxy without it",
    )
    add(
        "--auth-email-header",
        dest="auth_email_header",
        metavar="HEADER",
        help="with --auth-header: the person's email from this header (e.g. X-Forwarded-Email); --operators may "
        "name people by it",
    )
    add(
        "--operators",
        dest="operators",
        type=lambda raw: tuple(part.strip() for part in raw.split(",") if part.strip()),
        metavar="NAMES",
        help="with a sign-in: comma-separated user names (or emails) who see the operator's views (voter check, "
        "downloads) without an operator key",
    )
    add(
        "--rate-messages",
        dest="rate_messages",
        type=int,
        help="chat messages per client per minute; default 20 (0: off)",
    )
    add("--rate-votes", dest="rate_votes", type=int, help="votes per client per minute; default 30 (0: off)")
    add("--rate-votes-day", dest="rate_votes_day", type=int, help="votes per client per day; default 200 (0: off)")
    add(
        "--queue-size",
        dest="queue_size",
        type=int,
        help="UI requests that may wait before new ones are refused; default 0 = sized to the models",
    )
    add("--max-request-mb", dest="max_request_mb", type=float, help="largest request body or upload in MB; default 2")
    add(
        "--hub-dataset",
        dest="hub_dataset",
        help="also push the logs to this Hugging Face dataset repo (owner/name; needs HF_TOKEN and internet)",
    )
    add("--hub-every", dest="hub_every_min", type=float, help="minutes between pushes to --hub-dataset; default 10")
    add(
        "--snapshot-every",
        dest="snapshot_every",
        metavar="DURATION",
        help="take a board snapshot into LOG_DIR/snapshots every DURATION (30m, 6h, 24h, 1d), one server among "
        "several; with --hub-dataset the snapshots and exports go to the Hub too; default off",
    )
    add(
        "--notify-url",
        dest="notify_url",
        metavar="URL",
        help="POST each new snapshot's changes (rank moves, new models) to this webhook as Slack-compatible JSON "
        "(needs --snapshot-every); also ARENA_NOTIFY_URL, which keeps the URL out of `ps`",
    )
    add(
        "--session-idle-min",
        dest="session_idle_min",
        type=float,
        help="minutes after which an unused browser session is removed from memory; default 30",
    )
    add(
        "--shutdown-grace-s",
        dest="shutdown_grace_s",
        type=float,
        help="on Ctrl-C or SIGTERM, every reply is stopped at once (kept as stopped) and open connections (browser "
        "tabs, API streams) get this many seconds to close before they are cut off and the engines stop; default 5",
    )
    return parser


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

"""The operator: who may see data about other people (the Leaderboard tab's voter check and its
exports, which hold every voter's conversations and hashed ids).

With a sign-in (the proxy's header, Gradio's login or Hugging Face's), the operators can be named
people instead (`--operators alice,bob`, by user name or the proxy's email): a request signed in as
one of them is admitted without a key, and no key is configured then (Settings refuses both). The
name is the one `webui.access.clients.client_info` believed (a trusted proxy's header, or a login
Gradio checked), so naming operators is only offered with a sign-in.

Otherwise the operator is whoever sends the operator key, configured by `ARENA_OPERATOR_KEY` (environment
only: `ps` shows arguments) or `--operator-key-file FILE`. Nothing else makes a request the
operator's: not the address the server listens on (behind a reverse proxy or a tunnel the app
listens on 127.0.0.1 and every visitor arrives from there), not the client's address, not a
visitor login. With no key configured the operator's views are not offered at all.

Each request proves itself (the key is an input of every operator event, so a REST call with
no cookie is checked like the page): the key is compared in constant time (`hmac.compare_digest`
on SHA-256 digests, so neither the content nor the length of the key shows in the answer's
timing), and each client (`webui.access.ratelimit.client_key`: its user or address) may offer
at most `WRONG_KEYS_PER_MINUTE` wrong keys a minute; after that every key it offers, the right
one included, is refused until the minute has passed, so an answer never tells a guesser
anything. This module holds no Gradio types; `webui.ui.leaderboard_tab` wires it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import stat
import time
from collections.abc import Callable
from pathlib import Path

from webui.access.ratelimit import Limit, RateLimiter
from webui.config import Settings
from webui.errors import ArenaError, ConfigError
from webui.records.events import ClientInfo

log = logging.getLogger(__name__)

MIN_KEY_CHARS = 16
WRONG_KEYS_PER_MINUTE = 10  # a 16-character key is out of reach at any such rate; this keeps logs quiet
WRONG_KEY = "operator"
HOW_TO_ENABLE = (
    "set the environment variable ARENA_OPERATOR_KEY (at least 16 characters) or start with --operator-key-file FILE"
)


class OperatorRefused(ArenaError):
    """The request is not the operator's; the message is safe to show to anyone."""


def load_operator_key(settings: Settings) -> str:
    """The configured key ("" for none), from settings.operator_key or the file
    settings.operator_key_file names (its one line). A short key stops the start: it would be the
    only thing between the internet and every conversation."""
    if settings.operator_key_file:
        key = _read_key_file(Path(settings.operator_key_file))
        origin = f"operator_key_file ({settings.operator_key_file})"
    else:
        key, origin = settings.operator_key, "ARENA_OPERATOR_KEY"
    if key and (len(key) < MIN_KEY_CHARS or key != key.strip()):
        raise ConfigError(
            f"{origin}: the operator key must be at least {MIN_KEY_CHARS} characters without "
            'surrounding spaces; make one with: python -c "import secrets; print(secrets.token_urlsafe(24))"'
        )
    return key


def _read_key_file(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigError(f"operator_key_file: cannot read {path}: {exc.strerror or exc}") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ConfigError(f"operator_key_file: {path} must hold the key alone, on one line")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("operator key file %s is readable by other users; chmod 600 it", path)
    return lines[0]


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class OperatorGate:
    """Decides, per request, whether it carries the operator key."""

    def __init__(
        self, key: str = "", clock: Callable[[], float] = time.monotonic, operators: tuple[str, ...] = ()
    ) -> None:
        self._digest = _digest(key) if key else None
        self.operators = frozenset(operators)
        self._wrong = RateLimiter({WRONG_KEY: Limit(WRONG_KEYS_PER_MINUTE, 60.0, "wrong operator keys")}, clock=clock)

    @classmethod
    def from_settings(cls, settings: Settings) -> OperatorGate:
        """The gate for these settings; none when `--ui-export off` turns the views off."""
        if settings.ui_export == "off":
            return cls()
        return cls(load_operator_key(settings), operators=settings.operators)

    @property
    def enabled(self) -> bool:
        return self._digest is not None or bool(self.operators)

    def admit(self, offered: str | None, client: ClientInfo) -> None:
        """Return if the client is a named operator or `offered` is the operator key; else raise
        OperatorRefused, or RateLimited (also for the right key) once the client has offered too
        many wrong ones this minute."""
        if self.operators:
            if (client.user and client.user in self.operators) or (client.email and client.email in self.operators):
                return
            who = f"signed in as {client.user}" if client.user else "not signed in"
            raise OperatorRefused(f"Only this arena's operators (named people) see this; you are {who}.")
        if self._digest is None:
            raise OperatorRefused(f"The operator's views are off on this server; to offer them, {HOW_TO_ENABLE}.")
        if not offered:
            raise OperatorRefused("This needs the operator key: enter it in the Operator key box.")
        if self._wrong.remaining(WRONG_KEY, client) == 0:
            self._wrong.check(WRONG_KEY, client)  # raises RateLimited, naming the wait; counts nothing
        if hmac.compare_digest(_digest(offered), self._digest):
            return
        log.warning("a request offered a wrong operator key")
        self._wrong.check(WRONG_KEY, client)  # counts it
        raise OperatorRefused("Wrong operator key.")

"""Optional login for the web UI: username/password pairs, or Hugging Face OAuth on a Space.

Off by default: a local arena has one user. Turned on by any of
  * `--auth-file FILE`   one `username:password` per line (`#` starts a comment)
  * `ARENA_AUTH=alice:pw1,bob:pw2`   environment only, so that passwords never show in `ps`
  * `--hf-oauth`         "Sign in with Hugging Face" (a Space with `hf_oauth: true` in its README)

Gradio does the login itself (its /login form and session cookie, or `auth_dependency`); this
module only turns settings into the arguments `gradio.mount_gradio_app` takes, so the check is the
same code path Gradio tests. The logged-in name reaches handlers as `gr.Request.username`, which
`webui.access.clients.client_info` reads, so rate limits and logs count per user.

The HTTP API (/v1) is not behind this login; it has its own keys (`ARENA_API_KEYS`). A third way to
sign in, through a proxy in front (`--auth-header`), is `webui.access.signin`'s.
"""

from __future__ import annotations

import hmac
import logging
import os
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from webui.config import Settings
from webui.errors import ConfigError

log = logging.getLogger(__name__)

AUTH_MESSAGE = "Pairwise Arena: please log in."
OAUTH_LOGIN_PATH = "/login/huggingface"


def parse_credentials(text: str, origin: str, *, separator: str = "\n") -> dict[str, str]:
    """`username:password` entries; the password may itself contain ':'. Duplicates and blank
    names are refused, since either would make it unclear which password is meant."""
    creds: dict[str, str] = {}
    for number, raw in enumerate(text.split(separator), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{origin}, entry {number}" if separator == "," else f"{origin}, line {number}"
        user, sep, password = line.partition(":")
        user = user.strip()
        if not sep or not user or not password:
            raise ConfigError(f"{where}: expected 'username:password' with both parts non-empty")
        if user in creds:
            raise ConfigError(f"{where}: user {user!r} is listed twice")
        creds[user] = password
    return creds


def load_credentials(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """All password logins: the auth file's and ARENA_AUTH's (settings.auth), merged."""
    creds: dict[str, str] = {}
    if settings.auth_file:
        creds.update(_read_auth_file(Path(settings.auth_file)))
    if settings.auth:
        for user, password in parse_credentials(settings.auth, "ARENA_AUTH", separator=",").items():
            if user in creds:
                raise ConfigError(f"ARENA_AUTH: user {user!r} is also in {settings.auth_file}; keep one")
            creds[user] = password
    return creds


def _read_auth_file(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigError(f"auth_file: cannot read {path}: {exc.strerror or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("auth file %s is readable by other users; chmod 600 it", path)
    creds = parse_credentials(text, str(path))
    if not creds:
        raise ConfigError(f"auth_file: {path} has no 'username:password' lines")
    return creds


def password_checker(creds: Mapping[str, str]) -> Callable[[str, str], bool]:
    """Gradio's `auth` callable. Compares in constant time and does the same work for unknown
    users, so that response times do not tell which usernames exist."""
    stored = {user: password.encode() for user, password in creds.items()}
    decoy = os.urandom(16)

    def check(username: str, password: str) -> bool:
        expected = stored.get(username)
        matches = hmac.compare_digest(password.encode(), expected if expected is not None else decoy)
        return expected is not None and matches

    return check


def oauth_username(request: Any) -> str | None:
    """Gradio's `auth_dependency` for Hugging Face OAuth: the signed-in user from the session that
    gradio.oauth's callback filled, or None (not signed in, or the login expired)."""
    try:
        session = request.session
    except (AssertionError, AttributeError):  # no SessionMiddleware: nobody can be signed in
        return None
    info = session.get("oauth_info") or {}
    expires_at = info.get("expires_at")
    if expires_at is not None and expires_at < time.time():
        return None
    user = (info.get("userinfo") or {}).get("preferred_username")
    return str(user) if user else None


def check_oauth_available(environ: Mapping[str, str] | None = None) -> None:
    """OAuth only works on a Space that asked for it (`hf_oauth: true` sets OAUTH_CLIENT_ID and
    friends) and with authlib installed; say which part is missing instead of failing at login."""
    environ = os.environ if environ is None else environ
    if not environ.get("SPACE_ID"):
        raise ConfigError(
            "hf_oauth: Hugging Face OAuth only works on a Space (SPACE_ID is not set); "
            "use --auth-file or ARENA_AUTH for a password login elsewhere"
        )
    if not environ.get("OAUTH_CLIENT_ID"):
        raise ConfigError(
            "hf_oauth: OAUTH_CLIENT_ID is not set; add `hf_oauth: true` to the Space's README front matter"
        )
    try:
        import authlib  # noqa: F401
        import itsdangerous  # noqa: F401
    except ImportError:
        raise ConfigError(
            "hf_oauth: needs the authlib and itsdangerous packages (pip install 'gradio[oauth]')"
        ) from None


def login_enabled(settings: Settings) -> bool:
    """Does anyone have to sign in: the app's own login, Hugging Face's, or the proxy's header?"""
    return bool(settings.auth_file or settings.auth or settings.hf_oauth or settings.auth_header)


def gradio_auth_kwargs(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for `gr.mount_gradio_app`: none (no login), `auth` (passwords) or
    `auth_dependency` (OAuth; the caller also has to `install_oauth`)."""
    if settings.hf_oauth:
        check_oauth_available()
        return {"auth_dependency": oauth_username}
    creds = load_credentials(settings)
    if not creds:
        return {}
    log.info("login required for the web UI (%d user%s)", len(creds), "" if len(creds) == 1 else "s")
    return {"auth": password_checker(creds), "auth_message": AUTH_MESSAGE}


def install_oauth(app: Any) -> None:
    """Add Gradio's Hugging Face login routes and session cookie to the outer FastAPI app, and send
    visitors who are not signed in to the login page instead of a bare 401."""
    from gradio.oauth import attach_oauth

    app.add_middleware(_LoginRedirect)  # added first = inside the session middleware below
    attach_oauth(app)


class _LoginRedirect:
    """ASGI middleware: GET / without a signed-in user redirects to the Hugging Face login."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("method") == "GET" and scope.get("path") == "/":
            from starlette.requests import Request
            from starlette.responses import RedirectResponse

            if oauth_username(Request(scope)) is None:
                await RedirectResponse(f"{OAUTH_LOGIN_PATH}?_target_url=/")(scope, receive, send)
                return
        await self.app(scope, receive, send)

"""Who owns a Gradio session: a signed secret in an HttpOnly cookie, bound to each session hash
on first use and required on every later request that names it (docs/deploy.md, "Sessions").

Gradio trusts whoever sends a session hash, which the client picks and access logs show; here the
first request binds the hash to its secret, and a request without that secret is refused with 403
before Gradio sees it. The secret is random and never logged; it is signed with a key derived from
the arena's shared secret (--secret-file / ARENA_SECRET), so that every server behind one proxy
accepts it, or without one with a key that lives only in this process. How long a session is kept: webui.server.reaper.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from webui.config import Settings
from webui.records.privacy import derived_key, load_shared_secret
from webui.server.security import read_body, send_json

COOKIE = "arena-session"  # SameSite=None; Secure; Partitioned: sent from inside an iframe over https
COOKIE_LAX = "arena-session-lax"  # SameSite=Lax: sent over plain http, where a Secure cookie is not kept
ISSUE_PATHS = ("/", "/config", "/config/")  # the page, and gradio_client's first request
SESSION_PATHS = ("/gradio_api/heartbeat/", "/gradio_api/stream/")  # GET paths whose next segment is a session
MAX_SESSIONS = 10_000  # as Gradio's own state_session_capacity: the oldest binding (and its state) goes first
NO_SECRET = (
    "This request names a session but carries no valid session cookie. Reload the page "
    "(gradio_client: create a new Client), and allow cookies for this site."
)
NOT_YOURS = "This session belongs to another browser. Reload the page to start a session of your own."


# ---- the secret ----------------------------------------------------------------------------
class SecretIssuer:
    """Random secrets signed with `key` (by default one that never leaves the process): a cookie no
    server holding the key issued (made up, or from before a restart with a per-process key) is no
    secret at all."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def issue(self) -> str:
        token = secrets.token_urlsafe(24)
        return f"{token}.{self._sign(token)}"

    def verify(self, value: str | None) -> str | None:
        token, _, signature = (value or "").partition(".")
        if token and signature and hmac.compare_digest(signature, self._sign(token)):
            return value
        return None

    def _sign(self, token: str) -> str:
        return hmac.new(self._key, token.encode(), hashlib.sha256).hexdigest()[:32]


# ---- who owns which session ------------------------------------------------------------------
class SessionBook:
    """session hash -> (digest of the owner's secret, when last seen), oldest first. Thread-safe;
    `on_evict` is told of bindings dropped for room, so that their Gradio state goes too."""

    def __init__(self, capacity: int = MAX_SESSIONS, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = capacity
        self.on_evict: Callable[[str], None] = lambda session_hash: None
        self._clock = clock
        self._owners: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, session_hash: str, secret: str) -> bool:
        """True if the session is (now) bound to `secret`; False if it belongs to another one."""
        digest = hashlib.sha256(secret.encode()).digest()
        evicted: list[str] = []
        with self._lock:
            owner = self._owners.get(session_hash)
            if owner is not None and not hmac.compare_digest(owner[0], digest):
                return False
            self._owners[session_hash] = (digest, self._clock())
            self._owners.move_to_end(session_hash)
            while len(self._owners) > self.capacity:
                evicted.append(self._owners.popitem(last=False)[0])
        for session_hash in evicted:
            self.on_evict(session_hash)
        return True

    def idle(self, idle_s: float) -> list[str]:
        cutoff = self._clock() - idle_s
        with self._lock:
            return [h for h, (_, seen) in self._owners.items() if seen < cutoff]

    def touch(self, session_hash: str) -> None:
        with self._lock:
            if session_hash in self._owners:
                self._owners[session_hash] = (self._owners[session_hash][0], self._clock())

    def forget(self, session_hash: str) -> None:
        with self._lock:
            self._owners.pop(session_hash, None)

    def __contains__(self, session_hash: object) -> bool:
        return session_hash in self._owners

    def __len__(self) -> int:
        return len(self._owners)


# ---- the middleware --------------------------------------------------------------------------
ASGIApp = Callable[..., Any]


class BindSessions:
    """ASGI middleware: issues the secret, and refuses a request naming a session bound to
    another secret (or naming one without a secret). Runs inside the request-size limit, so the
    bodies it reads to find `session_hash` are already capped."""

    def __init__(self, app: ASGIApp, book: SessionBook, issuer: SecretIssuer) -> None:
        self.app = app
        self.book = book
        self.issuer = issuer

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        secret = self.issuer.verify(_cookie_secret(scope))
        hashes = list(_hashes_in_url(scope))
        if _may_carry_session(scope):
            body, receive = await read_body(receive)
            hashes += _hashes_in_body(body)
        for session_hash in dict.fromkeys(hashes):
            refusal = NO_SECRET if secret is None else None if self.book.claim(session_hash, secret) else NOT_YOURS
            if refusal:
                await send_json(send, 403, {"error": refusal})
                return
        if secret is None and scope.get("method") == "GET" and scope.get("path") in ISSUE_PATHS:
            send = _with_cookies(send, self.issuer.issue())
        await self.app(scope, receive, send)


def _cookie_secret(scope: dict) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            with contextlib.suppress(Exception):  # a malformed cookie header is no secret
                jar.load(value.decode("latin-1"))
    for name in (COOKIE, COOKIE_LAX):
        if name in jar:
            return jar[name].value
    return None


def _hashes_in_url(scope: dict) -> Iterable[str]:
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    yield from query.get("session_hash", [])
    path = scope.get("path", "")
    if scope.get("method") == "GET":
        for prefix in SESSION_PATHS:
            if path.startswith(prefix):
                rest = path[len(prefix) :].split("/", 1)[0]
                if rest:
                    yield rest


def _may_carry_session(scope: dict) -> bool:
    """Gradio's POST bodies with a `session_hash` (queue/join, cancel, run, stream, ...)."""
    return scope.get("method") == "POST" and scope.get("path", "").startswith("/gradio_api/")


def _hashes_in_body(body: bytes) -> list[str]:
    if not body.lstrip().startswith(b"{"):
        return []
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return []  # Gradio answers 422 itself; webui.server.gradio_calls refuses a too deep one
    value = data.get("session_hash") if isinstance(data, dict) else None
    return [value] if isinstance(value, str) and value else []


def _with_cookies(send: Any, secret: str) -> Any:
    cookies = [
        f"{COOKIE}={secret}; Path=/; HttpOnly; SameSite=None; Secure; Partitioned",
        f"{COOKIE_LAX}={secret}; Path=/; HttpOnly; SameSite=Lax",
    ]

    async def sending(message: dict) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            headers += [(b"set-cookie", c.encode("latin-1")) for c in cookies]
            message = {**message, "headers": headers}
        await send(message)

    return sending


def bind_sessions(app: Any, key: bytes | None = None) -> SessionBook:
    """Add the middleware to the outer FastAPI app; call it before the other middleware is added,
    so that it runs inside them (after the size limit). `key` signs the secrets (None: a random
    one). Returns the book (also `app.state.sessions`)."""
    book = SessionBook()
    app.add_middleware(BindSessions, book=book, issuer=SecretIssuer(key))
    app.state.sessions = book
    return book


def session_key(settings: Settings) -> bytes | None:
    """The signing key derived from the shared secret; None without one (a key per process)."""
    shared = load_shared_secret(settings.secret, settings.secret_file)
    return derived_key(shared, "session cookie") if shared else None

"""Browser sessions: who owns a Gradio session, and how long the server keeps one.

Ownership (issue 13 item 2). Gradio names a session by a `session_hash` that the *client* picks
and that shows in access-log lines; Gradio itself trusts whoever sends it, so anybody who learns
one could vote in that battle, read its conversation, send turns and take its event stream. Here
a session belongs to a secret the server issued:

* the page (`GET /`) and Gradio's config (`GET /config`, gradio_client's first request) set a
  random, signed secret in an HttpOnly cookie when the request carries no valid one (twice: a
  `SameSite=None; Secure; Partitioned` cookie for the page inside a Space's iframe, and a
  `SameSite=Lax` one for plain http, as Gradio does for its own login cookie);
* the first request that names a session hash binds it to the request's secret; every later one
  that names it (the queue/join and cancel bodies, the queue/data and deep_link query strings, the
  heartbeat and stream paths, ...) must carry the same secret, or it is refused with 403 and a
  message before Gradio sees it. A request that names a session and carries no valid secret is
  refused too, so a script without cookies cannot claim a session nobody can then protect.

Nothing the client sends or the logs show lets anyone derive the secret: it is 192 random bits,
signed with a key that lives only in this process (a restart invalidates every cookie, as it
ends every session anyway), and never logged.

Lifetime (issue 13 item 6e). Gradio keeps, for every session, a copy of each component's config
(365 KiB for this page, measured with tracemalloc as sessions are created) until 10,000 sessions
exist, whether or not the browser comes back; its own clean-up only empties `gr.State` values. `expire_idle_sessions` removes a session unused
for `Settings.session_idle_min` minutes (an open tab's status timer uses it every 2 s; a session
with an event still queued or running is kept), and its binding with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import hmac
import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from webui.config import Settings
from webui.server.security import send_json

log = logging.getLogger(__name__)

COOKIE = "arena-session"  # SameSite=None; Secure; Partitioned: sent from inside an iframe over https
COOKIE_LAX = "arena-session-lax"  # SameSite=Lax: sent over plain http, where a Secure cookie is not kept
ISSUE_PATHS = ("/", "/config", "/config/")  # the page, and gradio_client's first request
SESSION_PATHS = ("/gradio_api/heartbeat/", "/gradio_api/stream/")  # GET paths whose next segment is a session
MAX_SESSIONS = 10_000  # as Gradio's own state_session_capacity: the oldest binding (and its state) goes first
NO_SECRET = ("This request names a session but carries no valid session cookie. Reload the page "
             "(gradio_client: create a new Client), and allow cookies for this site.")
NOT_YOURS = "This session belongs to another browser. Reload the page to start a session of your own."


# ---- the secret ----------------------------------------------------------------------------
class SecretIssuer:
    """Random secrets signed with a key that never leaves the process: a cookie the server did not
    issue (made up, or from before a restart) is no secret at all."""

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
            body, receive = await _read_body(receive)
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
                rest = path[len(prefix):].split("/", 1)[0]
                if rest:
                    yield rest


def _may_carry_session(scope: dict) -> bool:
    """Gradio's POST bodies with a `session_hash` (queue/join, cancel, run, stream, ...)."""
    return scope.get("method") == "POST" and scope.get("path", "").startswith("/gradio_api/")


async def _read_body(receive: Any) -> tuple[bytes, Any]:
    """The whole body, and a `receive` that hands it on (then the client's own messages)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> dict:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


def _hashes_in_body(body: bytes) -> list[str]:
    if not body.lstrip().startswith(b"{"):
        return []
    try:
        data = json.loads(body)
    except ValueError:
        return []  # Gradio answers 422 itself
    value = data.get("session_hash") if isinstance(data, dict) else None
    return [value] if isinstance(value, str) and value else []


def _with_cookies(send: Any, secret: str) -> Any:
    cookies = [f"{COOKIE}={secret}; Path=/; HttpOnly; SameSite=None; Secure; Partitioned",
               f"{COOKIE_LAX}={secret}; Path=/; HttpOnly; SameSite=Lax"]

    async def sending(message: dict) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            headers += [(b"set-cookie", c.encode("latin-1")) for c in cookies]
            message = {**message, "headers": headers}
        await send(message)

    return sending


def bind_sessions(app: Any) -> SessionBook:
    """Add the middleware to the outer FastAPI app; call it before the other middleware is added,
    so that it runs inside them (after the size limit). Returns the book (also `app.state.sessions`)."""
    book = SessionBook()
    app.add_middleware(BindSessions, book=book, issuer=SecretIssuer())
    app.state.sessions = book
    return book


# ---- idle sessions ---------------------------------------------------------------------------
class SessionReaper:
    """Removes sessions unused for `idle_s`: Gradio's per-session state and the binding."""

    def __init__(self, blocks: Any, book: SessionBook, idle_s: float) -> None:
        self.blocks = blocks
        self.book = book
        self.idle_s = idle_s
        book.on_evict = self.drop

    def sweep(self) -> int:
        """One pass; returns how many sessions were removed."""
        busy = {h for h, ids in self.blocks._queue.pending_event_ids_session.items() if ids}
        removed = 0
        for session_hash in self.book.idle(self.idle_s):
            if session_hash in busy:
                self.book.touch(session_hash)  # a long reply is use
                continue
            self.drop(session_hash)
            removed += 1
        # sessions nobody bound (gradio_api/call events are sessions of their own)
        holder = self.blocks.state_holder
        cutoff = datetime.datetime.now() - datetime.timedelta(seconds=self.idle_s)
        for session_hash, last in list(holder.time_last_used.items()):
            if last < cutoff and session_hash not in busy and session_hash not in self.book:
                self.drop(session_hash)
                removed += 1
        return removed

    def drop(self, session_hash: str) -> None:
        holder = self.blocks.state_holder
        holder.delete_state(session_hash)  # runs gr.State delete callbacks
        with holder.lock:
            holder.session_data.pop(session_hash, None)
            holder.time_last_used.pop(session_hash, None)
        queue = self.blocks._queue
        if not queue.pending_event_ids_session.get(session_hash):
            queue.pending_event_ids_session.pop(session_hash, None)
            queue.pending_messages_per_session.pop(session_hash, None)
        self.book.forget(session_hash)

    async def run(self, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                removed = self.sweep()
            except Exception:  # noqa: BLE001 - a failed sweep must not end the loop
                log.exception("session sweep failed")
                continue
            if removed:
                log.debug("removed %d idle sessions", removed)


def expire_idle_sessions(app: Any, blocks: Any, book: SessionBook, settings: Settings) -> SessionReaper:
    """Run a `SessionReaper` for as long as the app is being served (wraps the app's lifespan, as
    `gr.mount_gradio_app` does)."""
    idle_s = settings.session_idle_min * 60
    reaper = SessionReaper(blocks, book, idle_s)
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            task = asyncio.create_task(reaper.run(every_s=min(60.0, max(0.5, idle_s / 4))))
            try:
                yield state
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app.router.lifespan_context = lifespan
    return reaper

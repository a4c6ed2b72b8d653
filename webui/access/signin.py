"""Sign-in through a trusted proxy (`--auth-header`): who may reach the app at all.

A proxy in front (nginx with oauth2-proxy, docs/deploy.md) signs people in and passes their name
in a header. That header is only as good as the address it comes from, so with `--auth-header`:

  * a request from any address that is not a `--trusted-proxies` address and carries the header
    (or the email header) is refused with 403: it is a forgery, never a sign-in;
  * a request for the page or Gradio's API from any other address is refused too, header or not:
    reaching the app around the proxy would skip the sign-in;
  * a request for the page or Gradio's API from the proxy without the header is refused: the proxy
    must have signed the person in, and a request it passes unsigned is a misconfiguration.

The HTTP API (/v1) keeps its own keys (`ARENA_API_KEYS`, webui.api) and /healthz stays open to
health checks: from the proxy they pass with or without the header, from elsewhere without it.
The name itself is read by `webui.access.clients.client_info`, which believes the header only from
a trusted address; this middleware makes sure no handler ever sees a request that breaks the rules.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from webui.access.clients import is_trusted_peer
from webui.config import Settings

log = logging.getLogger(__name__)

OPEN_PATHS = ("/healthz",)  # exact paths that need no sign-in
OPEN_PREFIXES = ("/v1/",)  # the HTTP API: its own keys


def refusal(peer: str | None, path: str, headers: dict[str, str], settings: Settings) -> str | None:
    """Why a request must be refused under header sign-in, or None when it may pass. `headers`
    holds the request's header names in lower case."""
    if not settings.auth_header:
        return None
    names = [name.lower() for name in (settings.auth_header, settings.auth_email_header) if name]
    signed = any(headers.get(name, "").strip() for name in names)
    carried = any(name in headers for name in names)
    open_path = path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)
    if not is_trusted_peer(peer, settings.trusted_proxies):
        if carried:
            return (
                f"Refused: the {settings.auth_header} header is accepted only from this arena's sign-in proxy, "
                "and this request did not come from it."
            )
        if not open_path:
            return "Refused: this arena signs people in through its proxy; open it through the proxy's address."
        return None
    if not signed and not open_path:
        return f"Refused: the sign-in proxy sent this request without the {settings.auth_header} header."
    return None


class ProxySignIn:
    """ASGI middleware in front of everything (the page, Gradio's API, /v1): applies `refusal`."""

    def __init__(self, app: Any, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client")
            peer = str(client[0]) if client else None
            headers = {
                key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])
            }
            reason = refusal(peer, scope.get("path", ""), headers, self.settings)
            if reason is not None:
                # no address here: the access log keeps it as --ip-logging says (webui/server/accesslog.py)
                log.warning("sign-in: refused %s: %s", scope.get("path", ""), reason)
                await _refuse(scope, send, reason)
                return
        await self.app(scope, receive, send)


async def _refuse(scope: dict, send: Any, reason: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008, "reason": reason[:120]})
        return
    payload = json.dumps({"error": reason}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def install_proxy_signin(app: Any, settings: Settings) -> None:
    """Put the check in front of the outer FastAPI app (added last: outermost, before any other
    middleware reads a body), and say at start what is and is not behind the sign-in."""
    if not settings.auth_header:
        return
    app.add_middleware(ProxySignIn, settings=settings)
    log.info(
        "sign-in through the proxy: the person's name from %s, believed only from %s",
        settings.auth_header,
        ", ".join(settings.trusted_proxies) if isinstance(settings.trusted_proxies, tuple) else "-",
    )
    if not settings.api_keys:
        log.warning(
            "sign-in through the proxy covers the page, not the HTTP API (/v1): set ARENA_API_KEYS, or keep "
            "/v1 out of the proxy's configuration (docs/deploy.md)"
        )

"""Who is asking: the client address behind up to `Settings.trusted_proxies` reverse proxies.

A proxy appends the address it received the request from to X-Forwarded-For, so with N trusted
proxies in front of us the client is the N-th entry counted from the right. Everything further
left was written by the client itself and can be anything, so it is never used. With no trusted
proxies (the default) the header is ignored and the socket peer is the client.

This only works if nothing before us has already rewritten the peer from the header: uvicorn does
that by default for requests from 127.0.0.1, so `webui.server.app.serve` turns uvicorn's proxy_headers
off and leaves the decision to this module.

Headers and cookies are read here and nowhere else, and only this one header; none are recorded.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from webui.config import Settings
from webui.records.events import ClientInfo

FORWARDED_FOR = "x-forwarded-for"


def client_info(request: Any, settings: Settings) -> ClientInfo:
    """The client of a `gradio.Request` or a starlette/FastAPI `Request` (None gives an empty one,
    e.g. when a handler is called directly in a test)."""
    if request is None:
        return ClientInfo()
    peer = _peer_host(request)
    chain = _forwarded_chain(request) if settings.trusted_proxies > 0 else []
    address = resolve_address(peer, chain, settings.trusted_proxies)
    return ClientInfo(address=address, user=_username(request))


def resolve_address(peer: str | None, forwarded: list[str], trusted_proxies: int) -> str | None:
    """The client address given the socket peer and the X-Forwarded-For entries (left to right).

    With fewer entries than trusted proxies the request did not come through the whole proxy chain
    (or the chain is misconfigured): the peer is kept, since the header cannot be trusted then.
    """
    if trusted_proxies <= 0 or len(forwarded) < trusted_proxies:
        return peer
    candidate = forwarded[-trusted_proxies]
    return candidate if _is_ip(candidate) else peer


def _peer_host(request: Any) -> str | None:
    client = getattr(request, "client", None)
    if client is None:
        return None
    host = client.get("host") if isinstance(client, dict) else getattr(client, "host", None)
    return str(host) if host else None


def _forwarded_chain(request: Any) -> list[str]:
    """All X-Forwarded-For values in order; several header lines join as one comma list (RFC 7230)."""
    headers = getattr(request, "headers", None)
    if headers is None:
        return []
    if hasattr(headers, "getlist"):
        values = headers.getlist(FORWARDED_FOR)
    else:  # gradio sometimes hands a plain dict
        values = [v for k, v in dict(headers).items() if str(k).lower() == FORWARDED_FOR]
    return [part.strip() for value in values for part in str(value).split(",") if part.strip()]


def _is_ip(text: str) -> bool:
    """Only plain addresses count; a proxy writing "unknown" or an obfuscated name is ignored."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _username(request: Any) -> str | None:
    try:
        user = getattr(request, "username", None)
    except AttributeError:
        return None
    return str(user) if isinstance(user, str) and user else None

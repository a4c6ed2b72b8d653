"""Who is asking: the client address behind the `Settings.trusted_proxies`, and the signed-in person.

A proxy appends the address it received the request from to X-Forwarded-For. `--trusted-proxies`
says which entries to believe, in one of two ways:
  * a count N: the client is the N-th entry counted from the right;
  * addresses and networks: only when the socket peer is one of them is the header read, from the
    right, skipping entries that are trusted proxies too; the first other entry is the client.
Everything further left was written by the client itself and can be anything, so it is never used.
With no trusted proxies (the default) the header is ignored and the socket peer is the client.

The person: Gradio's login (`gr.Request.username`), or, with `--auth-header`, the header the
trusted proxy sets after it signed the person in. That header is believed only when the socket peer
is a trusted proxy address; `webui.access.signin` refuses it from anyone else before a handler runs.

This only works if nothing before us has already rewritten the peer from the header: uvicorn does
that by default for requests from 127.0.0.1, so `webui.server.app.serve` turns uvicorn's proxy_headers
off and leaves the decision to this module.

Headers and cookies are read here and nowhere else, and only these headers; none are recorded.
"""

from __future__ import annotations

import functools
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
    chain = _forwarded_chain(request) if settings.trusted_proxies else []
    address = resolve_address(peer, chain, settings.trusted_proxies)
    if settings.auth_header and is_trusted_peer(peer, settings.trusted_proxies):
        user = _header(request, settings.auth_header)
        email = _header(request, settings.auth_email_header) if settings.auth_email_header else None
        return ClientInfo(address=address, user=user or email, email=email)
    return ClientInfo(address=address, user=_username(request))


def resolve_address(peer: str | None, forwarded: list[str], trusted_proxies: int | tuple[str, ...]) -> str | None:
    """The client address given the socket peer and the X-Forwarded-For entries (left to right).

    With a count and fewer entries than trusted proxies the request did not come through the whole
    proxy chain (or the chain is misconfigured): the peer is kept, since the header cannot be
    trusted then. With addresses, a peer that is not one of them is the client, whatever it says.
    """
    if isinstance(trusted_proxies, tuple):
        return _resolve_by_address(peer, forwarded, trusted_proxies)
    if trusted_proxies <= 0 or len(forwarded) < trusted_proxies:
        return peer
    candidate = forwarded[-trusted_proxies]
    return candidate if _is_ip(candidate) else peer


def _resolve_by_address(peer: str | None, forwarded: list[str], proxies: tuple[str, ...]) -> str | None:
    if not is_trusted_peer(peer, proxies):
        return peer
    client = peer
    for entry in reversed(forwarded):
        if not _is_ip(entry):
            break  # "unknown" or garbage: nothing left of it can be believed
        client = entry
        if not is_trusted_peer(entry, proxies):
            break  # the first address that is not one of our proxies is the client
    return client


def is_trusted_peer(peer: str | None, trusted_proxies: int | tuple[str, ...]) -> bool:
    """Is `peer` one of the proxy addresses or networks? Never with a count: a count says how many
    proxies there are, not who they are, so it cannot vouch for a sign-in header."""
    if not peer or not isinstance(trusted_proxies, tuple):
        return False
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 on a dual-stack socket is 127.0.0.1
    return any(address in network for network in _networks(trusted_proxies))


@functools.lru_cache(maxsize=8)
def _networks(proxies: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(part, strict=False) for part in proxies)  # checked by Settings


def _header(request: Any, name: str) -> str | None:
    """One header's value, stripped; None when absent or blank."""
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    lowered = name.lower()
    value = headers.get(lowered) if hasattr(headers, "getlist") else None
    if value is None:
        value = next((v for k, v in dict(headers).items() if str(k).lower() == lowered), None)
    text = str(value).strip() if value is not None else ""
    return text or None


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

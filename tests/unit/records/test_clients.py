"""Client address behind trusted proxies: the header counts only as far as the configured proxies,
so a client cannot choose the address that gets logged."""

from __future__ import annotations

import gradio as gr
import pytest
from starlette.requests import Request

from webui.access.clients import client_info, resolve_address
from webui.config import Settings
from webui.records.events import ClientInfo


def starlette_request(peer: str, headers: list[tuple[str, str]]) -> Request:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
        "client": (peer, 50000),
        "server": ("testserver", 80),
    }
    return Request(scope)


@pytest.mark.parametrize(
    ("peer", "chain", "proxies", "expected"),
    [
        ("10.0.0.9", ["6.6.6.6"], 0, "10.0.0.9"),  # no proxies: the header is ignored entirely
        ("10.0.0.9", ["203.0.113.7"], 1, "203.0.113.7"),
        ("10.0.0.9", ["6.6.6.6", "203.0.113.7"], 1, "203.0.113.7"),  # client-written entry ignored
        ("10.0.0.9", ["6.6.6.6", "203.0.113.7", "10.0.0.2"], 2, "203.0.113.7"),
        ("10.0.0.9", ["203.0.113.7"], 2, "10.0.0.9"),  # fewer hops than proxies: do not trust the header
        ("10.0.0.9", ["unknown"], 1, "10.0.0.9"),  # not an address
        ("10.0.0.9", ["2001:db8::1"], 1, "2001:db8::1"),
        (None, [], 1, None),
    ],
)
def test_resolve_address(peer, chain, proxies, expected):
    assert resolve_address(peer, chain, proxies) == expected


def test_spoofing_needs_more_than_a_header():
    """Whatever a client prepends, one trusted proxy means the proxy's own entry wins."""
    settings = Settings(trusted_proxies=1)
    for forged in ("1.1.1.1", "1.1.1.1, 2.2.2.2", "127.0.0.1,  8.8.8.8"):
        chain = f"{forged}, 198.51.100.4"  # the proxy appends what it saw
        request = starlette_request("10.0.0.1", [("X-Forwarded-For", chain)])
        assert client_info(request, settings).address == "198.51.100.4"


def test_repeated_header_lines_join_in_order():
    settings = Settings(trusted_proxies=2)
    request = starlette_request(
        "10.0.0.1", [("X-Forwarded-For", "6.6.6.6, 198.51.100.4"), ("X-Forwarded-For", "10.0.0.2")]
    )
    assert client_info(request, settings).address == "198.51.100.4"


def test_gradio_request_wrapping_starlette():
    request = gr.Request(starlette_request("192.0.2.5", [("X-Forwarded-For", "6.6.6.6")]), username="ada")
    assert client_info(request, Settings()) == ClientInfo(address="192.0.2.5", user="ada")
    assert client_info(request, Settings(trusted_proxies=1)).address == "6.6.6.6"


def test_gradio_request_in_its_queued_form():
    """Queued events hand handlers a Request rebuilt from plain dicts."""
    request = gr.Request(client={"host": "192.0.2.5", "port": 1}, headers={"x-forwarded-for": "198.51.100.4"})
    assert client_info(request, Settings()).address == "192.0.2.5"
    assert client_info(request, Settings(trusted_proxies=1)).address == "198.51.100.4"


def test_no_request():
    assert client_info(None, Settings()) == ClientInfo()


def test_trusted_proxies_setting_is_validated():
    from webui.errors import ConfigError

    with pytest.raises(ConfigError, match="trusted_proxies"):
        Settings(trusted_proxies=-1)
    assert Settings.from_env({"ARENA_TRUSTED_PROXIES": "1"}).trusted_proxies == 1

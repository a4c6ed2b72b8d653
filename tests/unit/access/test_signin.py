"""Sign-in through a trusted proxy, as logic: --trusted-proxies as a count or as addresses, the
settings that cannot work together, who the client is, which requests the middleware refuses,
named operators, and the key "my votes" finds a signed-in person's votes by. The real proxy in
front is tests/integration/test_proxy_signin.py."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from webui.access.clients import client_info, is_trusted_peer, resolve_address
from webui.access.operator import OperatorGate, OperatorRefused
from webui.access.signin import refusal
from webui.config import Settings, parse_trusted_proxies, settings_from_cli
from webui.errors import ConfigError
from webui.records.events import ClientInfo
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder

PROXY = ("127.0.0.1", "10.1.0.0/16")
SIGNIN = {"trusted_proxies": PROXY, "auth_header": "X-Forwarded-User"}


def request(peer: str, headers: dict[str, str]) -> Request:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": (peer, 50000),
        "server": ("testserver", 80),
    }
    return Request(scope)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("0", 0), ("2", 2), ("127.0.0.1", ("127.0.0.1",)), (" 10.0.0.0/8 , ::1 ", ("10.0.0.0/8", "::1"))],
)
def test_trusted_proxies_is_a_count_or_addresses(raw, expected):
    assert parse_trusted_proxies(raw) == expected
    assert Settings.from_env({"ARENA_TRUSTED_PROXIES": raw}).trusted_proxies == expected
    assert settings_from_cli(["--trusted-proxies", raw], environ={}).trusted_proxies == expected


@pytest.mark.parametrize("raw", ["proxy.local", "10.0.0.0/33", "-1", ","])
def test_a_bad_trusted_proxy_names_itself(raw, capsys):
    with pytest.raises(ConfigError, match="trusted_proxies"):
        Settings.from_env({"ARENA_TRUSTED_PROXIES": raw})
    with pytest.raises(SystemExit):
        settings_from_cli(["--trusted-proxies", raw], environ={})
    assert "--trusted-proxies" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"auth_header": "X-Forwarded-User"}, "not a count"),
        ({"auth_header": "X-Forwarded-User", "trusted_proxies": 1}, "addresses or networks"),
        ({**SIGNIN, "auth_header": "X Forwarded User"}, "HTTP header name"),
        ({"auth_email_header": "X-Forwarded-Email"}, "needs --auth-header"),
        ({**SIGNIN, "hf_oauth": True}, "leave out the app's own login"),
        ({**SIGNIN, "auth": "alice:pw"}, "leave out the app's own login"),
        ({"operators": ("alice",)}, "need a sign-in"),
        ({**SIGNIN, "operators": ("alice",), "operator_key": "k" * 20}, "not used"),
        ({**SIGNIN, "operators": (" alice",)}, "surrounding spaces"),
    ],
)
def test_settings_that_cannot_sign_anyone_in_stop_the_start(settings, message):
    with pytest.raises(ConfigError, match=message):
        Settings(**settings)


def test_a_named_operator_turns_the_operator_views_on():
    assert Settings(**SIGNIN, operators=("alice",), ui_export="on").operators == ("alice",)
    assert settings_from_cli(["--operators", "alice, bob@example.com"], environ={"ARENA_AUTH": "a:b"}).operators == (
        "alice",
        "bob@example.com",
    )


@pytest.mark.parametrize(
    ("peer", "chain", "expected"),
    [
        ("203.0.113.9", ["6.6.6.6"], "203.0.113.9"),  # not a proxy: its header means nothing
        ("127.0.0.1", ["203.0.113.7"], "203.0.113.7"),
        ("127.0.0.1", ["6.6.6.6", "203.0.113.7", "10.1.2.3"], "203.0.113.7"),  # proxies skipped, then the client
        ("127.0.0.1", ["unknown", "203.0.113.7"], "203.0.113.7"),
        ("127.0.0.1", ["203.0.113.7", "unknown"], "127.0.0.1"),  # nothing left of garbage is believed
        ("127.0.0.1", [], "127.0.0.1"),
        ("::ffff:127.0.0.1", ["203.0.113.7"], "203.0.113.7"),  # a dual-stack socket's form of 127.0.0.1
    ],
)
def test_the_client_behind_proxies_given_by_address(peer, chain, expected):
    assert resolve_address(peer, chain, PROXY) == expected


def test_a_count_never_vouches_for_a_peer():
    assert is_trusted_peer("10.1.9.9", PROXY) and not is_trusted_peer("10.2.0.1", PROXY)
    assert not is_trusted_peer("127.0.0.1", 1) and not is_trusted_peer(None, PROXY)


def test_the_signed_in_name_is_believed_only_from_the_proxy():
    settings = Settings(**SIGNIN, auth_email_header="X-Forwarded-Email")
    headers = {"X-Forwarded-User": "alice", "X-Forwarded-Email": "alice@example.com", "X-Forwarded-For": "1.2.3.4"}
    assert client_info(request("127.0.0.1", headers), settings) == ClientInfo("1.2.3.4", "alice", "alice@example.com")
    assert client_info(request("203.0.113.9", headers), settings) == ClientInfo("203.0.113.9")
    only_email = client_info(request("127.0.0.1", {"X-Forwarded-Email": "bob@example.com"}), settings)
    assert only_email.user == "bob@example.com"  # a proxy that sends only the email names the person by it
    # without --auth-header the same header is just a header
    assert client_info(request("127.0.0.1", headers), Settings(trusted_proxies=PROXY)).user is None


@pytest.mark.parametrize(
    ("peer", "path", "headers", "refused"),
    [
        ("127.0.0.1", "/", {"x-forwarded-user": "alice"}, None),
        ("127.0.0.1", "/gradio_api/queue/join", {"x-forwarded-user": "alice"}, None),
        ("127.0.0.1", "/", {}, "without the X-Forwarded-User header"),
        ("127.0.0.1", "/", {"x-forwarded-user": " "}, "without the X-Forwarded-User header"),
        ("203.0.113.9", "/", {"x-forwarded-user": "alice"}, "accepted only from"),
        ("203.0.113.9", "/v1/chat/completions", {"x-forwarded-user": "alice"}, "accepted only from"),
        ("203.0.113.9", "/healthz", {"x-forwarded-email": "a@example.com"}, "accepted only from"),
        ("203.0.113.9", "/", {}, "through its proxy"),
        ("203.0.113.9", "/gradio_api/call/battle_vote_a", {}, "through its proxy"),
        ("203.0.113.9", "/v1/models", {}, None),  # the API keeps its own keys
        ("203.0.113.9", "/healthz", {}, None),
        ("127.0.0.1", "/v1/models", {}, None),
    ],
)
def test_which_requests_header_sign_in_refuses(peer, path, headers, refused):
    reason = refusal(peer, path, headers, Settings(**SIGNIN, auth_email_header="X-Forwarded-Email"))
    assert reason == refused if refused is None else refused in (reason or "")
    assert refusal(peer, path, headers, Settings(trusted_proxies=PROXY)) is None  # sign-in off: nothing refused


def test_named_operators_need_no_key_and_nobody_else_gets_in():
    gate = OperatorGate(operators=("alice", "carol@example.com"))
    assert gate.enabled
    gate.admit(None, ClientInfo(user="alice"))
    gate.admit(None, ClientInfo(user="carol", email="carol@example.com"))
    for client in (ClientInfo(user="bob"), ClientInfo(address="127.0.0.1")):
        with pytest.raises(OperatorRefused, match="operators"):
            gate.admit("any key at all, long enough", client)
    keyed = OperatorGate("k" * 20)  # sign-in off: the shared key, as before
    keyed.admit("k" * 20, ClientInfo(user="bob"))
    with pytest.raises(OperatorRefused):
        keyed.admit(None, ClientInfo(user="alice"))


def test_a_signed_in_persons_votes_carry_one_key_on_every_session(tmp_path):
    recorder = JsonlRecorder(tmp_path, IdentityPolicy("hash", b"k" * 32))
    alice = recorder.session_key("session-1", "alice")
    assert alice == recorder.session_key("session-2", "alice") and alice.startswith("h:")
    assert alice != recorder.session_key("session-1", "bob")
    assert recorder.session_key("session-1") != recorder.session_key("session-2")  # anonymous: per session
    assert alice not in (recorder.session_key("alice"), recorder.policy.apply("alice"))
    assert JsonlRecorder(tmp_path, IdentityPolicy("none")).session_key("session-1", "alice") == ""

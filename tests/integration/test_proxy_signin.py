"""Sign-in through a trusted proxy, end to end: the shipped deploy/signin/nginx.conf run by a real
nginx, a stand-in for oauth2-proxy answering its auth_request (tests/identity_proxy.py), and the
app behind them with --trusted-proxies 127.0.0.1 --auth-header X-Forwarded-User.

Through the proxy: a person is known by name, so their votes from two browser sessions are one
"my votes", the daily vote cap counts the person (not the proxy's one address), a named operator
needs no key, and a name a client writes itself is replaced by the proxy's. Around the proxy (a
client on 127.0.0.2, which is not a trusted address): the header is refused, not believed."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from gradio_client import Client

from tests.apps import app_settings, start_app
from tests.identity_proxy import SIGN_IN_PAGE, IdentityProxy, session_cookie
from tests.proxy import ROOT, Proxy, start_nginx
from tests.servers import free_port
from webui.records.storage import read_logs

SHIPPED = ROOT / "deploy" / "signin" / "nginx.conf"
UNTRUSTED = "127.0.0.2"  # loopback too, but not in --trusted-proxies: a client going around nginx


def shipped_config(listen_port: int, arena: str, identity: str) -> str:
    """deploy/signin/nginx.conf with only its three addresses changed."""
    text = SHIPPED.read_text()
    for old, new in (
        ("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{listen_port};"),
        ("server 127.0.0.1:7860;", f"server {arena};"),
        ("server 127.0.0.1:4180;", f"server {identity};"),
    ):
        assert text.count(old) == 1, f"{SHIPPED} no longer has {old!r} once"
        text = text.replace(old, new)
    return text


@pytest.fixture(scope="module")
def signin(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("proxy-signin")
    settings = app_settings(
        tmp,
        tiny_model_dir,
        max_new_tokens=4,
        rate_votes_day=2,
        trusted_proxies=("127.0.0.1",),
        auth_header="X-Forwarded-User",
        auth_email_header="X-Forwarded-Email",
        operators=("carol@example.com",),
    )
    app = start_app(settings)
    services = app.services
    identity = IdentityProxy()
    port = free_port()
    arena = app.url.removeprefix("http://")
    proxy = start_nginx(tmp / "nginx", shipped_config(port, arena, identity.address), port)
    yield proxy, app, services, identity
    proxy.stop()
    identity.stop()
    app.stop()


def person(proxy: Proxy, name: str, **headers: str) -> Client:
    """A browser session signed in to the stand-in as `name` (its cookie beside the arena's own)."""
    return Client(
        proxy.url, verbose=False, download_files=False, headers=headers, httpx_kwargs={"cookies": session_cookie(name)}
    )


def vote(client: Client, button: str) -> None:
    client.predict("hello world", api_name="/battle_send")
    client.predict(api_name=f"/battle_vote_{button}")
    client.predict(api_name="/battle_new_round")


def battles_in(table: dict) -> int:
    column = table["headers"].index("battles")
    return sum(int(row[column]) for row in table["data"])


@pytest.mark.timeout(300)
def test_one_persons_votes_from_two_sessions_are_one_my_votes(signin) -> None:
    proxy, _app, services, _identity = signin
    laptop, phone, tablet, bob = (person(proxy, name) for name in ("alice", "alice", "alice", "bob"))
    try:
        assert laptop.session_hash != phone.session_hash
        vote(laptop, "a")
        vote(phone, "b")
        note, table = phone.predict(api_name="/leaderboard_my_votes")
        # the daily cap (2) is alice's, wherever she votes from; bob, behind the same proxy address, votes on
        with pytest.raises(Exception, match="Too many votes"):
            vote(tablet, "tie")
        vote(bob, "a")
        bob_note, bob_table = bob.predict(api_name="/leaderboard_my_votes")
    finally:
        for client in (laptop, phone, tablet, bob):
            client.close()
    assert "Your 2 battle votes signed in, on any browser" in note and battles_in(table) == 4
    assert "Your 1 battle vote signed in" in bob_note and battles_in(bob_table) == 2

    votes = [r for r in read_logs(services.settings.log_dir).records if r["type"] != "chat"]
    assert len(votes) == 3
    keys = [v["extra"]["session"] for v in votes]
    users = [v["user"] for v in votes]
    assert keys[0] == keys[1] != keys[2] and all(k.startswith("h:") for k in keys)
    assert users[0] == users[1] != users[2] and all(u.startswith("h:") for u in users)
    text = "".join(p.read_text() for p in services.settings.log_dir.glob("*-conv.json"))
    assert "alice" not in text and "example.com" not in text  # names and emails are kept as keyed hashes only


def test_a_named_operator_needs_no_key_and_a_written_name_is_replaced(signin) -> None:
    proxy, _app, _services, _identity = signin
    carol = person(proxy, "carol")
    # bob writes the operator's name into the sign-in headers himself: nginx replaces them with his own
    forger = person(proxy, "bob", **{"X-Forwarded-User": "carol", "X-Forwarded-Email": "carol@example.com"})
    try:
        with pytest.raises(Exception, match="signed in as bob"):
            forger.predict("", api_name="/leaderboard_voters")
        voters = carol.predict("", api_name="/leaderboard_voters")
    finally:
        carol.close()
        forger.close()
    assert "headers" in voters


def test_without_signing_in_the_proxy_shows_its_sign_in_page(signin) -> None:
    proxy, _app, _services, identity = signin
    asked = identity.asked
    page = httpx.get(proxy.url, timeout=10)
    spoofed = httpx.get(proxy.url + "config", headers={"X-Forwarded-User": "carol"}, timeout=10)
    assert (page.status_code, spoofed.status_code) == (403, 403)
    assert SIGN_IN_PAGE.decode() in page.text and SIGN_IN_PAGE.decode() in spoofed.text
    assert identity.asked == asked + 2  # nginx asked the identity proxy each time
    assert httpx.get(proxy.url + "healthz", timeout=10).status_code == 200  # health checks need no sign-in


@pytest.mark.parametrize(
    ("path", "headers", "message"),
    [
        ("/", {"X-Forwarded-User": "carol"}, "accepted only from this arena's sign-in proxy"),
        ("/gradio_api/info", {"X-Forwarded-Email": "carol@example.com"}, "accepted only from"),
        ("/v1/models", {"X-Forwarded-User": "carol"}, "accepted only from"),
        ("/config", {}, "signs people in through its proxy"),
    ],
)
def test_around_the_proxy_the_header_is_refused(signin, path: str, headers: dict[str, str], message: str) -> None:
    _proxy, app, _services, _identity = signin
    transport = httpx.HTTPTransport(local_address=UNTRUSTED)
    with httpx.Client(transport=transport, timeout=10) as http:
        answer = http.get(app.url + path, headers=headers)
        error = answer.json()["error"]
        text = error["message"] if isinstance(error, dict) else error  # /v1 answers in OpenAI's error shape
        assert (answer.status_code, message in text) == (403, True), answer.text
        assert http.get(app.url + "/healthz").status_code == 200  # a health check needs no sign-in


def test_the_proxy_must_say_who_signed_in(signin) -> None:
    """A request from the trusted address without the header (a proxy that forgot auth_request on
    a location) is refused rather than served to nobody in particular."""
    _proxy, app, _services, _identity = signin
    answer = httpx.get(app.url + "/config", timeout=10)  # from 127.0.0.1, the trusted address
    assert answer.status_code == 403 and "without the X-Forwarded-User header" in answer.json()["error"]
    assert httpx.get(app.url + "/v1/models", timeout=10).status_code == 200  # /v1 keeps its own keys

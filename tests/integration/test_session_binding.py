"""A Gradio session belongs to the browser the server gave a secret to, not to
whoever knows its session hash (the client picks it, and it shows in access logs).

The owner is a gradio_client `Client` (it takes the cookie from its first request, as a script
does); the attacker is plain httpx through the same real server, with a cookie of its own or none,
reusing the owner's session hash on every route that names one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from gradio_client import Client

from tests.uiapp import RunningUI, join, start_ui, ui_settings
from webui.server import sessions

REFUSED = "This session belongs to another browser"


@pytest.fixture(scope="module")
def ui(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningUI]:
    running = start_ui(ui_settings(tmp_path_factory.mktemp("sessions"), tiny_model_dir))
    yield running
    running.stop()


def status_of_stream(http: httpx.Client, path: str, **params: str) -> tuple[int, str]:
    """The status of a streaming GET (heartbeat, queue/data) without reading the stream to its end."""
    with http.stream("GET", path, params=params) as response:
        body = response.read().decode() if response.status_code != 200 else ""
        return response.status_code, body


def test_a_known_session_hash_does_not_give_away_the_battle(ui: RunningUI) -> None:
    owner = Client(ui.url, verbose=False, download_files=False)
    try:
        owner.predict("hello", api_name="/battle_send")
        hijacked = owner.session_hash
        votes = len(ui.recorder.votes)
        with httpx.Client(base_url=ui.url, timeout=10) as attacker:
            assert attacker.get("").status_code == 200  # the page: the attacker gets a cookie of its own
            assert attacker.cookies, "the page sets the session cookie"
            vote = join(attacker, ui, "battle_vote_a", hijacked)
            assert vote.status_code == 403, vote.text
            assert REFUSED in vote.json()["error"]
            for path, params in (
                ("gradio_api/queue/data", {"session_hash": hijacked}),
                (f"gradio_api/heartbeat/{hijacked}", {}),
                ("gradio_api/deep_link", {"session_hash": hijacked}),
            ):
                code, body = status_of_stream(attacker, path, **params)
                assert code == 403 and REFUSED in body, f"{path}: {code}"
            send = attacker.post("gradio_api/cancel", json={"session_hash": hijacked, "fn_index": 0, "event_id": "x"})
            assert send.status_code == 403
        assert len(ui.recorder.votes) == votes, "the attacker's vote was counted"
        revealed = owner.predict(api_name="/battle_vote_a")  # the owner's vote is still the first
        assert len(ui.recorder.votes) == votes + 1
        assert "Model A was **" in revealed[2]
    finally:
        owner.close()


def test_no_cookie_no_session(ui: RunningUI) -> None:
    """A request that names a session but carries no cookie (or a forged one) is refused before
    Gradio sees it, and says what to do; the same request with the page's cookie is accepted."""
    with httpx.Client(base_url=ui.url, timeout=10) as bare:
        refused = join(bare, ui, "battle_vote_a", "fresh-session-1")
        assert refused.status_code == 403 and "cookie" in refused.json()["error"]
        bare.cookies.set(sessions.COOKIE_LAX, "made-up")
        assert join(bare, ui, "battle_vote_a", "fresh-session-1").status_code == 403
        bare.cookies.clear()
        bare.get("")
        assert join(bare, ui, "battle_vote_a", "fresh-session-1").status_code == 200


def test_the_cookie_is_a_server_secret(ui: RunningUI) -> None:
    first, second = httpx.get(ui.url), httpx.get(ui.url)
    headers = first.headers.get_list("set-cookie")
    assert any(h.startswith(f"{sessions.COOKIE}=") for h in headers)
    for header in headers:
        lowered = header.lower()
        assert "httponly" in lowered and "samesite" in lowered, header
    assert first.cookies[sessions.COOKIE_LAX] != second.cookies[sessions.COOKIE_LAX]
    # a browser that has one keeps it: no new cookie on the next page load
    again = httpx.get(ui.url, cookies={sessions.COOKIE_LAX: first.cookies[sessions.COOKIE_LAX]})
    assert not again.headers.get_list("set-cookie")


def test_two_clients_keep_their_own_sessions(ui: RunningUI) -> None:
    """gradio_client still works for its own sessions, each with its own cookie."""
    a, b = (Client(ui.url, verbose=False, download_files=False) for _ in range(2))
    try:
        assert a.cookies != b.cookies
        a.predict(message="hi", model="tiny-a", max_new_tokens=16, api_name="/direct_send")
        b.predict(message="hi", model="tiny-b", max_new_tokens=16, api_name="/direct_send")
        a.predict(api_name="/direct_vote_up")
        b.predict(api_name="/direct_vote_down")
    finally:
        a.close()
        b.close()

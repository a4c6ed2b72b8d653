"""A real battle through the running app (gradio_client, tiny models), then its log files: read by
FastChat's clean_battle_data with every battle recovered, counted by the Leaderboard tab, with the
client address taken through one trusted proxy and hashed, nothing from headers or cookies, and a
full disk reported to the voter while the app keeps serving."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from tests.integration.test_fastchat_compat import fastchat_battles
from tests.servers import serve_app
from tests.tiny import tiny_models
from webui.config import Settings
from webui.records.storage import day_file, read_logs
from webui.server.app import create_app
from webui.services import Services, build_services

QUICK = [0.0, 1.0, 0, 16, 1.0, -1, ""]
FORGED, PROXY_SAW = "6.6.6.6", "198.51.100.20"
HEADERS = {
    "X-Forwarded-For": f"{FORGED}, {PROXY_SAW}",
    "Cookie": "session=COOKIE-SECRET-1",
    "User-Agent": "AGENT-SECRET-2",
}
WINNER = {"a": "model_a", "b": "model_b", "tie": "tie", "bad": "tie (bothbad)"}


@pytest.fixture(scope="module")
def app(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The whole app with the real recorder (build_services' default), served like `serve` does:
    uvicorn's own proxy-header rewriting off, one trusted proxy configured."""
    tmp = tmp_path_factory.mktemp("logging-ui")
    settings = Settings(
        models_file=tiny_models(tmp, tiny_model_dir, max_new_tokens=16),
        log_dir=tmp / "logs",
        cache_dir=tmp / "cache",
        queue_timeout_s=20.0,
        trusted_proxies=1,
        leaderboard_rounds=20,
        rate_messages=0,
        rate_votes=0,
    )  # one client sends many messages and votes
    services = build_services(settings)
    services.registry.start()
    assert services.registry.wait_idle(120), "models did not finish loading"
    running = serve_app(create_app(services), services)
    yield running.url + "/", services
    running.stop()


def battle(client: Client, vote: str, turns: int = 1) -> None:
    for turn in range(turns):
        client.predict(["hello world", "what is the capital of france"][turn], api_name="/battle_send")
    client.predict(api_name=f"/battle_vote_{vote}")
    client.predict(api_name="/battle_new_round")


@pytest.mark.timeout(400)
def test_battles_through_the_app_reach_fastchat_and_the_leaderboard(app: tuple[str, Services]):
    url, services = app
    log_dir = services.settings.log_dir
    before = len(read_logs(log_dir).records)  # (another test of this module may have written first)
    # our own Cookie header replaces gradio_client's cookies: it must carry the page's session cookie too
    session_cookie = httpx.get(url).cookies["arena-session-lax"]
    headers = {**HEADERS, "Cookie": f"{HEADERS['Cookie']}; arena-session-lax={session_cookie}"}
    client = Client(url, verbose=False, download_files=False, headers=headers)
    try:
        for vote in ("a", "b", "tie", "bad"):
            battle(client, vote)
        battle(client, "a", turns=2)
        client.predict("hello", "tiny-a", "tiny-b", False, *QUICK, *QUICK, api_name="/sbs_send")
        client.predict(api_name="/sbs_vote_b")  # names visible: counts only when asked to
        client.predict("hello", "tiny-b", *QUICK, api_name="/direct_send")
        client.predict(api_name="/direct_vote_up")
        summary = client.predict(api_name="/leaderboard_refresh")[0]
    finally:
        client.close()

    records = read_logs(log_dir).records[before:]
    votes = [r for r in records if r["type"] != "chat"]
    assert [v["type"] for v in votes] == [
        "leftvote",
        "rightvote",
        "tievote",
        "bothbad_vote",
        "leftvote",
        "rightvote",
        "upvote",
    ]
    assert [v["models"] for v in votes[:5]] == [["", ""]] * 5 and votes[5]["models"] == ["tiny-a", "tiny-b"]
    assert len([r for r in records if r["type"] == "chat"]) == 2 * 4 + 2 * 2 + 2 + 1

    battles = fastchat_battles(sorted(log_dir.glob("*-conv.json")))[-6:]
    assert [b["winner"] for b in battles] == [*(WINNER[v] for v in ("a", "b", "tie", "bad", "a")), "model_b"]
    assert [b["anony"] for b in battles] == [True] * 5 + [False]
    assert [b["turn"] for b in battles] == [1, 1, 1, 1, 2, 1]
    assert all({b["model_a"], b["model_b"]} == {"tiny-a", "tiny-b"} for b in battles)
    if before == 0:
        assert "Based on 5 battles between 2 models (6 battle votes read)" in summary

    policy = services.recorder.policy  # type: ignore[attr-defined]
    assert {r["ip"] for r in records} == {policy.apply(PROXY_SAW)}  # one trusted proxy: its entry, hashed
    text = "".join(p.read_text() for p in log_dir.glob("*-conv.json"))
    for secret in (PROXY_SAW, FORGED, "COOKIE-SECRET-1", "AGENT-SECRET-2", session_cookie):
        assert secret not in text


@pytest.mark.timeout(200)
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_is_reported_and_the_app_keeps_serving(app: tuple[str, Services], caplog):
    url, services = app
    client = Client(url, verbose=False, download_files=False)
    try:
        client.predict("hello world", api_name="/battle_send")
        path = day_file(services.settings.log_dir, time.time())
        kept = path.with_name("kept.json")
        path.rename(kept)
        path.symlink_to("/dev/full")  # the disk is full from now on
        try:
            with pytest.raises(AppError, match="could not be recorded"):
                client.predict(api_name="/battle_vote_a")
        finally:
            path.unlink()
            kept.rename(path)
        assert "the disk is full" in caplog.text
        client.predict(api_name="/battle_vote_a")  # space again: the same vote now counts
    finally:
        client.close()
    last = read_logs(services.settings.log_dir).records[-1]
    assert last["type"] == "leftvote" and last["models"] == ["", ""]

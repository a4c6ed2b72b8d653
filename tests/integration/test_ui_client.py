"""The running app driven through gradio_client, as a script (or an attacker) would: every event
has a stable api_name, the rules hold whatever the buttons show, and no model name reaches the
client before the vote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from tests.uiapp import NAMES, RunningUI, generate_threads, start_ui, ui_settings, wait_for

PARAMS = [0.7, 1.0, 0, 3000, 1.0, -1, ""]  # temperature, top_p, top_k, max_new_tokens, rep. penalty, seed, system
QUICK = [0.0, 1.0, 0, 16, 1.0, -1, ""]  # what the controls hold once tiny-a is chosen in a browser


@pytest.fixture(scope="module")
def ui(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> RunningUI:
    running = start_ui(ui_settings(tmp_path_factory.mktemp("ui"), tiny_model_dir))
    yield running
    running.stop()


@pytest.fixture()
def client(ui: RunningUI) -> Client:
    client = Client(ui.url, verbose=False, download_files=False)
    yield client
    client.close()


def names_in(received: Any) -> list[str]:
    text = received if isinstance(received, str) else json.dumps(received, default=str)
    return [name for name in NAMES if name in text]


def refused(client: Client, api_name: str, *args: Any) -> str:
    with pytest.raises(AppError) as info:
        client.predict(*args, api_name=api_name)
    return str(info.value)


# gradio_client returns the value outputs only (no buttons, no state): [chat A, chat B, reveal,
# input] for the battle; [chat A, chat B, prompt A, prompt B, input] side by side.
def chat_text(update: dict) -> str:
    return json.dumps(update["value"])


def test_every_event_has_a_stable_api_name(client: Client) -> None:
    endpoints = set(client.view_api(return_format="dict", print_info=False)["named_endpoints"])
    for tab, votes in (("battle", "a b tie bad"), ("sbs", "a b tie bad"), ("direct", "up down flag")):
        expected = {"send", "stop", "regenerate"} | {f"vote_{v}" for v in votes.split()}
        assert {f"/{tab}_{e}" for e in expected} <= endpoints
    assert {"/battle_new_round", "/sbs_clear", "/direct_clear", "/sbs_model_a", "/direct_model", "/app_load"} <= endpoints


def test_battle_turn_end_to_end_without_names_before_the_vote(ui: RunningUI, client: Client) -> None:
    received: list[Any] = [httpx.get(ui.url + "config").text, client.view_api(return_format="dict", print_info=False)]
    received.append(refused(client, "/battle_vote_a"))  # an early vote: refused, and says nothing
    job = client.submit("hello world", api_name="/battle_send")
    final = job.result(timeout=60)
    received += job.outputs()
    chats = [chat_text(final[0]), chat_text(final[1])]
    assert all("tokens/s" in c for c in chats), "both replies finished, with their statistics"
    assert [final[0]["label"], final[1]["label"]] == ["Model A", "Model B"]
    assert names_in(received) == [], "a model name reached the client before the vote"

    votes_before = len(ui.recorder.votes)
    revealed = client.predict(api_name="/battle_vote_a")
    vote = ui.recorder.votes[-1]
    assert len(ui.recorder.votes) == votes_before + 1 and vote.kind == "leftvote"
    pair = [c.model_name for c in vote.conversations]
    assert set(pair) <= {"tiny-a", "tiny-b"} and pair[0] != pair[1]
    assert f"Model A was **{pair[0]}**" in revealed[2] and revealed[0]["label"] == f"Model A: {pair[0]}"
    assert revealed[3]["interactive"] is False, "the input is locked until New round"

    assert "already voted" in refused(client, "/battle_vote_b")
    assert "already voted" in refused(client, "/battle_vote_tie")
    assert "New round" in refused(client, "/battle_send", "more")
    assert len(ui.recorder.votes) == votes_before + 1
    client.predict(api_name="/battle_new_round")
    assert client.predict("again", api_name="/battle_send")[0]["label"] == "Model A"


def test_no_vote_on_someone_elses_battle(ui: RunningUI, client: Client) -> None:
    client.predict("hello", api_name="/battle_send")
    intruder = Client(ui.url, verbose=False, download_files=False)
    message = refused(intruder, "/battle_vote_a")
    intruder.close()
    assert "send a message first" in message and names_in(message) == []
    # A raw HTTP call (no gradio_client, a session of its own) breaks the same rule and gets an error.
    call = httpx.post(ui.url + "gradio_api/call/battle_vote_b", json={"data": []}, timeout=10)
    if call.status_code == 200:
        events = httpx.get(ui.url + f"gradio_api/call/battle_vote_b/{call.json()['event_id']}", timeout=10).text
        assert "event: error" in events
    else:
        assert call.status_code >= 400  # the REST route is closed altogether (api_open=False)
    client.predict(api_name="/battle_vote_tie")  # the owner still can


def test_no_vote_before_both_replies_finished_and_stop_ends_both_threads(ui: RunningUI, client: Client) -> None:
    job = client.submit("hello", "long-a", "long-b", False, *PARAMS, *PARAMS, api_name="/sbs_send")
    wait_for(lambda: len(job.outputs()) > 2 and all("w" in chat_text(u) or len(chat_text(u)) > 80
                                                    for u in job.outputs()[-1][:2]), 30, "no text streamed")
    assert len(generate_threads()) == 2, "both panes generate at once"
    assert "every reply has finished" in refused(client, "/sbs_vote_a")
    stopped = client.predict(api_name="/sbs_stop")
    job.result(timeout=30)
    wait_for(lambda: not generate_threads(), 10, "generate threads still running after Stop")
    assert all("stopped" in chat_text(stopped[i]) for i in (0, 1)), "partial replies stay, marked as stopped"
    assert [c.finished.reason.value for c in ui.recorder.chats[-2:]] == ["cancelled"] * 2
    client.predict(api_name="/sbs_vote_b")  # now it may
    assert "already voted" in refused(client, "/sbs_vote_a")


def test_a_dropped_client_stops_generation(client: Client) -> None:
    job = client.submit("hello", "long-a", "long-b", False, *PARAMS, *PARAMS, api_name="/sbs_send")
    wait_for(lambda: len(generate_threads()) == 2, 30, "generation did not start")
    job.cancel()  # what the browser does when its tab goes away: the event is abandoned
    wait_for(lambda: not generate_threads(), 15, "generate threads outlived the client")


def test_side_by_side_shows_names_and_the_exact_prompt(client: Client) -> None:
    quick_b = [*QUICK[:6], "Answer briefly."]
    out = client.predict("hello", "tiny-a", "tiny-b", False, *QUICK, *quick_b, api_name="/sbs_send")
    assert [out[0]["label"], out[1]["label"]] == ["Model A: tiny-a", "Model B: tiny-b"]
    assert out[3].startswith("<|system|> Answer briefly. <|end|> <|user|> hello"), "tiny-b's prompt"
    assert "<|user|> hello <|end|> <|assistant|>" in out[2]
    changed = client.predict("tiny-a", api_name="/sbs_model_b")
    assert chat_text(changed[1]) == "[]", "a new model clears its pane"
    assert chat_text(changed[0]) != "[]", "the other pane keeps its conversation"


def test_direct_chat_and_feedback(ui: RunningUI, client: Client) -> None:
    out = client.predict("hello", "tiny-b", *QUICK, api_name="/direct_send")
    assert "tokens/s" in chat_text(out[0]) and out[0]["label"] == "Chat"
    client.predict(api_name="/direct_vote_up")
    assert ui.recorder.votes[-1].kind == "upvote" and ui.recorder.votes[-1].conversations[0].model_name == "tiny-b"
    assert "already voted" in refused(client, "/direct_vote_down")
    client.predict(api_name="/direct_vote_flag")


def test_limits_are_enforced_in_the_handlers(ui: RunningUI, client: Client) -> None:
    limit = ui.services.settings.max_input_chars
    message = refused(client, "/battle_send", "x" * (limit + 1))
    assert f"limit is {limit:,}" in message
    out = client.predict("   ", api_name="/battle_send")
    assert chat_text(out[0]) == "[]", "empty input does nothing"
    assert "no model with that name" in refused(client, "/sbs_send", "hi", "no-such-model", "tiny-a")
    bad_top_k = [*QUICK[:2], 10.5, *QUICK[3:]]
    assert "Parameters: top_k" in refused(client, "/sbs_send", "hi", "tiny-a", "tiny-b", False, *bad_top_k, *QUICK)

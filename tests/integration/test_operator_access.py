"""Operator data (the voter check and the exports, which hold every voter's conversations and
hashed ids) through the real app over real HTTP, bound to 127.0.0.1 as it is behind a reverse
proxy or a tunnel, with one trusted proxy: only a request that carries the operator key gets it.

Each case is tried both ways a visitor can ask: the page's path (gradio_client: cookies, the
session-bound queue) and Gradio's REST path (`POST /gradio_api/call/<api>`, then the event
stream; no cookie needed), with a forwarded remote address and with no forwarded header."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from tests.apps import app_settings, start_app
from tests.servers import RunningServer as Running
from webui.access.operator import WRONG_KEYS_PER_MINUTE

KEY = "operator-key-for-tests-0123456789"
MARKER = "zebra marker"  # in every logged conversation; no refusal may carry it
OPERATOR_APIS = (
    "leaderboard_voters",
    "export_battles_jsonl",
    "export_pairs_jsonl",
    "export_history_csv",
    "leaderboard_favour",
)
FROM_OUTSIDE = {"X-Forwarded-For": "203.0.113.9"}  # the operator, somewhere on the internet, through the proxy
DIRECT: dict[str, str] = {}  # a request straight to the port (or a proxy that adds no header)


@pytest.fixture(scope="module")
def arena(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Running:
    settings = app_settings(
        tmp_path_factory.mktemp("operator"),
        tiny_model_dir,
        host="127.0.0.1",
        trusted_proxies=1,
        leaderboard_rounds=0,
        operator_key=KEY,
    )
    running = start_app(settings)
    voter = Client(running.url + "/", verbose=False, download_files=False, headers={"X-Forwarded-For": "198.51.100.4"})
    try:
        voter.predict(f"hello {MARKER}", api_name="/battle_send")
        voter.predict(api_name="/battle_vote_a")
        deadline = time.monotonic() + 60  # the board is rebuilt in the background after a vote
        while "1 battle" not in voter.predict(api_name="/leaderboard_refresh")[0]:
            assert time.monotonic() < deadline, "the vote never reached the board"
            time.sleep(0.2)
    finally:
        voter.close()
    yield running
    running.stop()


def rest_call(url: str, api: str, data: list, headers: dict[str, str]) -> tuple[str, str]:
    """Gradio's REST path as curl would take it: ("complete" | "error" | "http <status>", the payload)."""
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        call = http.post(f"/gradio_api/call/{api}", json={"data": data})
        if call.status_code != 200:
            return f"http {call.status_code}", call.text
        stream = http.get(f"/gradio_api/call/{api}/{call.json()['event_id']}").text
    events = [line.removeprefix("event: ") for line in stream.splitlines() if line.startswith("event: ")]
    payloads = [line.removeprefix("data: ") for line in stream.splitlines() if line.startswith("data: ")]
    return (events[-1] if events else "none"), (payloads[-1] if payloads else stream)


def fetch_file(url: str, payload: str) -> str:
    """The text of the file a completed export points at (its /gradio_api/file= URL)."""
    (file,) = json.loads(payload)
    with httpx.Client(timeout=30) as http:
        response = http.get(file["url"])
    assert response.status_code == 200, response.text
    return response.text


# Each case speaks from an address of its own (the direct ones all come from 127.0.0.1): wrong keys
# count per address, and one case's guesses must not lock out the next.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("headers", [{"X-Forwarded-For": "203.0.113.10"}, DIRECT], ids=["forwarded", "direct"])
def test_rest_calls_without_the_key_are_refused(arena: Running, headers: dict[str, str]) -> None:
    for api in OPERATOR_APIS:
        for data in ([], [""], [None]):
            outcome, payload = rest_call(arena.url, api, data, headers)
            assert outcome != "complete", (api, data, payload)
            assert MARKER not in payload and "conversation_a" not in payload and '"headers"' not in payload
    outcome, payload = rest_call(arena.url, "export_battles_jsonl", ["a wrong key, long enough"], headers)
    assert outcome == "error" and json.loads(payload)["error"] == "Wrong operator key.", payload


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("headers", "key", "message"),
    [
        ({"X-Forwarded-For": "203.0.113.11"}, "a wrong key, long enough", "Wrong operator key."),
        (DIRECT, "", "This needs the operator key: enter it in the Operator key box."),
    ],
    ids=["forwarded-wrong-key", "direct-no-key"],
)
def test_page_calls_without_the_key_are_refused(
    arena: Running, headers: dict[str, str], key: str, message: str
) -> None:
    client = Client(arena.url + "/", verbose=False, download_files=False, headers=headers)
    try:
        for api in OPERATOR_APIS:
            more = ("tiny-a", "tiny-b", 5) if api == "leaderboard_favour" else ()
            with pytest.raises(AppError) as caught:
                client.predict(key, *more, api_name=f"/{api}")
            assert str(caught.value) == message
        mine = client.predict(api_name="/leaderboard_my_votes")[0]  # a visitor keeps their own votes
    finally:
        client.close()
    assert "not voted" in mine


@pytest.mark.timeout(300)
def test_the_operator_key_opens_them_over_rest_and_the_page(arena: Running) -> None:
    outcome, payload = rest_call(arena.url, "export_battles_jsonl", [KEY], FROM_OUTSIDE)
    assert outcome == "complete", payload
    battles = fetch_file(arena.url, payload)
    assert MARKER in battles and '"conversation_a"' in battles

    outcome, payload = rest_call(arena.url, "leaderboard_voters", [KEY], DIRECT)
    assert outcome == "complete", payload
    assert json.loads(payload)[0]["headers"][:3] == ["voter", "votes", "decisive"]

    client = Client(arena.url + "/", verbose=False, download_files=False, headers=FROM_OUTSIDE)
    try:
        voters = client.predict(KEY, api_name="/leaderboard_voters")
        pairs = client.predict(KEY, api_name="/export_pairs_jsonl")
    finally:
        client.close()
    assert voters["headers"][:3] == ["voter", "votes", "decisive"]
    assert MARKER in fetch_file(arena.url, json.dumps([pairs]))


@pytest.mark.timeout(300)
def test_wrong_keys_are_refused_and_then_limited(arena: Running) -> None:
    guesser = {"X-Forwarded-For": "192.0.2.77"}  # an address of its own: its budget of wrong keys
    answers = [
        rest_call(arena.url, "leaderboard_voters", [f"guess-number-{i}-long-enough"], guesser)
        for i in range(WRONG_KEYS_PER_MINUTE + 1)
    ]
    assert all(outcome == "error" for outcome, _ in answers), answers
    assert all("Wrong operator key." in payload for _, payload in answers[:-1]), answers
    assert "Too many wrong operator keys" in answers[-1][1], answers[-1]
    # Once limited, even the right key is refused: a guesser learns nothing from the answer.
    outcome, payload = rest_call(arena.url, "leaderboard_voters", [KEY], guesser)
    assert outcome == "error" and "Too many wrong operator keys" in payload
    # Another address (the operator's) is not locked out by someone else's guesses.
    assert rest_call(arena.url, "leaderboard_voters", [KEY], FROM_OUTSIDE)[0] == "complete"


@pytest.mark.timeout(300)
def test_the_operator_favours_a_pair_for_the_pairing(arena: Running) -> None:
    """The tab's favour button writes what `--favour` writes, counted from the board's battles
    between the two; a row that is not on the board, or no whole number, is told, not written."""
    from webui.leaderboard.board.favours import read_favours

    log_dir = arena.services.settings.log_dir
    outcome, payload = rest_call(arena.url, "leaderboard_favour", [KEY, "tiny-a", "tiny-b", 5], FROM_OUTSIDE)
    assert outcome == "complete", payload
    assert "Favoured tiny-a vs tiny-b for 5 more counted battles (until 6 between them)" in payload
    (favour,) = read_favours(log_dir)
    assert favour.pair() == {"tiny-a", "tiny-b"} and favour.until == 6  # one battle counted between them
    for data, told in (
        ([KEY, "tiny-a", "ghost", 5], "ghost is not on the board now."),
        ([KEY, "tiny-a", "tiny-a", 5], "Pick two different models."),
    ):
        outcome, payload = rest_call(arena.url, "leaderboard_favour", data, DIRECT)
        assert outcome == "complete" and told in payload, payload
    outcome, payload = rest_call(arena.url, "leaderboard_favour", [KEY, "tiny-a", "tiny-b", 0], DIRECT)
    assert outcome == "error" and "less than minimum value 1" in payload, payload
    assert read_favours(log_dir) == [favour]

"""Gradio requests that Gradio answers with a 500 (and a traceback in the server log) get a 4xx and a
short message from the real app instead; well-formed ones still reach Gradio."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.uiapp import RunningUI, start_ui, ui_settings

DEEP = "[" * 50_000 + "]" * 50_000


@pytest.fixture(scope="module")
def client(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningUI, httpx.Client]]:
    ui = start_ui(ui_settings(tmp_path_factory.mktemp("gradio-calls"), tiny_model_dir))
    with httpx.Client(base_url=ui.url, timeout=30) as http:
        http.get("/")  # the session cookie, as a page has it
        yield ui, http
    ui.stop()


def _join(http: httpx.Client, fn_index: object) -> httpx.Response:
    return http.post("/gradio_api/queue/join", json={"data": [None], "fn_index": fn_index, "session_hash": "calls0001"})


@pytest.mark.parametrize("name", ["no_such_api", "x" * 5000])
def test_an_unknown_api_name_is_a_404_that_does_not_echo_it_whole(client, name: str) -> None:
    _, http = client
    for route in ("call", "run"):
        answer = http.post(f"/gradio_api/{route}/{name}", json={"data": []})
        assert answer.status_code == 404, (route, answer.status_code, answer.text[:200])
        assert "No API endpoint named" in answer.json()["error"] and len(answer.text) < 200


def test_a_body_nested_fifty_thousand_levels_deep_is_a_400(client) -> None:
    _, http = client
    for path in ("/gradio_api/call/battle_vote_a", "/gradio_api/queue/join"):
        answer = http.post(path, content='{"data": ' + DEEP + "}", headers={"content-type": "application/json"})
        assert answer.status_code == 400 and "nests too deeply" in answer.json()["error"], (path, answer.text[:200])


@pytest.mark.parametrize("fn_index", [99999, -1, None, "1"])
def test_a_queue_join_for_no_event_is_a_422(client, fn_index: object) -> None:
    _, http = client
    answer = _join(http, fn_index)
    assert answer.status_code == 422 and "is not one of this app's events" in answer.json()["error"], answer.text[:300]


def test_well_formed_calls_still_reach_gradio(client) -> None:
    ui, http = client
    stop = next(i for i, fn in ui.app.state.blocks.fns.items() if fn.api_name == "sbs_stop")
    # the page's un-queued events (Stop) post to /run/predict, naming the event by its index
    unqueued = http.post(
        "/gradio_api/run/predict", json={"data": [None], "fn_index": stop, "session_hash": "calls0001"}
    )
    assert unqueued.status_code == 200, unqueued.text[:300]
    assert http.post("/gradio_api/run/predict", json={"data": [], "fn_index": 99999}).status_code == 422
    joined = _join(http, next(iter(ui.app.state.blocks.fns)))
    assert joined.status_code == 200 and "event_id" in joined.json(), joined.text[:300]
    named = http.post("/gradio_api/call/battle_vote_a", json={"data": [None]})
    assert named.status_code != 404 and named.status_code < 500, named.text[:300]

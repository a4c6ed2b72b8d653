"""The running app driven through gradio_client, as a script (or an attacker) would: the documented
events (and only those) are public under stable names, the rules hold whatever the buttons show, no
model name reaches the client before the vote, and a streaming update carries only what changed."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from tests.uiapp import NAMES, RunningUI, generate_threads, join, start_ui, ui_settings, wait_for
from webui.arena.rules import PaneSettings
from webui.ui import preview

FIELDS = PaneSettings.FIELDS
LONG = [0.7, 1.0, 0, 3000, 1.0, -1, ""]  # temperature, top_p, top_k, max_new_tokens, rep. penalty, seed, system
QUICK = [0.0, 1.0, 0, 16, 1.0, -1, ""]  # what the controls hold once tiny-a is chosen in a browser
# The public API: every button of the three chat tabs and the model dropdowns; nothing that only
# keeps the page in order (status timer, page load, tab changes, settings toggles, the pane count).
DOCUMENTED = (
    {
        f"/battle_{e}"
        for e in (
            "send",
            "regenerate",
            "regenerate_a",
            "regenerate_b",
            "stop",
            "new_round",
            "prepared",
            "vote_a",
            "vote_b",
            "vote_tie",
            "vote_bad",
        )
    }
    | {
        f"/sbs_{e}"
        for e in (
            "send",
            "regenerate",
            "regenerate_a",
            "regenerate_b",
            "regenerate_c",
            "regenerate_d",
            "stop",
            "clear",
            "vote_a",
            "vote_b",
            "vote_tie",
            "vote_bad",
            "model_a",
            "model_b",
            "model_c",
            "model_d",
        )
    }
    | {f"/direct_{e}" for e in ("send", "regenerate", "stop", "clear", "vote_up", "vote_down", "vote_flag", "model")}
)


@pytest.fixture(scope="module")
def ui(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> RunningUI:
    running = start_ui(ui_settings(tmp_path_factory.mktemp("ui"), tiny_model_dir))
    yield running
    running.stop()


@pytest.fixture
def client(ui: RunningUI) -> Client:
    client = Client(ui.url, verbose=False, download_files=False)
    yield client
    client.close()


def names_in(received: Any) -> list[str]:
    text = received if isinstance(received, str) else json.dumps(received, default=str)
    return [name for name in NAMES if name in text]


def refused(client: Client, api_name: str, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(AppError) as info:
        client.predict(*args, api_name=api_name, **kwargs)
    return str(info.value)


def pane(letter: str, values: list[Any]) -> dict[str, Any]:
    """One side-by-side pane's controls as keyword arguments: a_temperature=..., ..."""
    return {f"{letter}_{name}": value for name, value in zip(FIELDS, values, strict=True)}


# gradio_client returns the value outputs only (no buttons, no state): [chat A, chat B, reveal,
# notice, input] for the battle; [chat A-D, prompt A-D, notice, input] side by side; [chat, prompt,
# notice, input] in direct chat.
def chat_text(update: dict) -> str:
    return json.dumps(update["value"])


def test_the_api_lists_exactly_the_documented_endpoints(client: Client) -> None:
    endpoints = set(client.view_api(return_format="dict", print_info=False)["named_endpoints"])
    ours = {e for e in endpoints if e.split("_")[0] in ("/battle", "/sbs", "/direct", "/app")}
    assert ours == DOCUMENTED
    send = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/sbs_send"]
    names = [p["parameter_name"] for p in send["parameters"]]
    # Panes A and B first, as before there were four: two-pane callers with positional arguments keep working.
    assert names[:4] == ["message", "model_a", "model_b", "same_params"] and names[4:11] == [f"a_{f}" for f in FIELDS]
    assert names[18:21] == ["panes", "model_c", "model_d"] and names[-1] == "d_system_prompt"


class _MetaTags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        key = found.get("property") or found.get("name") or ""
        if tag == "meta" and key.startswith(("og:", "twitter:")):
            self.tags.append((key, found.get("content") or ""))


def test_a_shared_link_previews_as_the_arena_not_as_gradio(ui: RunningUI) -> None:
    """Chat apps and social sites show a link with the page's Open Graph and Twitter tags, read
    without running its scripts. Gradio's template opens with its own ("Gradio", "Click to try out
    the app!") and repeats them empty: each tag comes once, and says what the page is."""
    response = httpx.get(ui.url)
    assert response.status_code == 200 and response.headers["content-length"] == str(len(response.content))
    parser = _MetaTags()
    parser.feed(response.text)
    tags = dict(parser.tags)
    assert len(tags) == len(parser.tags), f"a tag comes twice: {parser.tags}"
    assert tags["og:title"] == tags["twitter:title"] == preview.TITLE
    assert tags["og:description"] == tags["twitter:description"] == preview.DESCRIPTION
    assert "Gradio" not in json.dumps(parser.tags) and "Click to try out" not in response.text
    assert "window.gradio_config" in response.text  # the rest of the page is as Gradio wrote it


def test_battle_turn_end_to_end_without_names_before_the_vote(ui: RunningUI, client: Client) -> None:
    received: list[Any] = [httpx.get(ui.url + "config").text, client.view_api(return_format="dict", print_info=False)]
    received.append(refused(client, "/battle_vote_a"))  # an early vote: refused, and says nothing
    job = client.submit("hello world", api_name="/battle_send")
    final = job.result(timeout=60)
    received += job.outputs()
    chats = [chat_text(final[0]), chat_text(final[1])]
    assert all("<sub>" in c and "tokens" not in c for c in chats), "finished, without counts or speeds"
    assert [final[0]["label"], final[1]["label"]] == ["Model A", "Model B"]
    assert names_in(received) == [], "a model name reached the client before the vote"

    votes_before = len(ui.recorder.votes)
    revealed = client.predict(api_name="/battle_vote_a")
    vote = ui.recorder.votes[-1]
    assert len(ui.recorder.votes) == votes_before + 1 and vote.kind == "leftvote"
    pair = [c.model_name for c in vote.conversations]
    assert set(pair) <= {"tiny-a", "tiny-b"} and pair[0] != pair[1]
    assert f"Model A was **{pair[0]}**" in revealed[2] and revealed[0]["label"] == f"Model A: {pair[0]}"
    assert "| max_new_tokens |" in revealed[2], "the settings each model used"
    assert "tokens/s" in chat_text(revealed[0]), "the statistics, after the vote"
    assert revealed[4]["interactive"] is False, "the input is locked until New round"

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
    job = client.submit(
        message="hello", model_a="long-a", model_b="long-b", **pane("a", LONG), **pane("b", LONG), api_name="/sbs_send"
    )
    wait_for(
        lambda: len(job.outputs()) > 2 and all(len(chat_text(u)) > 80 for u in job.outputs()[-1][:2] if "value" in u),
        30,
        "no text streamed",
    )
    assert len(generate_threads()) == 2, "both panes generate at once"
    assert "every reply has finished" in refused(client, "/sbs_vote_a")
    stopped = client.predict(api_name="/sbs_stop")
    job.result(timeout=30)
    wait_for(lambda: not generate_threads(), 10, "generate threads still running after Stop")
    assert all("stopped" in chat_text(stopped[i]) for i in (0, 1)), "partial replies stay, marked as stopped"
    assert [c.finished.reason.value for c in ui.recorder.chats[-2:]] == ["cancelled"] * 2
    client.predict(api_name="/sbs_vote_b")  # now it may
    assert "already voted" in refused(client, "/sbs_vote_a")


def test_a_tab_closed_before_its_reply_stream_connected_stops_the_models(ui: RunningUI, client: Client) -> None:
    """A page joins an event, then opens the stream that carries its updates: a tab closed in
    between leaves Gradio no stream to see drop (CI caught a closed tab generating on). The page's
    heartbeat connection goes with the tab either way, and that stops the session's run."""
    parameters = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/sbs_send"]["parameters"]
    asked = {p["parameter_name"]: p.get("parameter_default") for p in parameters}
    asked.update(message="hello", model_a="long-a", model_b="long-b", **pane("a", LONG), **pane("b", LONG))
    session_hash = "tab-closed-early"
    chats = len(ui.recorder.chats)
    with httpx.Client(base_url=ui.url, timeout=10) as page:
        assert page.get("").status_code == 200  # the page: its session cookie
        with page.stream("GET", f"gradio_api/heartbeat/{session_hash}") as heartbeat:
            beats = heartbeat.iter_lines()  # held: a dropped iterator would close the connection now
            assert next(beats).startswith("data: ")
            # the session State first (the server keeps it), then the named inputs
            joined = join(page, ui, "sbs_send", session_hash, [None, *asked.values()])
            assert joined.status_code == 200, joined.text
            wait_for(lambda: len(generate_threads()) == 2, 30, "both panes should generate")
        # the heartbeat closed with the tab; no event stream was ever opened
        wait_for(lambda: not generate_threads(), 20, "a tab closed before its stream connected generates on")
    wait_for(lambda: len(ui.recorder.chats) == chats + 2, 10, "the stopped replies were not recorded")
    assert [c.finished.reason.value for c in ui.recorder.chats[-2:]] == ["cancelled"] * 2


def test_a_streaming_update_carries_only_what_changed(client: Client) -> None:
    job = client.submit(
        message="hello",
        model_a="long-a",
        model_b="long-b",
        **pane("a", [*LONG[:3], 400, *LONG[4:]]),
        **pane("b", [*LONG[:3], 600, *LONG[4:]]),
        api_name="/sbs_send",
    )
    final = job.result(timeout=120)  # long enough to stream for a while on a fast machine (updates are >= 0.12 s apart)
    frames = job.outputs()
    middle = frames[2:-1]  # after the first update (everything) and the second (the box cleared)
    assert len(middle) >= 3, "the replies streamed in several updates"
    skip = {"__type__": "update"}
    for frame in middle:
        # the notice and the box, which the page also changes itself, only when they change: never here
        assert list(frame[8:]) == [skip, skip], f"sent more than changed: {frame[8:]}"
        # chats and prompts go as bare values (an unchanged one as an empty diff), never as updates,
        # for which Gradio would build a new component (see the next test)
        assert all(isinstance(update, list) for update in frame[:4]), frame[:4]
        assert all(isinstance(update, str) for update in frame[4:8]), frame[4:8]
    assert all(frame[0] and frame[0][0]["role"] == "user" for frame in middle), "pane A shows the conversation"
    assert not any(frame[2] or frame[3] for frame in middle), "the hidden panes C and D stay empty"
    assert "400 tokens" in chat_text(final[0]) and "600 tokens" in chat_text(final[1]), "the last update is whole"
    assert final[4].startswith("<|user|> hello"), "and carries the prompt"


def test_streaming_builds_no_component_per_update(
    ui: RunningUI, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For an update dict Gradio builds a new component and its whole config for the session, the
    bulk of the server's work per update; a streamed chat goes as its bare value, so a reply costs
    a few component builds (the first update and the last) however many updates it streams in."""
    import gradio as gr

    built: list[str] = []
    original = gr.Chatbot.__init__

    def counting(self: gr.Chatbot, *args: Any, **kwargs: Any) -> None:
        built.append(kwargs.get("label") or "")
        original(self, *args, **kwargs)

    monkeypatch.setattr(gr.Chatbot, "__init__", counting)
    job = client.submit(
        message="hello",
        model_a="long-a",
        model_b="long-b",
        **pane("a", [*LONG[:3], 300, *LONG[4:]]),
        **pane("b", [*LONG[:3], 300, *LONG[4:]]),
        api_name="/sbs_send",
    )
    job.result(timeout=120)
    updates = len(job.outputs())
    assert updates >= 6, "the replies streamed in several updates"
    # four chats (two shown, two hidden) in the first update and in the last: 8, whatever `updates` is
    assert len(built) <= 8, f"{len(built)} chat components built for {updates} updates: {built}"


def test_three_panes_each_with_its_own_parameters(ui: RunningUI, client: Client) -> None:
    lengths = {"a": 5, "b": 9, "c": 13}
    kwargs = {
        k: v
        for letter, n in lengths.items()
        for k, v in pane(letter, [*LONG[:3], n, *LONG[4:6], f"sys {letter}"]).items()
    }
    out = client.predict(
        message="hello", panes=3, model_a="long-a", model_b="long-b", model_c="long-a", **kwargs, api_name="/sbs_send"
    )
    assert [out[i]["label"] for i in range(4)] == ["Model A: long-a", "Model B: long-b", "Model C: long-a", "Model D"]
    for i, n in enumerate(lengths.values()):
        assert f"{n} tokens" in chat_text(out[i])
    assert sorted(c.conversation.system_message for c in ui.recorder.chats[-3:]) == ["sys a", "sys b", "sys c"]
    assert "two panes to vote" in out[8], "the notice says why there is no vote"
    assert "two models" in refused(client, "/sbs_vote_a")
    before = len(ui.recorder.chats)
    again = client.predict(**kwargs, api_name="/sbs_regenerate")  # every pane on show, with its parameters
    assert len(ui.recorder.chats) == before + 3 and all(
        f"{n} tokens" in chat_text(again[i]) for i, n in enumerate(lengths.values())
    )
    client.predict(**kwargs, api_name="/sbs_regenerate_b")
    assert len(ui.recorder.chats) == before + 4 and ui.recorder.chats[-1].conversation.model_name == "long-b"


def test_a_model_dropdown_redraws_only_its_own_pane(client: Client) -> None:
    """Two dropdowns set at once (on page load) answer at once: neither may redraw the other's
    pane, or the later answer can put back a label without the model's name."""
    returns = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/sbs_model_b"]["returns"]
    assert [r["component"] for r in returns].count("Chatbot") == 1
    changed = client.predict("tiny-b", api_name="/sbs_model_b")
    assert changed[0]["label"] == "Model B: tiny-b"


def test_side_by_side_shows_names_and_the_exact_prompt(client: Client) -> None:
    quick_b = [*QUICK[:6], "Answer briefly."]
    out = client.predict("hello", "tiny-a", "tiny-b", False, *QUICK, *quick_b, api_name="/sbs_send")  # positional
    assert [out[0]["label"], out[1]["label"]] == ["Model A: tiny-a", "Model B: tiny-b"]
    assert out[5].startswith("<|system|> Answer briefly. <|end|> <|user|> hello"), "tiny-b's prompt"
    assert "<|user|> hello <|end|> <|assistant|>" in out[4]
    changed = client.predict("tiny-a", api_name="/sbs_model_b")
    assert chat_text(changed[0]) == "[]", "a new model clears its pane"
    again = client.predict(
        message="again",
        model_a="tiny-a",
        model_b="tiny-a",
        **pane("a", QUICK),
        **pane("b", QUICK),
        api_name="/sbs_send",
    )
    assert chat_text(again[0]).count('"user"') == 2, "the other pane kept its conversation"
    assert chat_text(again[1]).count('"user"') == 1


def test_direct_chat_and_feedback(ui: RunningUI, client: Client) -> None:
    direct = dict(zip(FIELDS, QUICK, strict=True))
    out = client.predict(message="hello", model="tiny-b", **direct, api_name="/direct_send")
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
    assert "no model with that name" in refused(
        client, "/sbs_send", message="hi", model_a="no-such-model", model_b="tiny-a"
    )
    bad_top_k = [*QUICK[:2], 10.5, *QUICK[3:]]
    assert "Parameters: top_k" in refused(
        client,
        "/sbs_send",
        message="hi",
        model_a="tiny-a",
        model_b="tiny-b",
        **pane("a", bad_top_k),
        **pane("b", QUICK),
    )
    assert "[2, 3, 4]" in refused(client, "/sbs_send", message="hi", panes=7, model_a="tiny-a", model_b="tiny-b")


def test_no_event_keeps_its_loading_status_on_a_layout_or_a_visible_component(ui: RunningUI) -> None:
    """The page updates the loading status of every progress target any event ever had, each time
    any event changes state (every streamed update), and for a layout block it walks the block's
    whole subtree: a page load with the gr.Tabs among its outputs made that the whole page, tens of
    ms of the browser's time per streamed update (webui.ui.common.progress_on). So no event may
    have a layout block as a progress target, and the events nobody clicks (page load, timers, tab
    changes, value changes) keep theirs on an invisible component."""
    config = httpx.get(f"{ui.url}config", timeout=10).json()
    components = {c["id"]: c for c in config["components"]}
    layout = {"tabs", "tabitem", "column", "row", "accordion", "group", "form"}
    background = {"load", "tick", "select", "change"}  # ("input" is a person choosing, as a click)
    checked = 0
    for dep in config["dependencies"]:
        if not dep.get("backend_fn"):
            continue  # a script of the page, or a cancel: no loading status
        targets = [components[i] for i in dep.get("show_progress_on") or dep["outputs"]]
        assert not [t["type"] for t in targets if t["type"] in layout], dep["api_name"]
        if {event for _, event in dep["targets"]} <= background:
            assert all(t["props"].get("visible") is False for t in targets), dep["api_name"]
            checked += 1
    assert checked >= 10, "the page load, the timers, the tab changes and the choosers were all checked"

"""The Leaderboard tab through the running app (real recorder, real tiny models, gradio_client):
"my votes" shows each browser session its own votes and nobody else's, and the log keeps a keyed
hash of the session, never the session's secret; with no operator key the operator's views
(everyone's conversations) are not there to call, although the app listens on 127.0.0.1."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from gradio_client import Client

from tests.apps import app_settings, start_app
from webui.leaderboard.__main__ import main as leaderboard_main
from webui.leaderboard.snapshots.snapshot import load_snapshot
from webui.records.storage import read_logs


@pytest.fixture(scope="module")
def app(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    running = start_app(app_settings(tmp_path_factory.mktemp("my-votes"), tiny_model_dir))
    yield running.url + "/", running.services
    running.stop()


def vote(client: Client, button: str) -> None:
    client.predict("hello world", api_name="/battle_send")
    client.predict(api_name=f"/battle_vote_{button}")
    client.predict(api_name="/battle_new_round")


def board_summary(client: Client, expected: str, timeout: float = 30.0) -> str:
    """The tab's summary once it says `expected`: the board is rebuilt in the background after a
    vote (within seconds, not at once), and the tab shows the last board built meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        summary = client.predict(api_name="/leaderboard_refresh")[0]
        if expected in summary or time.monotonic() > deadline:
            return summary
        time.sleep(0.2)


def battles_in(table: dict) -> int:
    column = table["headers"].index("battles")
    return sum(int(row[column]) for row in table["data"])


@pytest.mark.timeout(300)
def test_each_session_sees_only_its_own_votes(app):
    url, services = app
    alice = Client(url, verbose=False, download_files=False)
    bob = Client(url, verbose=False, download_files=False)
    try:
        note, _table = alice.predict(api_name="/leaderboard_my_votes")
        assert "not voted" in note
        vote(alice, "a")
        vote(alice, "tie")
        vote(bob, "b")
        alice_note, alice_table = alice.predict(api_name="/leaderboard_my_votes")
        bob_note, bob_table = bob.predict(api_name="/leaderboard_my_votes")
        summary = board_summary(alice, "Based on 3 battles")
        coding = alice.predict("coding", api_name="/leaderboard_category")[0]
    finally:
        alice.close()
        bob.close()
    assert "Your 2 battle votes" in alice_note and battles_in(alice_table) == 4
    assert "Your 1 battle vote " in bob_note and battles_in(bob_table) == 2
    assert "Based on 3 battles" in summary and "Category **coding**: 0 of the 3 battles" in coding

    votes = [r for r in read_logs(services.settings.log_dir).records if r["type"] != "chat"]
    keys = [v["extra"]["session"] for v in votes]
    assert keys[0] == keys[1] != keys[2] and all(k.startswith("h:") for k in keys)
    assert keys[0] == services.recorder.session_key(alice.session_hash)
    text = "".join(p.read_text() for p in services.settings.log_dir.glob("*-conv.json"))
    assert alice.session_hash not in text and bob.session_hash not in text


def test_operator_views_are_not_offered_without_an_operator_key(app):
    """This app listens on 127.0.0.1, as it does behind a reverse proxy or a tunnel: that alone must
    not open the voter check or the exports (they used to be offered there) to anyone."""
    url, _ = app
    client = Client(url, verbose=False, download_files=False)
    try:
        endpoints = set(client.view_api(return_format="dict", print_info=False)["named_endpoints"])
    finally:
        client.close()
    assert {"/leaderboard_my_votes", "/leaderboard_category"} <= endpoints
    assert (
        not {"/leaderboard_voters", "/export_battles_jsonl", "/export_pairs_jsonl", "/export_history_csv"} & endpoints
    )
    for api in ("leaderboard_voters", "export_battles_jsonl"):
        call = httpx.post(url + f"gradio_api/call/{api}", json={"data": []}, timeout=10)
        assert call.status_code >= 400 and "hello world" not in call.text, call.text
    config = httpx.get(url + "config", timeout=10).text
    assert "ARENA_OPERATOR_KEY" in config and "--operator-key-file" in config  # the accordion says how


@pytest.mark.timeout(300)
def test_the_tab_says_what_changed_since_the_last_snapshot(app):
    """A snapshot taken with the command line beside the running app's logs: after one more vote
    the tab's summary says what changed since, on the page a visitor gets."""
    url, services = app
    log_dir = services.settings.log_dir
    client = Client(url, verbose=False, download_files=False)
    try:
        vote(client, "a")
        assert leaderboard_main([str(log_dir), "--rounds", "5", "--snapshot"]) == 0  # the app's own settings
        when = load_snapshot(log_dir / "snapshots").created.replace("T", " ")[:16]
        vote(client, "b")
        summary = board_summary(client, "+1 battle.")
    finally:
        client.close()
    assert f"Changes since the last snapshot ({when} UTC): " in summary and summary.endswith("; +1 battle.")


@pytest.mark.timeout(300)
def test_the_tab_shows_a_judges_agreement_with_the_votes(app):
    """Verdicts written beside the running app's logs (as `python -m webui.judge` writes them, here
    for the votes just cast): the tab's Agreement section shows the judge's figures."""
    from webui.judge.records import Asked, VerdictLog, verdict_record, vote_key
    from webui.leaderboard.votes.index import VoteIndex

    url, services = app
    log_dir = services.settings.log_dir
    client = Client(url, verbose=False, download_files=False)
    try:
        assert "No judge has judged" in client.predict(api_name="/leaderboard_agreement")
        vote(client, "a")
        vote(client, "b")
        board_summary(client, "Based on")
        index = VoteIndex(log_dir)
        try:
            index.catch_up()
            voted = index.rows()
        finally:
            index.close()
        log = VerdictLog(log_dir)
        for _, row in voted.iterrows():  # a judge that agrees with every vote, in both orders
            about = {"vote": vote_key(row["file"], row["offset"]), "model_a": row["model_a"]}
            about |= {"model_b": row["model_b"], "human": row["winner"]}
            mark = {"model_a": ("A", "B"), "model_b": ("B", "A")}.get(row["winner"], ("tie", "tie"))
            asked = [Asked("ab", mark[0], mark[0], 0.1), Asked("ba", mark[1], mark[1], 0.1)]
            log.write(verdict_record(about, "tiny-judge", None, "v1", asked, time.time()))
        log.close()
        figures = client.predict(api_name="/leaderboard_agreement")
        both = client.predict(api_name="/leaderboard_composite")
        compared = client.predict("tiny-a", "tiny-b", api_name="/leaderboard_compare")
        same = client.predict("tiny-a", "tiny-a", api_name="/leaderboard_compare")
    finally:
        client.close()
    assert "Composite board: a human vote weighs 1, a verdict of tiny-judge weighs" in both
    assert "tiny-a" in both and "tiny-b" in both and "the board above stays human-only" in both
    assert compared.startswith("Is tiny-b better than tiny-a? P(tiny-b better) = ") and "head to head" in compared
    assert same == "Pick two different models."
    assert f"Judge tiny-judge (prompt v1) on {len(voted)} battles" in figures
    assert "agreement with ties      100% (" in figures and "position consistency     100% (" in figures


@pytest.mark.timeout(300)
def test_a_prepared_pair_is_a_blind_battle_whose_vote_names_the_pair(app):
    """A replay's queued pair (written beside the running app's logs) becomes a battle through the
    page's own endpoint: the stored prompt and replies, no name or fingerprint before the vote, one
    turn only; the vote is an ordinary battle vote that names the pair."""
    from gradio_client.exceptions import AppError

    from webui.records.prepared import PREPARED_KEY, PreparedPair, PreparedPairs, write_pairs

    url, services = app
    log_dir = services.settings.log_dir
    stored = PreparedPair(
        "pair-7", "replay-test", "What is two plus two?", ("tiny-a", "tiny-b"), ("FOUR-ONE", "FOUR-TWO"), ("fpa", "fpb")
    )
    write_pairs(log_dir, "replay-test", [stored])
    client = Client(url, verbose=False, download_files=False)
    try:
        deadline = time.monotonic() + 30
        while True:  # the app reads the folder again within seconds
            try:
                shown = repr(client.predict(api_name="/battle_prepared"))
                break
            except AppError as exc:
                if "No prepared question" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        with pytest.raises(AppError, match="prepared"):
            client.predict("and five?", api_name="/battle_send")
        revealed = repr(client.predict(api_name="/battle_vote_a"))
    finally:
        client.close()
    assert "What is two plus two?" in shown and "FOUR-ONE" in shown and "FOUR-TWO" in shown
    assert "tiny-a" not in shown and "tiny-b" not in shown and "fpa" not in shown
    assert "tiny-a" in revealed and "tiny-b" in revealed
    votes = [r for r in read_logs(log_dir).records if r["type"] != "chat" and PREPARED_KEY in r["extra"]]
    (voted,) = votes
    assert voted["extra"][PREPARED_KEY] == "pair-7" and voted["type"] == "leftvote"
    sides = {state["model_name"]: state for state in voted["states"]}
    assert sides["tiny-a"]["messages"][-1] == ["assistant", "FOUR-ONE"] and sides["tiny-b"]["fingerprint"] == "fpb"
    assert PreparedPairs(log_dir).pending() == []

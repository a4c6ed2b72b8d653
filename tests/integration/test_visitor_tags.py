"""Visitor tags through the running app (real recorder, real tiny models, gradio_client): with
--categories-file and --visitor-tags a visitor may tag a battle with a declared category before
voting; the tag is kept in the vote record's `extra` (FastChat's clean_battle_data still reads the
vote), counts for the category alongside its rule, and the category's board says it is shrunk.
An unknown tag is refused and records nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from gradio_client import Client

from tests.apps import app_settings, start_app
from tests.integration.test_fastchat_compat import fastchat_battles
from webui.leaderboard.votes.declared import TAG_FIELD
from webui.records.storage import read_logs

CATEGORIES = """\
categories:
  - name: greetings
    keywords: [hello]
  - name: maths
    regex: '\\d+\\s*[*+]\\s*\\d+'
"""


@pytest.fixture(scope="module")
def app(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("visitor-tags")
    (tmp / "categories.yaml").write_text(CATEGORIES)
    settings = app_settings(tmp, tiny_model_dir, categories_file=str(tmp / "categories.yaml"), visitor_tags=True)
    running = start_app(settings)
    yield running.url + "/", running.services
    running.stop()


def category_summary(client: Client, category: str, expected: str, timeout: float = 30.0) -> str:
    """The category's summary once it says `expected` (the board is rebuilt in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        summary = client.predict(category, api_name="/leaderboard_category")[0]
        if expected in summary or time.monotonic() > deadline:
            return summary
        time.sleep(0.2)


@pytest.mark.timeout(300)
def test_a_visitor_tag_is_recorded_and_counts_for_its_category(app):
    url, services = app
    client = Client(url, verbose=False, download_files=False)
    try:
        client.predict("hello world", api_name="/battle_send")
        client.predict("maths", api_name="/battle_vote_a")  # tagged: in maths by the tag, greetings by the rule
        client.predict(api_name="/battle_new_round")
        client.predict("what is 2 * 3", api_name="/battle_send")
        with pytest.raises(Exception, match="cooking"):  # not one of the menu's choices
            client.predict("cooking", api_name="/battle_vote_b")
        client.predict("", api_name="/battle_vote_b")  # untagged: in maths by the rule alone
        client.predict(api_name="/battle_new_round")
        client.predict("good morning", api_name="/battle_send")
        client.predict("", api_name="/battle_vote_tie")  # in neither
        maths = category_summary(client, "maths", "Category **maths**: 2 of the 3 battles")
        table = client.predict("maths", api_name="/leaderboard_category")[1]
        greetings = client.predict("greetings", api_name="/leaderboard_category")[0]
        choices = [c[1] for c in client.predict(api_name="/leaderboard_refresh")[9]["choices"]]
    finally:
        client.close()
    assert "Category **maths**: 2 of the 3 battles" in maths, maths
    assert "Shrunk toward the overall board (a normal prior of sd 50 Elo" in maths
    assert "Category **greetings**: 1 of the 3 battles" in greetings, greetings
    notes = [row[table["headers"].index("Note")] for row in table["data"]]
    assert all("own " in n and "weight " in n for n in notes), notes
    assert {"maths", "greetings"} <= set(choices)

    logs = services.settings.log_dir
    votes = [r for r in read_logs(logs).records if r["type"] != "chat"]
    assert [v["type"] for v in votes] == ["leftvote", "rightvote", "tievote"]  # the refused vote left no record
    assert [v["extra"].get(TAG_FIELD) for v in votes] == ["maths", None, None]
    assert len(fastchat_battles(sorted(logs.glob("*-conv.json")))) == 3  # FastChat's reader takes all three

"""The snapshot schedule in the running app (real recorder, tiny models, gradio_client), started as
`serve` starts it (webui.server.deploy.before_serving): at start it snapshots the board and posts
the changes since the snapshot the command line took; while the webhook holds that post open,
visitors' votes are acknowledged and logged all the same; the server's stop ends the schedule and
the webhook's thread."""

from __future__ import annotations

from pathlib import Path

import pytest
from gradio_client import Client

from tests.apps import app_settings, start_app
from tests.servers import threads_end_within, wait_for
from tests.standins import webhook
from webui.leaderboard.__main__ import main as leaderboard_main
from webui.records.storage import read_logs
from webui.server.deploy import after_serving, before_serving


def votes_logged(log_dir: Path) -> int:
    return sum(1 for r in read_logs(log_dir).records if str(r.get("type", "")).endswith("vote"))


def vote(client: Client, message: str) -> None:
    client.predict(message, api_name="/battle_send")
    client.predict(api_name="/battle_vote_a")
    client.predict(api_name="/battle_new_round")


@pytest.mark.timeout(300)
def test_votes_go_on_while_the_webhook_hangs(tiny_model_dir: Path, tmp_path: Path):
    with webhook(path="/services/T1/B2/NEVER-LOGGED", hang=True) as hook:
        settings = app_settings(tmp_path, tiny_model_dir, snapshot_every="1d", notify_url=hook.url)
        running = start_app(settings)
        services = running.services
        client = Client(running.url + "/", verbose=False, download_files=False)
        try:
            vote(client, "a vote before the baseline")
            assert leaderboard_main([str(settings.log_dir), "--rounds", "5", "--snapshot"]) == 0
            vote(client, "a vote the schedule's first snapshot counts")
            wait_for(lambda: running.app.state.board.board()[0].votes_read == 2, 60, "the board did not count 2 votes")
            before_serving(running.server, running.app, services)  # as serve() does: the schedule starts
            wait_for(hook.holding.is_set, 60, "the schedule posted nothing to the webhook")
            for n in (3, 4):  # the post hangs; the votes do not wait for it
                vote(client, f"vote {n} while the webhook hangs")
                assert votes_logged(settings.log_dir) == n
            assert hook.holding.is_set() and not hook.posts and running.app.state.snapshots.notifier.delivered == 0
            hook.release.set()
            wait_for(lambda: hook.posts, 30, "the held post did not complete")
        finally:
            client.close()
            after_serving(running.app)
            running.stop()
        threads_end_within("snapshot-schedule", 15)
        threads_end_within("notify", 15)
    assert len(list((settings.log_dir / "snapshots").glob("board-*.json"))) == 2
    assert "+1 since" in hook.posts[0]["text"]

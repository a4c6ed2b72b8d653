"""The arena's own snapshots (webui.server.schedule) and what they feed: the running schedule takes
a snapshot per period of an injected clock and a local webhook receiver gets its changes as
Slack-compatible JSON; a failing webhook is retried within bounds and logged without its URL's
secret; a hanging one holds up neither the schedule nor its caller; two schedulers on one folder
(or one shared store) write each period's snapshot once; the results reach a local stand-in for
the Hub's API through huggingface_hub's own client, with a dataset card."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tests.postgres import postgres_server, shared_store  # noqa: F401  (fixtures)
from tests.records import battle, vote
from tests.servers import free_port, wait_for
from tests.standins import hub, webhook
from webui.config import Settings, parse_duration
from webui.db.schema import migrate
from webui.db.store import open_store
from webui.errors import ConfigError
from webui.leaderboard.board.build import BoardOptions
from webui.leaderboard.board.view import LeaderboardView
from webui.leaderboard.snapshots.announce import slack_message
from webui.leaderboard.snapshots.changes import changes, newly_certain
from webui.leaderboard.snapshots.snapshot import Entry, Snapshot, load_snapshot
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder
from webui.server.deploy import start_snapshots
from webui.server.notify import Notifier, redacted
from webui.server.schedule import FileClaim, SnapshotSchedule, StoreClaim, Taken

DAY = 86_400.0
START = 1_767_571_200.0 + 3_600  # 2026-01-05 01:00 UTC
OPTIONS = BoardOptions(rounds=10, min_battles=0, history_points=0)
SECRET = "/services/T0SECRET1/B0SECRET2/XxSeCrEtXx"


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def arena(tmp_path: Path) -> Iterator[tuple[JsonlRecorder, LeaderboardView]]:
    """A log with twelve battles of strong against weak, and its live board, built."""
    rec = JsonlRecorder(tmp_path / "logs", IdentityPolicy("none"))
    for i in range(12):
        rec.vote(vote("leftvote" if i < 9 else "rightvote", battle("strong", "weak")))
    view = LeaderboardView(rec.log_dir, OPTIONS, poll_s=0.05)
    rec.vote_listeners.append(view.live.nudge)
    view.live.sync()
    yield rec, view
    view.close()


def snapshots_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("board-*.json"))


# --- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("6h", 21_600), ("24h", DAY), ("1d", DAY), ("45s", 45)])
def test_durations_are_read_with_their_unit(text: str, seconds: float):
    assert parse_duration("snapshot_every", text) == seconds
    assert Settings(snapshot_every=text).snapshot_every_s == seconds


@pytest.mark.parametrize("text", ["24", "1w", "h", "0h", "-1d", "1.5.0h", "one day"])
def test_a_duration_without_a_known_unit_is_refused_clearly(text: str):
    with pytest.raises(ConfigError, match=r"snapshot_every: must be a duration with its unit, like 30m, 6h"):
        Settings(snapshot_every=text)


def test_the_webhook_needs_a_schedule_and_an_http_url_and_stays_out_of_repr():
    with pytest.raises(ConfigError, match=r"notify_url: .* needs --snapshot-every"):
        Settings(notify_url="https://hooks.example.com/x")
    with pytest.raises(ConfigError, match="notify_url: must be an http"):
        Settings(snapshot_every="1d", notify_url="hooks.example.com/x")
    assert "SECRET" not in repr(Settings(snapshot_every="1d", notify_url="https://hooks.example.com" + SECRET))


# --- the running schedule and its webhook -----------------------------------------------------


def test_the_running_schedule_posts_each_snapshots_changes_to_the_webhook(arena, caplog):
    rec, view = arena
    clock, folder = Clock(), rec.log_dir / "snapshots"
    with webhook(path=SECRET) as hook, caplog.at_level(logging.DEBUG):
        settings = Settings(log_dir=rec.log_dir, snapshot_every="1d", notify_url=hook.url)
        scheduled = start_snapshots(view, settings, clock=clock, poll_s=0.01)
        assert scheduled is not None and scheduled.notifier is not None
        try:
            # At start the period has no snapshot: one is taken at once, with nothing to compare.
            wait_for(lambda: len(snapshots_in(folder)) == 1, 20, "no snapshot at the start")
            for _ in range(30):  # a newcomer beats weak: the board moves
                rec.vote(vote("leftvote", battle("newcomer", "weak")))
            view.live.sync()
            clock.now += DAY / 2  # the same period: nothing more
            clock.now += DAY / 2
            wait_for(lambda: hook.posts, 20, "the webhook got nothing after the next period's snapshot")
        finally:
            scheduled.close()
    first, second = snapshots_in(folder)
    assert [p.name for p in (first, second)] == ["board-20260105T010000Z.json", "board-20260106T010000Z.json"]
    assert len(hook.posts) == 1 and hook.paths == [SECRET]
    message = hook.posts[0]
    found = changes(load_snapshot(first), load_snapshot(second))
    assert set(message) == {"text", "blocks"}
    assert all(b["type"] == "section" and b["text"]["type"] == "mrkdwn" for b in message["blocks"])
    assert message["text"] == "\n\n".join(b["text"]["text"] for b in message["blocks"])
    text = message["text"]
    assert text.startswith("*Leaderboard snapshot 2026-01-06T01:00:00Z*: 42 battles counted (+30 since 2026-01-05")
    assert "*New models*\n• *newcomer* is new: rank 1" in text
    assert [c.model for c in found.moved if c.view == "raw" and c.steps_up] == ["strong", "weak"]
    assert "*strong* ↓1: rank 1 → 2" in text and "*weak* ↓1: rank 2 → 3" in text
    assert "*Most useful next comparison:*" in text
    assert "SECRET" not in caplog.text and f"{redacted(hook.url)}" in caplog.text


def test_a_period_taken_already_is_not_taken_again_after_a_restart(arena):
    rec, view = arena
    clock, folder = Clock(), rec.log_dir / "snapshots"
    for _ in range(2):  # a restart within the period: the claim file is still there
        schedule = SnapshotSchedule(folder, DAY, lambda: view.board()[0], FileClaim(folder, "me"), clock=clock)
        schedule.turn()
    assert len(snapshots_in(folder)) == 1
    clock.now += DAY
    assert schedule.turn() is not None and len(snapshots_in(folder)) == 2


def test_a_failing_webhook_is_retried_with_backoff_then_dropped_and_its_secret_never_logged(caplog):
    with caplog.at_level(logging.DEBUG, logger="webui.server.notify"):
        with webhook(path=SECRET, fail_first=2) as hook:  # two 500s, then it takes the message
            notifier = Notifier(hook.url, first_delay_s=0.01, attempts=4)
            assert notifier.send({"text": "hello"})
            wait_for(lambda: notifier.delivered == 1, 20, "not delivered after two failures")
            notifier.close()
        assert len(hook.paths) == 3 and hook.posts == [{"text": "hello"}]
        with webhook(
            path=SECRET, status=500, echo_path=True
        ) as hook:  # always failing: `attempts` tries, then an error
            notifier = Notifier(hook.url, first_delay_s=0.01, attempts=3)
            notifier.send({"text": "hello"})
            wait_for(lambda: "failed 3 times" in caplog.text, 20, "no error after the last try")
            notifier.close()
        assert len(hook.paths) == 3 and not hook.posts
        refused = f"http://127.0.0.1:{free_port()}{SECRET}?token=ZZTOKENZZ"  # nothing listens: a connection error
        notifier = Notifier(refused, first_delay_s=0.01, attempts=2)
        notifier.send({"text": "hello"})
        wait_for(lambda: caplog.text.count("failed 2 times") == 1, 20, "no error for the refused connection")
        notifier.close()
    assert "retrying in" in caplog.text and "HTTP Error 500: no hook at …" in caplog.text
    for secret in ("T0SECRET1", "B0SECRET2", "XxSeCrEtXx", "ZZTOKENZZ"):
        assert secret not in caplog.text
    assert "http://127.0.0.1:" in caplog.text and "/services/…" in caplog.text
    assert redacted("https://hooks.slack.com/services/T1/B2/XXXX") == "https://hooks.slack.com/services/…"


def test_a_hanging_webhook_holds_up_neither_the_schedule_nor_the_sender(arena):
    """While the webhook holds the first post open, the sender and the schedule go on: the next
    period's snapshot is taken and its message queued (a vote's path never meets either)."""
    rec, view = arena
    clock, folder = Clock(), rec.log_dir / "snapshots"
    with webhook(hang=True) as hook:
        notifier = Notifier(hook.url, timeout_s=30)
        settings = Settings(log_dir=rec.log_dir, snapshot_every="1d", notify_url=hook.url)
        scheduled = start_snapshots(view, settings, clock=clock, poll_s=0.01, notifier=notifier)
        assert scheduled is not None
        try:
            wait_for(lambda: len(snapshots_in(folder)) == 1, 20, "no first snapshot")
            clock.now += DAY
            wait_for(hook.holding.is_set, 20, "the webhook holds no post")
            for n in (3, 4):  # two more periods while the first post hangs
                clock.now += DAY
                wait_for(lambda n=n: len(snapshots_in(folder)) == n, 20, "the schedule waited for the webhook")
            assert notifier.send({"text": "and another"})  # returns at once, queued
            assert not hook.posts and notifier.delivered == 0  # the first post is still held
            hook.release.set()
            wait_for(lambda: notifier.delivered == 4, 20, "the queued messages did not follow")
        finally:
            scheduled.close()


# --- one writer -------------------------------------------------------------------------------


def _race(schedules: list[SnapshotSchedule], clock: Clock, periods: int) -> list[Taken]:
    """Each schedule's turn at once in every period (threads released together)."""
    taken: list[Taken] = []
    for _ in range(periods):
        gate = threading.Barrier(len(schedules))

        def turn(schedule: SnapshotSchedule, gate: threading.Barrier = gate) -> None:
            gate.wait()
            if (result := schedule.turn()) is not None:
                taken.append(result)

        threads = [threading.Thread(target=turn, args=(s,)) for s in schedules]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        clock.now += DAY
    return taken


def test_two_schedulers_on_one_folder_take_each_period_once(tmp_path: Path, arena):
    rec, view = arena
    board = view.board()[0]
    folder, clock = rec.log_dir / "snapshots", Clock()
    schedules = [SnapshotSchedule(folder, DAY, lambda: board, FileClaim(folder, name), clock=clock) for name in "ab"]
    taken = _race(schedules, clock, periods=4)
    assert len(taken) == 4 and len(snapshots_in(folder)) == 4
    assert len(list(folder.glob(".period-*.claim"))) == 4


def test_servers_sharing_a_store_take_each_period_once_whatever_their_folders(
    tmp_path: Path,
    arena,
    shared_store: str,  # noqa: F811  (SQLite, then PostgreSQL)
):
    """The store's lease table gives each period to one server, so every period has one snapshot
    across all the folders, and a restart within the period takes none again."""
    _, view = arena
    board = view.board()[0]
    clock = Clock()
    stores = [open_store(shared_store) for _ in range(3)]
    with stores[0].transaction():
        migrate(stores[0])
    folders = [tmp_path / f"web{n}" / "snapshots" for n in range(3)]
    schedules = [
        SnapshotSchedule(folder, DAY, lambda: board, StoreClaim(store, f"web{n}"), clock=clock)
        for n, (folder, store) in enumerate(zip(folders, stores, strict=True))
    ]
    try:
        taken = _race(schedules, clock, periods=3)
        assert len(taken) == 3 and sum(len(snapshots_in(f)) for f in folders) == 3
        clock.now -= DAY  # back into the last period: a restarted server finds it claimed
        again = SnapshotSchedule(folders[0], DAY, lambda: board, StoreClaim(stores[0], "web0-restarted"), clock=clock)
        assert again.turn() is None
    finally:
        for store in stores:
            store.close()


# --- the message ------------------------------------------------------------------------------


def _snapshot(entries: list[Entry], battles: int, created: str) -> Snapshot:
    return Snapshot(created, "test", {}, battles, battles, "", None, {"raw": tuple(entries)}, {}, {})


def test_the_message_names_pairs_whose_order_became_certain():
    before = _snapshot(
        [
            Entry("a", 1050, 1010, 1090, 1, 40, 2),
            Entry("b", 1000, 960, 1040, 2, 40, 3),
            Entry("c", 950, 900, 1000, 3, 40),
        ],
        60,
        "2026-01-05T01:00:00Z",
    )
    after = _snapshot(
        [Entry("a", 1060, 1045, 1075, 1, 90), Entry("b", 1000, 985, 1015, 2, 90), Entry("c", 950, 940, 990, 3, 90)],
        135,
        "2026-01-06T01:00:00Z",
    )
    found = changes(before, after)
    assert newly_certain(found) == [("a", "b")]  # b and c still overlap (985 < 990)
    text = slack_message(found, "Most useful next comparison: b vs c (P(order right) = 0.70).")["text"]
    assert "*Order now certain (95% intervals apart)*\n• *a* is above *b*" in text
    assert "No rank changed." in text and "*Most useful next comparison:* b vs c" in text
    assert newly_certain(changes(after, after)) == []  # certain before too: not news


# --- the Hub ----------------------------------------------------------------------------------


def test_the_results_reach_the_hub_stand_in_with_a_dataset_card(arena, monkeypatch):
    from huggingface_hub import HfApi, constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the stand-in is on this machine
    rec, view = arena
    clock, folder = Clock(), rec.log_dir / "snapshots"
    with hub() as standin:
        api = HfApi(endpoint=standin.endpoint, token="hf_standin")
        settings = Settings(log_dir=rec.log_dir, snapshot_every="1d", hub_dataset="team/arena-results")
        scheduled = start_snapshots(view, settings, clock=clock, poll_s=0.01, hf_api=api)
        assert scheduled is not None
        try:
            wait_for(lambda: len(standin.commits) == 1, 30, "no commit after the first snapshot")
            for _ in range(3):
                rec.vote(vote("leftvote", battle("newcomer", "weak")))
            view.live.sync()
            clock.now += DAY
            wait_for(lambda: len(standin.commits) == 2, 30, "no commit after the second snapshot")
        finally:
            scheduled.close()
    assert standin.created[0]["type"] == "dataset" and standin.created[0].get("visibility") == "private"
    assert standin.tokens == {"Bearer hf_standin"}
    files = standin.repos["datasets/team/arena-results"]
    local = snapshots_in(folder)
    assert {p for p in files if p.startswith("snapshots/")} == {f"snapshots/{p.name}" for p in local}
    assert all(files[f"snapshots/{p.name}"] == p.read_bytes() for p in local)
    battles = pd.read_parquet(io.BytesIO(files["exports/battles.parquet"]))
    assert len(battles) == 15 and battles["drop_reason"].isna().all()
    pairs = [json.loads(line) for line in files["exports/preference_pairs.jsonl"].splitlines()]
    assert pairs and {"prompt", "chosen", "rejected"} <= set(pairs[0])
    card = files["README.md"].decode()
    second = load_snapshot(local[-1])
    day = sorted(second.days)[0]
    strong = next(e for e in second.views["raw"] if e.model == "strong")
    assert strong.rank_worst != strong.rank  # a range, as the card writes it
    for expected in (
        "configs:\n- config_name: battles\n  data_files: exports/battles.parquet\n"
        "- config_name: preference_pairs\n  data_files: exports/preference_pairs.jsonl\n---",
        "Bradley-Terry",
        "95% intervals come from 10 bootstrap rounds",
        "- Battle votes read: 15\n- Battles counted in the ratings: 15\n- Models rated: 3\n",
        f"- Dates of the counted battles: {day} to {day} (UTC)",
        f"- Preference pairs exported: {len(pairs)}",
        "| identity | 0 | ",
        "| named (not anonymous) | 0 |",
        f"| {strong.rank}–{strong.rank_worst} | strong | {strong.rating:.0f} | {strong.lower:.0f} to {strong.upper:.0f} | 12 |",
    ):
        assert expected in card, card
    assert standin.commits[-1]["header"]["summary"] == f"Results at the snapshot of {second.created}"


def test_a_hub_that_refuses_costs_a_warning_and_the_snapshot_stays(arena, monkeypatch, caplog):
    from huggingface_hub import HfApi, constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    rec, view = arena
    api = HfApi(endpoint=f"http://127.0.0.1:{free_port()}", token="hf_standin")  # nothing listens
    settings = Settings(log_dir=rec.log_dir, snapshot_every="1d", hub_dataset="team/arena-results")
    board_now = view.board()[0]
    with caplog.at_level(logging.WARNING, logger="webui.server.hub_results"):
        scheduled = start_snapshots(view, settings, clock=Clock(), poll_s=0.01, hf_api=api)
        assert scheduled is not None
        try:
            wait_for(lambda: "could not push the results" in caplog.text, 30, "no warning")
        finally:
            scheduled.close()
    assert len(snapshots_in(rec.log_dir / "snapshots")) == 1 and board_now is not None

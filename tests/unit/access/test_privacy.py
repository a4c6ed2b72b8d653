"""Client addresses are not stored raw by default; the hash key is private and stable; headers and
cookies never reach the logs."""

from __future__ import annotations

import json
import logging
import stat
import threading
from pathlib import Path

import pytest
from starlette.requests import Request

from tests.records import battle, chat_event, vote
from webui.access.clients import client_info
from webui.config import Settings
from webui.records.events import ClientInfo
from webui.records.privacy import SECRET_FILE, IdentityPolicy, build_policy, load_or_create_key
from webui.records.storage import JsonlRecorder, read_logs

ADDRESS = "203.0.113.77"


def test_hash_is_keyed_stable_and_hides_the_address(tmp_path: Path):
    policy = build_policy("hash", tmp_path)
    logged = policy.apply(ADDRESS)
    assert logged.startswith("h:") and ADDRESS not in logged
    assert build_policy("hash", tmp_path).apply(ADDRESS) == logged  # same key file: same hash
    assert build_policy("hash", tmp_path / "other").apply(ADDRESS) != logged  # another key: another hash
    assert policy.apply("203.0.113.78") != logged


def test_key_file_is_private_and_created_once(tmp_path: Path):
    key = load_or_create_key(tmp_path)
    path = tmp_path / SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key(tmp_path) == key
    assert [p.name for p in tmp_path.iterdir()] == [SECRET_FILE]  # no temporary files left behind


def test_racing_creators_agree_on_one_key(tmp_path: Path):
    keys: list[bytes] = []
    barrier = threading.Barrier(8)

    def create() -> None:
        barrier.wait()
        keys.append(load_or_create_key(tmp_path))

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 1


def test_a_readable_key_file_is_made_private(tmp_path: Path):
    (tmp_path / SECRET_FILE).write_text("k" * 64)
    (tmp_path / SECRET_FILE).chmod(0o644)
    assert load_or_create_key(tmp_path) == b"k" * 64
    assert stat.S_IMODE((tmp_path / SECRET_FILE).stat().st_mode) == 0o600


def test_secret_from_settings_wins_and_writes_nothing(tmp_path: Path):
    policy = build_policy("hash", tmp_path / "logs", secret="from-the-environment")
    assert policy.key == b"from-the-environment"
    assert not (tmp_path / "logs").exists()
    assert Settings.from_env({"ARENA_IP_HASH_SECRET": "s3"}).ip_hash_secret == "s3"
    assert "s3" not in repr(Settings.from_env({"ARENA_IP_HASH_SECRET": "s3"}))


def test_unwritable_log_dir_gives_a_temporary_key(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with caplog.at_level(logging.ERROR):
        key = load_or_create_key(blocker / "logs")
    assert len(key) == 64
    assert "temporary key" in caplog.text


def test_raw_and_none():
    assert IdentityPolicy("raw").apply(ADDRESS) == ADDRESS
    assert IdentityPolicy("none").apply(ADDRESS) == ""
    assert IdentityPolicy("raw").apply(None) == ""
    with pytest.raises(ValueError, match="must be hash, raw or none"):
        IdentityPolicy("plain")


@pytest.mark.parametrize("mode", ["hash", "raw", "none"])
def test_what_the_log_holds(tmp_path: Path, mode: str):
    settings = Settings(log_dir=tmp_path, ip_logging=mode)
    recorder = JsonlRecorder.from_settings(settings)
    client = ClientInfo(ADDRESS, user="ada.lovelace")
    convs = battle("m1", "m2")
    recorder.chat(chat_event(convs[0], client=client))
    recorder.vote(vote("leftvote", convs, client))
    text = "".join(p.read_text() for p in tmp_path.glob("*-conv.json"))
    records = read_logs(tmp_path).records
    assert (ADDRESS in text) == (mode == "raw")
    assert ("ada.lovelace" in text) == (mode == "raw")
    if mode == "none":
        assert all(r["ip"] == "" and r["user"] == "" for r in records)
    if mode == "hash":
        assert all(r["ip"].startswith("h:") for r in records)


def test_headers_and_cookies_never_reach_the_log(tmp_path: Path):
    secrets = {
        "cookie": "session=COOKIE-SECRET",
        "authorization": "Bearer HEADER-SECRET",
        "user-agent": "AGENT-SECRET",
        "x-forwarded-for": "198.51.100.9",
    }
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in secrets.items()],
        "client": (ADDRESS, 1234),
        "server": ("testserver", 80),
    }
    settings = Settings(log_dir=tmp_path, ip_logging="raw", trusted_proxies=1)
    client = client_info(Request(scope), settings)
    recorder = JsonlRecorder.from_settings(settings)
    convs = battle("m1", "m2")
    recorder.chat(chat_event(convs[0], client=client))
    recorder.vote(vote("tievote", convs, client))
    text = "".join(p.read_text() for p in tmp_path.glob("*-conv.json"))
    assert "198.51.100.9" in text  # the (trusted) address is there, raw as asked...
    for needle in ("COOKIE-SECRET", "HEADER-SECRET", "AGENT-SECRET"):  # ...and nothing else from the request
        assert needle not in text
    assert all(set(json.loads(line)) >= {"ip"} for line in text.splitlines())

"""Records on disk: FastChat's shapes plus our fields, torn lines, day rollover, disk errors."""

from __future__ import annotations

import datetime as dt
import errno
import json
import logging
import os
from pathlib import Path

import pytest

import webui.records.storage as storage
from tests.records import battle, chat_event, conversation, vote
from webui.records.events import RecordError
from webui.records.identity import word_list_version
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder, day_file, iter_lines, read_logs
from webui.types import FinishReason

MIDNIGHT = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc).timestamp()


def recorder(log_dir: Path, **kwargs) -> JsonlRecorder:
    return JsonlRecorder(log_dir, IdentityPolicy("raw"), **kwargs)


def lines(log_dir: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(log_dir.glob("*-conv.json")) for line in p.read_text().splitlines()]


def test_chat_record_has_fastchat_fields_and_ours(tmp_path: Path):
    conv = conversation("tiny-a", "the cat sat", battle_id="b1")
    recorder(tmp_path).chat(chat_event(conv, FinishReason.LENGTH))
    (record,) = lines(tmp_path)
    assert {"tstamp", "type", "model", "gen_params", "start", "finish", "state", "ip"} <= set(record)
    assert record["type"] == "chat" and record["model"] == "tiny-a"
    assert record["state"]["messages"] == [["user", "say hello"], ["assistant", "the cat sat"]]
    assert {"template_name", "system_message", "roles", "offset", "conv_id", "model_name"} <= set(record["state"])
    assert record["gen_params"] == {
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "max_new_tokens": 16,
        "repetition_penalty": 1.0,
        "seed": 7,
        "stop": [],
        "ignore_eos": False,
    }
    assert record["schema_version"] == 1 and record["mode"] == "battle" and record["battle_id"] == "b1"
    assert (record["finish_reason"], record["prompt_tokens"], record["completion_tokens"]) == ("length", 5, 3)
    assert record["ttft_s"] == 0.01 and record["tokens_per_s"] == 42.0 and record["turn"] == 1


def test_anonymous_battle_vote_hides_names_in_models_only(tmp_path: Path):
    rec = recorder(tmp_path)
    convs = battle("tiny-a", "tiny-b")
    for conv, reason in zip(convs, (FinishReason.STOP, FinishReason.CANCELLED), strict=True):
        rec.chat(chat_event(conv, reason))
    rec.vote(vote("rightvote", convs, note="kept"))
    record = lines(tmp_path)[-1]
    assert record["type"] == "rightvote" and record["models"] == ["", ""]
    assert [s["model_name"] for s in record["states"]] == ["tiny-a", "tiny-b"]
    assert [s["finish_reasons"] for s in record["states"]] == [["stop"], ["cancelled"]]
    assert record["anonymous"] is True and record["extra"] == {"note": "kept"}
    assert len(record["vote_id"]) == 32 and record["hygiene"]["identity_leak"] is False
    assert record["hygiene"]["identity_words"] == word_list_version(())  # (the recorder was given no words)
    assert "features" not in record  # (nor a function to count them: the index counts them)


def test_named_and_direct_votes(tmp_path: Path):
    rec = recorder(tmp_path)
    rec.vote(vote("tievote", battle("tiny-a", "tiny-b", anonymous=False)))
    single = conversation("tiny-a", mode="direct", anonymous=False)
    for kind in ("upvote", "downvote", "flag"):
        rec.vote(vote(kind, [single]))
    named, *direct = lines(tmp_path)
    assert named["models"] == ["tiny-a", "tiny-b"] and named["mode"] == "side_by_side"
    assert [d["type"] for d in direct] == ["upvote", "downvote", "flag"]
    assert all(d["model"] == "tiny-a" and d["state"]["model_name"] == "tiny-a" for d in direct)


def test_vote_shapes_are_checked(tmp_path: Path):
    rec = recorder(tmp_path)
    with pytest.raises(ValueError, match="two conversations"):
        rec.vote(vote("leftvote", [conversation("a")]))
    with pytest.raises(ValueError, match="one conversation"):
        rec.vote(vote("upvote", battle("a", "b")))
    mixed = (conversation("a", anonymous=True), conversation("b", anonymous=False))
    with pytest.raises(ValueError, match="anonymous"):
        rec.vote(vote("leftvote", mixed))


def test_transcripts_off_keeps_votes_without_words(tmp_path: Path):
    rec = recorder(tmp_path, log_transcripts=False, identity_words=["llama"])
    convs = battle("tiny-a", "tiny-b", ("I am Llama, a secret", "private words"), prompt="my private question")
    rec.chat(chat_event(convs[0]))
    rec.vote(vote("leftvote", convs))
    (record,) = lines(tmp_path)
    assert record["type"] == "leftvote"
    text = json.dumps(record)
    assert "private" not in text and "secret" not in text
    assert record["states"][0]["messages"] == [["user", ""], ["assistant", ""]]
    assert record["hygiene"]["identity_leak"] is True  # decided when the words were still there


def test_votes_are_fsynced_chats_are_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(storage.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    rec = recorder(tmp_path, clock=lambda: MIDNIGHT + 10)
    convs = battle("a", "b")
    rec.chat(chat_event(convs[0]))  # first write: creates the file, fsyncs the directory only
    dir_syncs = len(synced)
    rec.chat(chat_event(convs[1]))
    assert len(synced) == dir_syncs
    rec.vote(vote("leftvote", convs))
    assert len(synced) == dir_syncs + 1
    assert os.fstat(synced[-1]).st_ino == day_file(tmp_path, MIDNIGHT).stat().st_ino


def test_day_rollover_puts_each_record_in_its_own_day(tmp_path: Path):
    times = iter([MIDNIGHT - 0.01, MIDNIGHT + 0.01, MIDNIGHT + 86_400 + 5])
    rec = recorder(tmp_path, clock=lambda: next(times))
    for _ in range(3):
        rec.vote(vote("tievote", battle("a", "b")))
    names = sorted(p.name for p in tmp_path.glob("*-conv.json"))
    assert names == ["2026-02-28-conv.json", "2026-03-01-conv.json", "2026-03-02-conv.json"]
    for path in tmp_path.glob("*-conv.json"):
        (record,) = [json.loads(line) for line in path.read_text().splitlines()]
        assert day_file(tmp_path, record["tstamp"]).name == path.name


def test_reader_skips_a_torn_last_line(tmp_path: Path):
    rec = recorder(tmp_path, clock=lambda: MIDNIGHT)
    rec.vote(vote("leftvote", battle("a", "b")))
    path = day_file(tmp_path, MIDNIGHT)
    whole = path.read_bytes()
    path.write_bytes(whole + whole[: len(whole) // 2])  # a writer died half-way through a record
    report = read_logs(tmp_path)
    assert len(report.records) == 1 and report.torn_last_lines == 1 and report.bad_lines == 0
    assert [s for s, _ in iter_lines(b'{"type": "chat"}\n{"type": "ch')] == ["ok", "torn"]
    assert [s for s, _ in iter_lines(b'[1]\nnot json\n\n{"no_type": 1}\n')] == ["bad", "bad", "bad"]


def test_a_record_after_a_torn_line_starts_a_fresh_line(tmp_path: Path):
    rec = recorder(tmp_path, clock=lambda: MIDNIGHT)
    rec.vote(vote("leftvote", battle("a", "b")))
    path = day_file(tmp_path, MIDNIGHT)
    with path.open("ab") as f:
        f.write(b'{"tstamp": 1, "type": "leftv')  # another process was killed mid-record
    rec.vote(vote("rightvote", battle("a", "b")))
    report = read_logs(tmp_path)
    assert [r["type"] for r in report.records] == ["leftvote", "rightvote"]
    assert report.bad_lines == 1 and report.torn_last_lines == 0


def test_a_failed_write_is_cut_off_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    rec = recorder(tmp_path, clock=lambda: MIDNIGHT)
    rec.vote(vote("leftvote", battle("a", "b")))
    path = day_file(tmp_path, MIDNIGHT)
    before = path.read_bytes()
    real_write = os.write

    def half_then_full(fd: int, data) -> int:  # the disk fills up half-way through the record
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(storage.os, "write", half_then_full)
    with pytest.raises(RecordError):
        rec.vote(vote("rightvote", battle("a", "b")))
    assert path.read_bytes() == before
    monkeypatch.setattr(storage.os, "write", real_write)
    rec.vote(vote("tievote", battle("a", "b")))
    assert [r["type"] for r in read_logs(tmp_path).records] == ["leftvote", "tievote"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_full_disk_raises_a_user_safe_error_and_logs_why(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    rec = recorder(tmp_path, clock=lambda: MIDNIGHT)
    day_file(tmp_path, MIDNIGHT).symlink_to("/dev/full")  # every write: ENOSPC from the kernel
    with caplog.at_level(logging.ERROR, logger="webui.records.storage"), pytest.raises(RecordError) as raised:
        rec.vote(vote("leftvote", battle("a", "b")))
    assert "could not be recorded" in str(raised.value) and "/dev" not in str(raised.value)
    assert "disk is full" in caplog.text and day_file(tmp_path, MIDNIGHT).name in caplog.text
    with pytest.raises(RecordError, match="could not be logged"):
        rec.chat(chat_event(conversation("a")))
    day_file(tmp_path, MIDNIGHT).unlink()  # space again: the same recorder carries on
    rec.vote(vote("tievote", battle("a", "b")))
    assert [r["type"] for r in read_logs(tmp_path).records] == ["tievote"]


def test_unwritable_directory(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    from webui.config import Settings

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    rec = JsonlRecorder.from_settings(Settings(log_dir=blocker / "logs"))  # building it must not fail
    with caplog.at_level(logging.ERROR, logger="webui.records.storage"), pytest.raises(RecordError):
        rec.vote(vote("leftvote", battle("a", "b")))
    assert "could not write a leftvote record" in caplog.text


def test_a_file_moved_away_is_reopened(tmp_path: Path):
    rec = recorder(tmp_path, clock=lambda: MIDNIGHT)
    rec.vote(vote("leftvote", battle("a", "b")))
    path = day_file(tmp_path, MIDNIGHT)
    path.rename(tmp_path / "archived.json")
    rec.vote(vote("rightvote", battle("a", "b")))
    assert [r["type"] for r in read_logs(tmp_path).records] == ["rightvote"]


def test_reading_an_empty_or_missing_directory(tmp_path: Path):
    assert read_logs(tmp_path / "missing").records == []
    assert read_logs(tmp_path).files == 0


def test_finish_reasons_follow_turns_and_regenerations(tmp_path: Path):
    import dataclasses

    rec = recorder(tmp_path)
    left, right = battle("tiny-a", "tiny-b")
    rec.chat(chat_event(left, FinishReason.ERROR))
    rec.chat(chat_event(left, FinishReason.STOP))  # Regenerate: the same turn again, now fine
    rec.chat(chat_event(right, FinishReason.STOP))
    second = dataclasses.replace(right, turn=2)
    rec.chat(chat_event(second, FinishReason.CANCELLED))
    rec.vote(vote("leftvote", (left, right)))  # judged at turn 1: turn 2 is not part of it
    rec.vote(vote("leftvote", (dataclasses.replace(left, turn=2), second)))
    first_vote, second_vote = [r for r in lines(tmp_path) if r["type"] == "leftvote"]
    assert [s["finish_reasons"] for s in first_vote["states"]] == [["stop"], ["stop"]]
    assert [s["finish_reasons"] for s in second_vote["states"]] == [["stop"], ["stop", "cancelled"]]

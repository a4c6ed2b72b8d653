"""`python -m webui.replay LOGDIR --agreement`: the people's votes on a replay's queued pairs
beside the judge's verdicts on them, read from real files (a report, the prepared pairs, votes
written by the real recorder), against figures worked out by hand; the logs are never changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import webui.leaderboard.votes.ingest as ingest
import webui.replay.agreement as queued
from tests.records import battle, chat_event, vote
from webui.records.prepared import PREPARED_KEY, SOURCE_KEY, PreparedPair, write_pairs
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder, log_files
from webui.replay.__main__ import main
from webui.types import FinishReason

SOURCE = "replay-20261128T120000Z"
# pair -> the judge's verdict per order (ab, ba), the new model as model_a
VERDICTS = {
    "p1": ["model_a", "model_a"],
    "p2": ["model_b", "model_a"],  # the order decided
    "p3": ["tie", "tie (bothbad)"],
    "p4": ["model_a", None],  # the second answer unparsed
    "p5": ["model_b", "model_b"],  # voted on only with a stopped reply
    "p6": ["model_a", "model_a"],  # no vote yet
}


def write_report(log_dir: Path, verdicts: dict[str, list[str | None]] = VERDICTS) -> Path:
    """What `python -m webui.replay ... --queue 6` leaves: the pairs and the report naming them."""
    pairs = [
        PreparedPair(pid, SOURCE, f"prompt {pid}", ("new", "old"), (f"NEW {pid}", f"OLD {pid}"), ("fp-n", "fp-o"))
        for pid in verdicts
    ]
    path = write_pairs(log_dir, SOURCE, pairs)
    report = {
        "model": "new",
        "baseline": "old",
        "judge": "judge",
        "prompt_version": "abc123",
        "queued": {"file": str(path), "pairs": list(verdicts), "verdicts": list(verdicts.values())},
    }
    folder = log_dir / "replays"
    folder.mkdir(exist_ok=True)
    (folder / f"{SOURCE}.json").write_text(json.dumps(report), encoding="utf-8")
    return folder / f"{SOURCE}.json"


def write_votes(log_dir: Path) -> None:
    """People's votes as the arena records them on prepared pairs (sides drawn), and others."""
    recorder = JsonlRecorder(log_dir, IdentityPolicy("none"))

    def on_pair(pid: str, kind: str, new_left: bool, stopped: bool = False) -> None:
        convs = battle("new", "old", prompt=f"prompt {pid}") if new_left else battle("old", "new", prompt=pid)
        if stopped:
            recorder.chat(chat_event(convs[0], FinishReason.CANCELLED))
        recorder.vote(vote(kind, convs, **{PREPARED_KEY: pid, SOURCE_KEY: SOURCE}))

    on_pair("p1", "leftvote", new_left=True)  # people: new wins
    recorder.vote(vote("leftvote", battle("alpha", "beta", prompt='say "prepared" please')))  # not a pair's
    on_pair("p2", "leftvote", new_left=False)  # the baseline, on the left, wins
    on_pair("p3", "bothbad_vote", new_left=True)
    on_pair("p4", "rightvote", new_left=True)  # the baseline, on the right, wins
    on_pair("p5", "leftvote", new_left=True, stopped=True)
    recorder.vote(vote("leftvote", battle("new", "old"), **{PREPARED_KEY: "of-another-replay", SOURCE_KEY: "x"}))
    recorder.close()


def test_the_judge_against_the_votes_on_its_queued_pairs_by_hand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_report(tmp_path)
    write_votes(tmp_path)
    logs_before = {p.name: p.read_bytes() for p in log_files(tmp_path)}
    parsed: list[bytes] = []
    monkeypatch.setattr(queued, "parse", lambda line: parsed.append(line) or ingest.parse(line))
    monkeypatch.setattr(ingest, "CHUNK_BYTES", 700)  # several chunks, lines across their ends

    assert main([str(tmp_path), "--agreement", "--rounds", "0"]) == 0
    out = capsys.readouterr().out
    # judgments (people, judge): p1 (a,a) (a,a); p2 (b,b) (b,a); p3 (tie,tie) (tie,tie); p4 (b,a)
    # with ties 5 of 7; without ties (both chose a side) 3 of 5; both orders parsed on p1-p3, the
    # same verdict on p1 and p3: 2 of 3. kappa: people a 2/7, b 3/7, tie 2/7; judge a 4/7, b 1/7,
    # tie 2/7: chance 15/49, (5/7 - 15/49) / (1 - 15/49) = 20/34 = 0.59. People's score for new:
    # (1 + 0 + 0.5 + 0) / 4.
    assert "queued pairs             6: 4 with a counted vote, 2 without one yet" in out
    assert "people's votes on them   4 (left out: 1 with a stopped reply)" in out
    assert "people's score for new: 38%" in out
    assert "agreement with ties      71% (" in out and "5 of 7)" in out
    assert "agreement without ties   60% (" in out and "3 of 5)" in out
    assert "Cohen's kappa            0.59" in out
    assert "position consistency     67% (" in out and "2 of 3)" in out
    # only the lines holding the key were parsed: the six votes on pairs, the other replay's
    assert len(parsed) == 6 and all(b'"prepared"' in line for line in parsed)
    assert {p.name: p.read_bytes() for p in log_files(tmp_path)} == logs_before


def test_a_torn_vote_is_left_for_the_next_look_and_a_report_can_be_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = write_report(tmp_path)
    write_votes(tmp_path)
    (log,) = log_files(tmp_path)
    with log.open("ab") as handle:  # a vote being written: no newline yet
        handle.write(b'{"type": "leftvote", "extra": {"prepared": "p6"}')
    assert main([str(tmp_path), "--agreement", str(report), "--rounds", "20"]) == 0
    out = capsys.readouterr().out
    assert "4 with a counted vote, 2 without one yet" in out and "Cohen's kappa            0.59 (" in out


def test_no_report_or_no_queued_pair_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path), "--agreement"]) == 2
    assert "no replay report with queued pairs" in capsys.readouterr().err
    assert main([str(tmp_path / "missing"), "--agreement"]) == 2
    assert "is not a folder" in capsys.readouterr().err
    (tmp_path / "replays").mkdir()
    plain = tmp_path / "replays" / "replay-1.json"
    plain.write_text(json.dumps({"model": "new", "baseline": "old", "results": []}))
    assert main([str(tmp_path), "--agreement"]) == 2  # a report without --queue is not one
    assert main([str(tmp_path), "--agreement", str(plain)]) == 2
    assert "has no queued pairs: it was not run with --queue K" in capsys.readouterr().err
    odd = {"model": "new", "queued": {"pairs": ["p1", "p2"], "verdicts": [["model_a", "model_a"], "model_a"]}}
    plain.write_text(json.dumps(odd))
    assert main([str(tmp_path), "--agreement", str(plain)]) == 2
    assert "does not give one list of verdicts per pair" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{not json")
    assert main([str(tmp_path), "--agreement", str(tmp_path / "broken.json")]) == 2
    assert "is not a replay report" in capsys.readouterr().err
    assert main([str(tmp_path)]) == 2  # no --agreement: a replay needs its two models
    assert "--model and --baseline are required" in capsys.readouterr().err


def test_queued_pairs_without_any_vote_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_report(tmp_path)
    assert main([str(tmp_path), "--agreement"]) == 0
    out = capsys.readouterr().out
    assert "6: 0 with a counted vote, 6 without one yet" in out and "no vote on these pairs yet" in out

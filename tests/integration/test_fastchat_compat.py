"""Files written from real tiny-model replies are read by FastChat's own clean_battle_data, which
recovers every battle with the right models and winners; our board agrees.

clean_battle_data runs in a fresh interpreter (it forks a pool of 16 readers, which is best done
without torch loaded) with only its language detector stubbed: polyglot is not installed, and the
stub lives in that subprocess alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from webui.engine import collect
from webui.engine.registry import build_registry
from webui.leaderboard.board.build import BoardOptions, board_from_logs
from webui.leaderboard.simulate import simulate
from webui.leaderboard.votes.rows import vote_features
from webui.records.events import ChatEvent, ClientInfo, Conversation, VoteEvent
from webui.records.storage import JsonlRecorder
from webui.types import Message

CLEAN = """
import json, sys
import fastchat.serve.monitor.clean_battle_data as cbd
cbd.detect_language = lambda text: "English"  # polyglot is not installed; nothing else is stubbed
battles = cbd.clean_battle_data(sys.argv[1:], [])
print("RESULT" + json.dumps(battles))
"""


def fastchat_battles(files: list[Path]) -> list[dict]:
    result = subprocess.run(
        [sys.executable, "-c", CLEAN, *map(str, files)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])


def play_turn(registry, conv: Conversation, prompt: str, recorder: JsonlRecorder, client: ClientInfo) -> Conversation:
    """One real generation through the registry's backend, recorded like the UI records it."""
    backend = registry.load(conv.model_name)
    history = [*conv.messages, ("user", prompt)]
    start = time.time()
    text, finished = collect(backend.stream([Message(r, t) for r, t in history], conv.params))
    done = Conversation(
        conv.conv_id,
        conv.model_name,
        conv.template_name,
        conv.system_message,
        [*history, ("assistant", text)],
        conv.params,
        conv.mode,
        conv.battle_id,
        conv.turn + 1,
        conv.anonymous,
    )
    recorder.chat(ChatEvent(done, finished, start, time.time(), client))
    return done


def new_conversation(registry, name: str, battle_id: str, anonymous: bool) -> Conversation:
    params = registry.load(name).default_params()
    return Conversation(
        uuid.uuid4().hex,
        name,
        "tokenizer",
        "",
        [],
        params,
        "battle" if anonymous else "side_by_side",
        battle_id,
        0,
        anonymous,
    )


@pytest.mark.timeout(300)
def test_clean_battle_data_recovers_every_battle(settings, tmp_path: Path):
    registry = build_registry(settings)
    recorder = JsonlRecorder.from_settings(settings, registry.names(), features=vote_features)  # as the app's
    client = ClientInfo("192.0.2.33")
    plan = [
        ("tiny-a", "tiny-b", "leftvote", True, 1),
        ("tiny-b", "tiny-fschat", "rightvote", True, 2),
        ("tiny-fschat", "tiny-a", "tievote", True, 1),
        ("tiny-a", "tiny-b", "bothbad_vote", True, 1),
        ("tiny-b", "tiny-a", "leftvote", False, 1),
    ]
    expected = []
    try:
        for a, b, kind, anonymous, turns in plan:
            battle_id = uuid.uuid4().hex
            convs = [new_conversation(registry, m, battle_id, anonymous) for m in (a, b)]
            for turn in range(turns):
                prompt = ["what is the capital of france", "answer yes or no"][turn]
                convs = [play_turn(registry, c, prompt, recorder, client) for c in convs]
            recorder.vote(VoteEvent(kind, convs, client))  # type: ignore[arg-type]
            expected.append((a, b, kind, anonymous, turns))
    finally:
        registry.close()

    files = sorted(settings.log_dir.glob("*-conv.json"))
    votes = [r for p in files for r in map(json.loads, p.read_text().splitlines()) if r["type"] != "chat"]
    assert len(votes) == len(plan) and all("features" in r for r in votes)  # FastChat reads them below
    battles = fastchat_battles(files)
    winner = {"leftvote": "model_a", "rightvote": "model_b", "tievote": "tie", "bothbad_vote": "tie (bothbad)"}
    got = [(x["model_a"], x["model_b"], x["winner"], x["anony"], x["turn"]) for x in battles]
    assert got == [(a, b, winner[k], anon, turns) for a, b, k, anon, turns in expected]
    assert all(x["judge"].startswith("arena_user_h:") for x in battles)  # the hashed address, never the raw one
    assert "192.0.2.33" not in "".join(p.read_text() for p in files)

    board = board_from_logs(settings.log_dir, BoardOptions(rounds=20, include_named=True))
    assert len(board.counted) == len(plan)  # ours counts the same battles
    chats = [
        json.loads(line) for p in files for line in p.read_text().splitlines() if json.loads(line)["type"] == "chat"
    ]
    assert len(chats) == 2 * sum(turns for *_, turns in plan)
    assert all(c["completion_tokens"] >= 0 and c["finish_reason"] in ("stop", "length") for c in chats)


def fastchat_record(
    a: str,
    b: str,
    replies: tuple[str, str],
    kind: str,
    tstamp: float,
    *,
    older: bool = False,
    prompt: str = "What should I do on a hot day?",
) -> dict:
    roles = ["USER", "ASSISTANT"] if older else ["user", "assistant"]
    states = [
        {
            "template_name": "one_shot",
            "system_message": "",
            "roles": roles,
            "messages": [[roles[0], prompt], [roles[1], reply]],
            "offset": 0,
            "conv_id": f"{name}-{tstamp}",
            "model_name": name,
        }
        for name, reply in ((a, replies[0]), (b, replies[1]))
    ]
    return {
        "tstamp": tstamp,
        "type": kind,
        "models": ["Model A", "Model B"] if older else ["", ""],
        "states": states,
        "ip": f"h:{int(tstamp) % 2}",
    }


def test_fastchat_and_we_keep_the_same_battles_of_ordinary_words_and_older_logs(tmp_path: Path):
    """Three battles whose replies say "Remember to drink water." between ember-7b and command-r,
    two in FastChat's older form ("Model A"/"Model B"), one real leak ("I am Llama"): FastChat keeps
    five, and so do we, with the same models, winners, anonymity and judges."""
    records = [
        fastchat_record(
            "ember-7b", "command-r", ("Remember to drink water.", "Stay in the shade."), kind, 1_767_225_600.0 + i
        )
        for i, kind in enumerate(("leftvote", "rightvote", "tievote"))
    ]
    records += [
        fastchat_record(
            "vicuna-13b", "koala-13b", ("Drink water.", "Rest."), "leftvote", 1_767_225_700.0 + i, older=True
        )
        for i in range(2)
    ]
    records.append(fastchat_record("ember-7b", "command-r", ("I am Llama.", "Rest."), "leftvote", 1_767_225_800.0))
    path = tmp_path / "2026-01-01-conv.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))

    theirs = fastchat_battles([path])
    ours = board_from_logs(tmp_path, BoardOptions(rounds=0, min_battles=0, include_named=True)).counted
    assert len(theirs) == len(ours) == 5
    columns = ["model_a", "model_b", "winner", "anony", "judge", "language"]
    assert [tuple(b[c] for c in columns) for b in theirs] == [tuple(r) for r in ours[columns].itertuples(index=False)]


def test_clean_battle_data_ignores_the_keys_written_with_a_vote(tmp_path: Path):
    """The features and the word list's version that the app writes with each vote (issue 33): FastChat
    reads a simulated log of current-format votes as it reads the same votes without those keys."""
    kept, bare = tmp_path / "kept", tmp_path / "bare"
    simulate(kept, 400, seed=3, days=2)
    bare.mkdir()
    written = 0
    for path in sorted(kept.glob("*-conv.json")):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        written += sum("features" in r and "identity_words" in r["hygiene"] for r in records)
        for record in records:
            record.pop("features", None)
            record.pop("hygiene", None)
        (bare / path.name).write_text("".join(json.dumps(r) + "\n" for r in records))
    assert written > 300
    theirs_kept = fastchat_battles(sorted(kept.glob("*-conv.json")))
    theirs_bare = fastchat_battles(sorted(bare.glob("*-conv.json")))
    assert len(theirs_kept) > 300  # the battles counted, not dropped as unreadable
    assert theirs_kept == theirs_bare

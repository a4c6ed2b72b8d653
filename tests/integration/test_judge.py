"""The judge: a real HTTP server, scripted to judge well, badly, slowly, with 500s or with text
that holds no verdict, is asked through the arena's own `openai` backend by `python -m
webui.judge`; verdicts go to their own files, a run resumes where the last one stopped (killed
with -9 included), and bad input exits 2 having written nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, StreamingResponse

from tests.records import battle, vote
from tests.servers import RunningServer, serve_app, wait_for
from webui.config import Settings
from webui.engine.registry import build_registry
from webui.judge.__main__ import main
from webui.judge.records import judge_files, read_verdicts
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder, log_files

GOOD, POOR = "GOOD-REPLY", "POOR-REPLY"
ROOT = Path(__file__).resolve().parents[2]


class ScriptedJudge:
    """An OpenAI-compatible judge whose answers follow `mode`: "well" marks the conversation that
    holds GOOD as the better one, "first" always says [[A]] (all position bias), "vague" answers
    without a mark, "fail" answers 500; `delay_s` slows every answer. It counts what it was asked
    and the most requests it held at once."""

    def __init__(self) -> None:
        self.mode, self.delay_s = "well", 0.0
        self.prompts: list[str] = []
        self.replayed: list[str] = []  # the replay models asked, one name per request
        self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()
        self.app = FastAPI()
        listed = [{"id": name, "object": "model"} for name in ("m", "new", "old")]
        self.app.get("/v1/models")(lambda: {"object": "list", "data": listed})
        self.app.post("/v1/chat/completions")(self.chat)

    def answer(self, prompt: str) -> str:
        if self.mode == "first":
            return "Assistant A is clearly better.\n[[A]]"
        if self.mode == "vague":
            return "Both have merits; hard to say."
        first = prompt.index("Assistant A's Conversation")
        second = prompt.index("Assistant B's Conversation")
        good_first = first < prompt.index(GOOD) < second
        return f"The better answer is plain.\n{'[[A]]' if good_first else '[[B]]'}"

    async def chat(self, request: Request) -> object:
        body = await request.json()
        prompt = body["messages"][-1]["content"]
        if body.get("model") in ("new", "old"):  # the two models of a replay: one answers well
            self.replayed.append(body["model"])
            return self._stream(f"{GOOD if body['model'] == 'new' else POOR}: about {prompt}")
        with self.lock:
            self.prompts.append(prompt)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            if self.mode == "fail":
                return PlainTextResponse("upstream exploded", status_code=500)
            text = self.answer(prompt)
        finally:
            with self.lock:
                self.in_flight -= 1

        return self._stream(text)

    @staticmethod
    def _stream(text: str) -> StreamingResponse:
        async def stream() -> AsyncIterator[str]:
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                yield "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": piece}}]}) + "\n\n"
            yield "data: " + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}) + "\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def judge_server() -> Iterator[tuple[ScriptedJudge, RunningServer]]:
    scripted = ScriptedJudge()
    server = serve_app(scripted.app, name="scripted-judge")
    yield scripted, server
    server.server.force_exit = True
    server.stop()


@pytest.fixture
def scripted(judge_server: tuple[ScriptedJudge, RunningServer]) -> ScriptedJudge:
    judge, _ = judge_server
    judge.mode, judge.delay_s, judge.most_in_flight = "well", 0.0, 0
    judge.prompts.clear()
    judge.replayed.clear()
    return judge


def models_file(folder: Path, url: str, concurrency: int = 3) -> Path:
    path = folder / "models.yaml"
    path.write_text(
        "models:\n"
        "  - {name: judge, backend: openai, base_url: '" + url + "', remote_model: m, "
        f"max_concurrency: {concurrency}, weight: 0}}\n"
    )
    return path


def logged_battles(log_dir: Path, n: int) -> list[str]:
    """n battle votes where the human chose the GOOD reply, on alternating sides; their battle ids."""
    recorder = JsonlRecorder(log_dir, IdentityPolicy("none"))
    ids = []
    for i in range(n):
        good_left = i % 2 == 0
        replies = (GOOD, POOR) if good_left else (POOR, GOOD)
        convs = battle("alpha", "beta", replies, prompt=f"question {i}")
        recorder.vote(vote("leftvote" if good_left else "rightvote", convs))
        ids.append(convs[0].battle_id)
    recorder.close()
    return ids


def run(log_dir: Path, models: Path, *more: str) -> int:
    return main([str(log_dir), "--judge", "judge", "--models", str(models), *more])


def test_a_run_judges_both_orders_writes_its_own_files_and_resumes(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    ids = logged_battles(tmp_path, 5)
    logs_before = {p.name: p.read_bytes() for p in log_files(tmp_path)}
    models = models_file(tmp_path, judge_server[1].v1)
    assert run(tmp_path, models, "--limit", "3") == 0
    first = list(read_verdicts(tmp_path))
    assert len(first) == 3 and len(scripted.prompts) == 6  # both orders of each
    for record in first:
        assert [o["order"] for o in record["orders"]] == ["ab", "ba"]
        assert record["consistent"] is True and record["verdict"] == record["human"], record
        assert record["judge"] == "judge" and record["prompt_version"] and record["battle_id"] in ids
    # the replies were shown in both orders: once GOOD first, once second
    assert sum(p.index(GOOD) < p.index(POOR) for p in scripted.prompts) == 3
    assert run(tmp_path, models) == 0  # the rest, and nothing twice
    assert run(tmp_path, models) == 0
    keys = [r["vote"] for r in read_verdicts(tmp_path)]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 5
    assert len(scripted.prompts) == 10
    # verdicts live apart: the vote logs are byte for byte as before, and no judge file is a vote log
    assert {p.name: p.read_bytes() for p in log_files(tmp_path)} == logs_before
    assert judge_files(tmp_path) and not set(judge_files(tmp_path)) & set(log_files(tmp_path))


def test_as_many_requests_at_once_as_the_judges_slots(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    logged_battles(tmp_path, 8)
    scripted.delay_s = 0.3
    assert run(tmp_path, models_file(tmp_path, judge_server[1].v1, concurrency=3)) == 0
    assert scripted.most_in_flight == 3
    assert len(list(read_verdicts(tmp_path))) == 8


def test_an_answer_without_a_verdict_is_kept_as_unparsed_and_bias_shows_as_inconsistent(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    logged_battles(tmp_path, 2)
    models = models_file(tmp_path, judge_server[1].v1)
    scripted.mode = "vague"
    assert run(tmp_path, models, "--limit", "1") == 0
    (vague,) = read_verdicts(tmp_path)
    assert [o["mark"] for o in vague["orders"]] == [None, None] and vague["verdict"] is None
    assert vague["orders"][0]["answer"] == "Both have merits; hard to say."  # the raw answer, whole
    scripted.mode = "first"  # always "A": the two orders name different replies
    assert run(tmp_path, models) == 0
    biased = [r for r in read_verdicts(tmp_path) if r["vote"] != vague["vote"]]
    assert len(biased) == 1 and biased[0]["consistent"] is False and biased[0]["verdict"] is None
    assert [o["verdict"] for o in biased[0]["orders"]] == ["model_a", "model_b"]


def test_a_failing_judge_writes_nothing_and_the_next_run_asks_again(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    logged_battles(tmp_path, 3)
    models = models_file(tmp_path, judge_server[1].v1)
    scripted.mode = "fail"
    assert run(tmp_path, models) == 1
    assert list(read_verdicts(tmp_path)) == []
    scripted.mode = "well"
    assert run(tmp_path, models) == 0
    assert len(list(read_verdicts(tmp_path))) == 3


def test_bad_input_exits_2_and_writes_nothing(
    judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    models = models_file(tmp_path, judge_server[1].v1)
    assert run(logs, models) == 2  # an empty log folder
    assert "no vote logs" in capsys.readouterr().err
    assert run(tmp_path / "missing", models) == 2
    logged_battles(logs, 1)
    before = sorted(p.name for p in logs.iterdir())
    assert main([str(logs), "--judge", "nobody", "--models", str(models)]) == 2
    assert "no model 'nobody'" in capsys.readouterr().err
    bad_prompt = tmp_path / "prompt.txt"
    bad_prompt.write_text("Which is better? [[A]] or [[B]]\n{conversation_a}\n")
    assert run(logs, models, "--judge-prompt", str(bad_prompt)) == 2
    assert "{conversation_b}" in capsys.readouterr().err
    dead = models_file(tmp_path, "http://127.0.0.1:9/v1")
    assert run(logs, dead) == 2
    assert "not ready" in capsys.readouterr().err
    assert sorted(p.name for p in logs.iterdir()) == before  # no index, no verdict file


def _cli(log_dir: Path, models: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "webui.judge", str(log_dir), "--judge", "judge", "--models", str(models)]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_run_killed_with_9_and_started_again_judges_each_battle_once(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    logged_battles(tmp_path, 12)
    models = models_file(tmp_path, judge_server[1].v1, concurrency=2)
    scripted.delay_s = 0.2
    process = _cli(tmp_path, models)
    wait_for(lambda: len(list(read_verdicts(tmp_path))) >= 3, 60, "no verdict was written")
    process.kill()
    process.wait(30)
    killed_at = len(list(read_verdicts(tmp_path)))
    assert killed_at < 12
    scripted.delay_s = 0.0
    assert run(tmp_path, models) == 0
    keys = [r["vote"] for r in read_verdicts(tmp_path)]
    assert len(keys) == 12 and len(set(keys)) == 12


def test_ctrl_c_stops_the_run_and_keeps_whole_verdicts(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    logged_battles(tmp_path, 12)
    models = models_file(tmp_path, judge_server[1].v1, concurrency=2)
    scripted.delay_s = 0.3
    process = _cli(tmp_path, models)
    wait_for(lambda: len(list(read_verdicts(tmp_path))) >= 2, 60, "no verdict was written")
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err.decode()
    assert b"run the same command again" in err
    written = list(read_verdicts(tmp_path))
    assert 2 <= len(written) < 12
    for path in judge_files(tmp_path):
        assert path.read_bytes().endswith(b"\n")  # whole lines only


def test_the_models_files_judge_block_names_the_judge_and_its_prompt(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    logged_battles(tmp_path, 2)
    models = models_file(tmp_path, judge_server[1].v1)
    scripted.mode = "first"  # our prompt has other headings than the ones "well" looks for
    (tmp_path / "ours.txt").write_text(
        "# our team's prompt\nOURS. Which is better, [[A]] or [[B]]?\n{conversation_a}\n---\n{conversation_b}\n"
    )
    with models.open("a") as file:
        file.write("judge: {model: judge, prompt: ours.txt}\n")
    assert main([str(tmp_path), "--models", str(models)]) == 0  # no --judge: the block's
    assert scripted.prompts and all(p.startswith("OURS.") for p in scripted.prompts)
    versions = {r["prompt_version"] for r in read_verdicts(tmp_path)}
    assert len(versions) == 1 and len(list(read_verdicts(tmp_path))) == 2
    # ours again, explicitly: another prompt is another series, so both battles are asked again
    assert (
        main([str(tmp_path), "--models", str(models), "--judge-prompt", str(ROOT / "webui/judge/default_prompt.txt")])
        == 0
    )
    assert len({r["prompt_version"] for r in read_verdicts(tmp_path)}) == 2
    assert len(list(read_verdicts(tmp_path))) == 4


def test_agreement_reports_how_far_the_judge_follows_the_votes(
    scripted: ScriptedJudge,
    judge_server: tuple[ScriptedJudge, RunningServer],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    logged_battles(tmp_path, 12)
    models = models_file(tmp_path, judge_server[1].v1)
    assert run(tmp_path, models, "--agreement") == 2  # nothing judged yet
    assert "judge some battles first" in capsys.readouterr().err
    assert run(tmp_path, models) == 0
    capsys.readouterr()
    assert run(tmp_path, models, "--agreement", "--rounds", "20") == 0
    report = capsys.readouterr().out
    assert "on 12 battles with a human vote" in report
    assert "agreement with ties      100% (" in report and "of 24)" in report
    assert "position consistency     100% (" in report and "Cohen's kappa            1.00" in report
    assert "multi-turn" not in report  # no category reaches 10 battles but "all" and the language
    scripted.mode = "first"  # a judge that always says "A", with another prompt so it starts afresh
    other = tmp_path / "other.txt"
    other.write_text("Again. [[A]] [[B]]\n{conversation_a}\n{conversation_b}\n")
    assert run(tmp_path, models, "--judge-prompt", str(other)) == 0
    capsys.readouterr()
    assert run(tmp_path, models, "--judge-prompt", str(other), "--agreement", "--rounds", "20") == 0
    report = capsys.readouterr().out
    assert "agreement with ties      50% (" in report and "position consistency     0% (" in report


def replay_models(folder: Path, url: str) -> Path:
    path = models_file(folder, url)
    with path.open("a") as file:
        for name in ("new", "old"):
            file.write(
                f"  - {{name: {name}, backend: openai, base_url: '{url}', remote_model: {name}, max_concurrency: 2}}\n"
            )
        file.write("judge: {model: judge}\n")
    return path


def test_replay_answers_logged_prompts_with_both_models_and_reports_the_judges_win_rate(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    from webui.replay.__main__ import main as replay_main

    logged_battles(tmp_path, 6)
    logs_before = {p.name: p.read_bytes() for p in log_files(tmp_path)}
    models = replay_models(tmp_path, judge_server[1].v1)
    command = [str(tmp_path), "--model", "new", "--baseline", "old", "--models", str(models)]
    assert replay_main([*command, "--prompts", "4"]) == 0
    (report_path,) = (tmp_path / "replays").glob("replay-*.json")
    report = json.loads(report_path.read_text())
    assert report["prompts"] == 4 and report["failed"] == []
    assert report["win_rate"]["value"] == 1.0 and report["win_rate"]["prompts"] == 4
    asked = [r["prompt"] for r in report["results"]]
    assert len(set(asked)) == 4 and all(p.startswith("question ") for p in asked)
    for result in report["results"]:  # both replies generated here, both orders judged
        assert result["new"] == f"{GOOD}: about {result['prompt']}" and result["verdicts"] == ["model_a", "model_a"]
    assert report_path.with_suffix(".md").read_text().startswith("# Replay: new against old\n")
    assert {p.name: p.read_bytes() for p in log_files(tmp_path)} == logs_before and not judge_files(tmp_path)


def test_replay_reads_the_baselines_reply_from_battles_logged_by_the_same_fingerprint(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    """A logged battle reply by what serves the baseline now stands in for a new one; a reply by an
    older build of it (another fingerprint) does not, nor any with --generate-baseline."""
    from webui.replay.__main__ import main as replay_main

    models = replay_models(tmp_path, judge_server[1].v1)
    registry = build_registry(Settings.from_env(models_file=models, log_dir=tmp_path))
    try:
        registry.load("old")
        live = registry.status("old").fingerprint
    finally:
        registry.close()
    assert live
    recorder = JsonlRecorder(tmp_path, IdentityPolicy("none"))
    for i, fingerprint in enumerate((live, live, "an-older-build")):
        old, other = battle("old", "alpha", (f"{POOR} logged {i}", GOOD), prompt=f"question {i}")
        recorder.vote(vote("rightvote", [replace(old, fingerprint=fingerprint), other]))
    recorder.close()
    command = [str(tmp_path), "--model", "new", "--baseline", "old", "--models", str(models), "--prompts", "3"]

    assert replay_main([*command, "--out", str(tmp_path / "reused")]) == 0
    (report,) = [json.loads(p.read_text()) for p in (tmp_path / "reused").glob("*.json")]
    baseline = {r["prompt"]: (r["baseline"], r["baseline_logged"]) for r in report["results"]}
    assert baseline["question 0"] == (f"{POOR} logged 0", True) and baseline["question 1"][1] is True
    assert baseline["question 2"] == (f"{POOR}: about question 2", False)
    assert report["baseline_logged"] == 2 and sorted(scripted.replayed) == ["new"] * 3 + ["old"]
    assert report["win_rate"]["prompts"] == 3  # logged replies are judged like generated ones

    scripted.replayed.clear()
    assert replay_main([*command, "--generate-baseline", "--out", str(tmp_path / "generated")]) == 0
    (report,) = [json.loads(p.read_text()) for p in (tmp_path / "generated").glob("*.json")]
    assert report["baseline_logged"] == 0 and sorted(scripted.replayed) == ["new"] * 3 + ["old"] * 3

    scripted.replayed.clear()  # replies capped below the baseline's own limit: a logged one was not
    assert replay_main([*command, "--max-tokens", "5", "--out", str(tmp_path / "capped")]) == 0
    (report,) = [json.loads(p.read_text()) for p in (tmp_path / "capped").glob("*.json")]
    assert report["baseline_logged"] == 0 and sorted(scripted.replayed) == ["new"] * 3 + ["old"] * 3


def test_replay_queues_judged_pairs_as_prepared_battles(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    """--queue K: K of the judged pairs, with both replies as the judge saw them, go where the
    arena's Battle tab finds them (webui.records.prepared); the report says which."""
    from webui.records.prepared import PreparedPairs
    from webui.replay.__main__ import main as replay_main

    logged_battles(tmp_path, 5)
    models = replay_models(tmp_path, judge_server[1].v1)
    command = [str(tmp_path), "--model", "new", "--baseline", "old", "--models", str(models), "--prompts", "4"]
    assert replay_main([*command, "--queue", "2"]) == 0
    (report_path,) = (tmp_path / "replays").glob("replay-*.json")
    report = json.loads(report_path.read_text())
    queued = PreparedPairs(tmp_path).pending()
    assert len(queued) == 2 and sorted(p.pair_id for p in queued) == sorted(report["queued"]["pairs"])
    replies = {r["prompt"]: (r["new"], r["baseline"]) for r in report["results"]}
    for pair in queued:
        assert pair.models == ("new", "old") and pair.replies == replies[pair.prompt]
        assert pair.source == report_path.stem
    assert report["queued"]["verdicts"] == [["model_a", "model_a"]] * 2
    assert "2 pairs queued as blind battles" in report_path.with_suffix(".md").read_text()
    assert replay_main([*command, "--queue", "-1"]) == 2


def test_replay_refuses_bad_input_and_writes_nothing(
    judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from webui.replay.__main__ import main as replay_main

    logged_battles(tmp_path, 2)
    models = replay_models(tmp_path, judge_server[1].v1)
    base = [str(tmp_path), "--models", str(models)]
    assert replay_main([*base, "--model", "newest", "--baseline", "old"]) == 2
    assert "--model: no model 'newest'" in capsys.readouterr().err
    assert replay_main([*base, "--model", "old", "--baseline", "old"]) == 2
    assert replay_main([*base, "--model", "new", "--baseline", "old", "--prompts", "0"]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert replay_main([str(empty), "--models", str(models), "--model", "new", "--baseline", "old"]) == 2
    assert not (tmp_path / "replays").exists() and list(empty.iterdir()) == []


def test_a_judging_run_shows_a_bar_on_a_terminal_and_none_in_a_pipe(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    from tests.terminal import bars, on_pipe, on_terminal

    for folder in ("tty", "pipe"):
        logged_battles(tmp_path / folder, 5)
    models = models_file(tmp_path, judge_server[1].v1)
    command = ["webui.judge", "--judge", "judge", "--models", str(models)]
    code, seen = on_terminal([*command, str(tmp_path / "tty")])
    assert code == 0, seen
    drawn = bars(seen)
    assert drawn and all(bar.startswith(("indexing votes  [", "judging  [")) for bar in drawn), seen
    assert drawn[0].startswith("indexing votes"), "the folder's first index comes first"
    assert "5/5 battles  100%" in drawn[-1] and " left" in drawn[-1]
    code, piped = on_pipe([*command, str(tmp_path / "pipe")])
    assert code == 0 and "\r" not in piped and "judging" not in piped and "indexing" not in piped, piped
    assert "judged 5 battles" in piped  # the summary is no progress bar: it stays


def test_a_replay_shows_a_bar_on_a_terminal_and_none_in_a_pipe(
    scripted: ScriptedJudge, judge_server: tuple[ScriptedJudge, RunningServer], tmp_path: Path
) -> None:
    from tests.terminal import bars, on_pipe, on_terminal

    for folder in ("tty", "pipe"):
        logged_battles(tmp_path / folder, 4)
    models = replay_models(tmp_path, judge_server[1].v1)
    command = ["webui.replay", "--model", "new", "--baseline", "old", "--models", str(models), "--prompts", "3"]
    code, seen = on_terminal([*command, str(tmp_path / "tty")])
    assert code == 0, seen
    drawn = bars(seen)
    assert drawn and all(bar.startswith(("indexing votes  [", "replaying  [")) for bar in drawn), seen
    assert drawn[0].startswith("indexing votes"), "the folder's first index comes first"
    assert "3/3 prompts  100%" in drawn[-1]
    code, piped = on_pipe([*command, str(tmp_path / "pipe")])
    assert code == 0 and "\r" not in piped and "replaying  " not in piped and "indexing" not in piped, piped

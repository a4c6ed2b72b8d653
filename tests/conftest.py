"""Shared fixtures: a real tiny Llama built on the fly, and the settings that point at it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Every test serves its models with transformers unless it asks for vLLM or llama.cpp itself
# (tests/integration/test_vllm.py, test_llamacpp.py): `backend: auto` entries then fall back at once
# instead of starting an engine server per test.
os.environ.setdefault("ARENA_VLLM_PYTHON", "none")
os.environ.setdefault("ARENA_LLAMA_SERVER", "none")
# Likewise transformers serves them with one generate() thread per reply, whose threads the
# cancellation tests watch; tests of continuous batching ask for it (test_transformers_batching.py).
os.environ.setdefault("ARENA_TRANSFORMERS_BATCHING", "off")

import pytest

from tests.tiny import THREE, build_tiny_model, tiny_models


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def tiny_models_file(tiny_model_dir: Path, tmp_path: Path) -> Path:
    return tiny_models(tmp_path, tiny_model_dir, THREE)


@pytest.fixture
def settings(tmp_path: Path, tiny_models_file: Path):
    from webui.config import Settings

    return Settings(
        models_file=tiny_models_file, log_dir=tmp_path / "logs", cache_dir=tmp_path / "cache", queue_timeout_s=5.0
    )


@pytest.fixture
def registry(settings):
    """The tiny models file, loaded (in the background, awaited)."""
    from webui.engine.registry import build_registry

    registry = build_registry(settings)
    registry.start()
    assert registry.wait_idle(60)
    yield registry
    registry.close()


@pytest.fixture
def generate_registry(settings):
    """The tiny models file on the generate() path (one thread per reply), whatever the
    environment says, for tests about that path's threads."""
    from webui.engine.registry import build_registry

    registry = build_registry(settings.replace(transformers_batching="off"))
    registry.start()
    assert registry.wait_idle(60)
    yield registry
    registry.close()


@pytest.fixture
def no_thread_leak():
    """Fails the test if a generate thread outlives it."""
    yield
    leftover = [t for t in threading.enumerate() if t.name.startswith("generate:")]
    for t in leftover:
        t.join(10)
    assert not [t for t in leftover if t.is_alive()], "generate threads left running"


@pytest.fixture(scope="session")
def demo_registry():
    """The real demo models (assets/models.yaml), loaded once per test session. They use the normal
    weights cache, so only the first run on a machine pays for dequantising the GGUF files."""
    from webui.config import Settings
    from webui.engine.registry import build_registry

    registry = build_registry(Settings())
    registry.start()
    assert registry.wait_idle(480), "demo models did not finish loading"  # under the 600 s test timeout
    yield registry
    registry.close()


# The test files that use the real demo models: `make test`'s two workers give them all to one
# worker, so that the models load (and on a new machine dequantise) once, not on both at once.
DEMO_FILES = frozenset(
    {
        "tests/integration/test_demo_models.py",
        "tests/integration/test_ui_demo.py",
        "tests/unit/engine/test_folder_tokenizer.py",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unlisted = sorted(
        {i.nodeid.split("::")[0] for i in items if "demo_registry" in getattr(i, "fixturenames", ())} - DEMO_FILES
    )
    if unlisted:
        raise pytest.UsageError(f"{', '.join(unlisted)} use demo_registry: add them to DEMO_FILES in tests/conftest.py")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """--dist loadfile (`make test`), with the files of DEMO_FILES as one: a file's tests stay on
    one worker, so its module's servers start once. (xdist's loadgroup marks would do it, but
    xdist 3.8 sets a node id attribute that pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class DemoFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::")[0]
            return "demo-models" if file in DEMO_FILES else file

    return DemoFilesTogether(config, log)

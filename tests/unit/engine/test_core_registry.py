"""The registry: background loading, honest status, variants sharing weights, locks, unload."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.servers import wait_for
from webui.engine import registry as registry_module
from webui.engine.base import Weights
from webui.engine.registry import ModelState, Registry, build_registry
from webui.errors import ModelNotFound, ModelNotReady
from webui.models.specs import parse_specs


def test_variants_share_one_copy_of_the_weights(settings) -> None:
    registry = build_registry(settings)
    registry.start()
    registry.wait_idle(60)
    a, b = registry.get("tiny-a"), registry.get("tiny-b")
    assert a.model is b.model
    assert a.slots is b.slots
    assert {s.state for s in registry.statuses()} == {ModelState.READY}
    assert b.spec.system_prompt == "You are tiny b."


def test_a_failing_model_does_not_stop_the_others(settings, tiny_model_dir: Path, tmp_path: Path) -> None:
    specs = parse_specs(
        {
            "models": [
                {"name": "missing", "source": str(tmp_path / "nope")},
                {"name": "broken", "source": str(tmp_path)},  # a folder without config.json
                {
                    "name": "bad-template",
                    "source": str(tiny_model_dir),
                    "dtype": "fp16",
                    "template": "fschat:nonexistent",
                },
                {"name": "good", "source": str(tiny_model_dir)},
            ]
        }
    )
    registry = Registry(specs, settings)
    registry.start()
    registry.wait_idle(60)
    status = {s.name: s for s in registry.statuses()}
    assert status["good"].state is ModelState.READY
    assert status["missing"].state is ModelState.FAILED and "not found" in status["missing"].detail
    assert "config.json" in status["broken"].detail
    assert "nonexistent" in status["bad-template"].detail
    # what every visitor sees names no path: the kind of failure only
    assert {status[n].reason for n in ("missing", "broken", "bad-template")} <= {
        "error in the models file",
        "load failed",
    }
    assert all(str(tmp_path) not in status[n].describe() for n in status)
    with pytest.raises(ModelNotReady, match="failed"):
        registry.get("missing")
    with pytest.raises(ModelNotFound):
        registry.get("nobody")


def test_concurrent_loads_load_once_and_report_states(settings) -> None:
    calls: list[str] = []
    gate = threading.Event()
    seen: list[tuple[str, str]] = []

    def slow_loader(spec, _settings):
        calls.append(spec.name)
        gate.wait(5)
        return Weights(lambda variant, slots: object(), device="fake")

    specs = parse_specs(
        {"models": [{"name": "x", "source": "/m"}, {"name": "x2", "source": "/m", "system_prompt": "v"}]}
    )
    registry = Registry(specs, settings, loaders={"auto": slow_loader})
    registry.on_change(lambda s: seen.append((s.name, s.state.value)))
    threads = [threading.Thread(target=registry.load, args=(name,)) for name in ("x", "x2", "x")]
    for t in threads:
        t.start()
    while registry.status("x").state is not ModelState.LOADING:
        threading.Event().wait(0.01)
    assert registry.status("x2").state is ModelState.LOADING
    gate.set()
    for t in threads:
        t.join(10)
    assert calls == ["x"]
    assert ("x", "loading") in seen and ("x", "ready") in seen and ("x2", "ready") in seen
    registry.unload("x2")
    assert registry.status("x").state is ModelState.UNLOADED
    assert registry.get("x", wait_s=10) is not None  # unloaded weights load again on first use
    assert calls == ["x", "x"]


def test_background_start_returns_at_once(settings) -> None:
    gate = threading.Event()

    def blocked(spec, _settings):
        gate.wait(5)
        raise RuntimeError("weights are corrupt")

    specs = parse_specs({"models": [{"name": "a", "source": "/a"}, {"name": "b", "source": "/b"}]})
    registry = Registry(specs, settings, loaders={"auto": blocked})
    registry.start()
    states = {s.name: s.state for s in registry.statuses()}
    assert set(states.values()) <= {ModelState.QUEUED, ModelState.LOADING}
    gate.set()
    registry.wait_idle(10)
    assert [s.describe().split(" (retrying at ")[0] for s in registry.statuses()] == ["failed: load failed"] * 2
    assert [s.detail for s in registry.statuses()] == ["weights are corrupt"] * 2
    assert all(s.retry_at is not None for s in registry.statuses())
    registry.close()


def test_variants_share_one_concurrency_limit_the_smallest_wins(settings) -> None:
    specs = parse_specs(
        {
            "models": [
                {"name": "a", "source": "/m"},
                {"name": "b", "source": "/m", "max_concurrency": 3},
                {"name": "c", "source": "/m", "max_concurrency": 1},
                {"name": "d", "source": "/other"},
            ]
        }
    )
    registry = Registry(
        specs,
        settings.replace(max_concurrency=5, batch_slots=5),  # whichever engine `auto` expects
        loaders={"auto": lambda spec, _s: Weights(lambda variant, slots: slots)},
    )
    assert registry.load("a") is registry.load("c")
    assert registry.load("a").size == 1
    assert registry.status("a").describe().startswith("ready (loaded in ")  # no device to name
    assert registry.load("d").size == 5


def test_unhealthy_backend_is_reported_and_kept_out_of_ready_names(settings) -> None:
    class Flaky:
        problem: str | None = None

        def health(self):
            return self.problem

    flaky = Flaky()
    specs = parse_specs({"models": [{"name": "remote", "source": "/r"}, {"name": "local", "source": "/l"}]})
    registry = Registry(
        specs,
        settings,
        loaders={
            "auto": lambda spec, _s: Weights(lambda variant, slots: flaky if variant.name == "remote" else Flaky())
        },
    )
    registry.start()
    registry.wait_idle(10)
    assert registry.ready_names() == ["remote", "local"]
    flaky.problem = "connection refused"
    assert registry.ready_names() == ["local"]
    assert registry.status("remote").describe() == "unhealthy: connection refused"
    assert registry.status("remote").state is ModelState.READY


def test_a_failed_load_is_retried_with_a_growing_pause_until_it_works(settings) -> None:
    """A remote server that is not up yet at boot: the registry tries again, and says when."""
    now = [1000.0]  # the registry's clock: retries come only when the test moves it on
    attempts: list[float] = []

    def flaky(spec, _settings):
        attempts.append(now[0])
        if len(attempts) < 4:
            raise RuntimeError("connection refused")
        return Weights(lambda variant, slots: object(), device="remote")

    specs = parse_specs({"models": [{"name": "r", "source": "/r"}]})
    registry = Registry(
        specs, settings, loaders={"auto": flaky}, retry_first_s=0.2, retry_max_s=0.5, clock=lambda: now[0]
    )
    registry.start()
    for failures, pause in ((1, 0.2), (2, 0.4), (3, 0.5)):  # doubling, up to retry_max_s
        wait_for(
            lambda n=failures: len(attempts) == n and registry.status("r").state is ModelState.FAILED,
            10,
            f"attempt {failures} did not fail",
        )
        status = registry.status("r")
        assert status.retry_at == pytest.approx(now[0] + pause, abs=1e-9), (failures, status.retry_at - now[0])
        assert "retrying at" in status.describe() and status.detail == "connection refused"
        now[0] += pause
    wait_for(lambda: registry.status("r").state is ModelState.READY, 10, "was not retried until it worked")
    assert attempts == pytest.approx([1000, 1000.2, 1000.6, 1001.1], abs=1e-9)
    registry.close()


def test_a_mistake_in_the_models_file_is_not_retried(settings, tmp_path: Path) -> None:
    specs = parse_specs({"models": [{"name": "missing", "source": str(tmp_path / "nope")}]})
    registry = Registry(specs, settings, retry_first_s=0.05)
    registry.start()
    registry.wait_idle(10)
    status = registry.status("missing")
    assert status.state is ModelState.FAILED and status.retry_at is None and "retrying" not in status.describe()
    registry.close()


def test_a_model_not_loaded_at_start_loads_on_first_use(settings) -> None:
    """--no-preload: nothing is started; the first request loads the model and waits for it."""
    registry = build_registry(settings)
    assert registry.status("tiny-a").state is ModelState.UNLOADED
    backend = registry.get("tiny-a", wait_s=60)
    assert backend.name == "tiny-a" and registry.status("tiny-a").state is ModelState.READY
    registry.close()


def test_weights_that_die_are_marked_failed_and_loaded_again(settings) -> None:
    """An engine process that exits while the app runs: failed with its reason, then reloaded."""
    alive = {"count": 0}
    dead = threading.Event()

    def engine(spec, _settings):
        alive["count"] += 1
        return Weights(
            lambda variant, slots: object(),
            device="engine",
            failure=lambda: "the engine process exited (code -9)" if dead.is_set() else None,
        )

    specs = parse_specs({"models": [{"name": "e", "source": "/e"}]})
    registry = Registry(specs, settings, loaders={"auto": engine}, retry_first_s=0.3)
    registry.start()
    wait_for(lambda: registry.status("e").state is ModelState.READY, 5, "did not load")
    dead.set()
    wait_for(lambda: registry.status("e").state is ModelState.FAILED, 5, "the death was not noticed")
    assert registry.status("e").reason == "engine exited" and "code -9" in registry.status("e").detail
    dead.clear()
    wait_for(lambda: registry.status("e").state is ModelState.READY, 5, "was not reloaded")
    assert alive["count"] == 2
    registry.close()


class WaitingCaller(threading.Event):
    """A caller's cancel event that is never set; `waiting` is set once `get` looks at it, which it
    does only inside its wait for the model to settle."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def is_set(self) -> bool:
        self.waiting.set()
        return super().is_set()


@pytest.mark.timeout(120)  # a wait that sat out its wait_s (an hour) would hang: pytest-timeout ends it
def test_waiting_for_a_model_ends_when_its_load_fails(settings) -> None:
    """One wait for every caller (the UI, the API): it ends as soon as the model is ready or has
    failed, instead of sitting out the whole timeout on a model that will not come."""
    caller = WaitingCaller()

    def broken(spec, _settings):
        assert caller.waiting.wait(30), "get() never waited for the load"  # fail only once it waits
        raise RuntimeError("cannot load")

    specs = parse_specs({"models": [{"name": "b", "source": "/b"}]})
    registry = Registry(specs, settings, loaders={"auto": broken}, retry_first_s=3600)
    with pytest.raises(ModelNotReady, match="failed: load failed"):
        registry.get("b", wait_s=3600, cancel=caller)  # not loaded yet: queued now, then waited for
    registry.close()


@pytest.mark.parametrize("parallel", [1, 2])
def test_models_load_as_many_at_once_as_asked(settings, parallel: int) -> None:
    """Two loaders that only finish together (a barrier): they both load only when two run at once."""
    barrier = threading.Barrier(2, timeout=2)

    def together(spec, _settings):
        barrier.wait()
        return Weights(lambda v, s: object())

    specs = parse_specs({"models": [{"name": "a", "source": "/a"}, {"name": "b", "source": "/b"}]})
    registry = Registry(specs, settings.replace(load_parallel=parallel), loaders={"auto": together}, retry_first_s=60)
    registry.start()
    assert registry.wait_idle(20)
    states = {s.state for s in registry.statuses()}
    assert states == ({ModelState.READY} if parallel == 2 else {ModelState.FAILED})
    registry.close()


def test_weights_that_died_are_refused_before_the_keeper_looks(settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request between an engine's death and the keeper's next look gets "not ready" (the API's
    503 with Retry-After), not a backend whose engine is gone."""
    monkeypatch.setattr(registry_module, "WATCH_EVERY_S", 3600.0)
    dead = threading.Event()
    specs = parse_specs({"models": [{"name": "e", "source": "/e"}]})
    registry = Registry(
        specs,
        settings,
        loaders={
            "auto": lambda spec, _s: Weights(
                lambda variant, slots: object(), failure=lambda: "exited (code 137)" if dead.is_set() else None
            )
        },
    )
    registry.load("e")  # in this thread: no keeper runs
    dead.set()
    with pytest.raises(ModelNotReady, match="engine exited"):
        registry.get("e")
    assert registry.ready_names() == [] and registry.status("e").problem == "engine exited"
    registry.close()


def test_close_frees_the_weights_side_by_side(settings) -> None:
    """Each engine's stop may take its grace period: one after another they added up at every exit.
    Two weights whose close only ends when both are closing (a barrier) close only side by side."""
    barrier = threading.Barrier(2, timeout=5)
    closed: list[str] = []

    def loader(spec, _settings):
        def close() -> None:
            barrier.wait()
            closed.append(spec.name)

        return Weights(lambda v, s: object(), close=close)

    specs = parse_specs({"models": [{"name": "a", "source": "/a"}, {"name": "b", "source": "/b"}]})
    registry = Registry(specs, settings, loaders={"auto": loader})
    registry.start()
    assert registry.wait_idle(20)
    registry.close()
    assert sorted(closed) == ["a", "b"], "a close waited for the other"
    assert {s.state for s in registry.statuses()} == {ModelState.UNLOADED}


def test_close_with_a_time_limit_does_not_wait_for_a_load_that_goes_on(
    settings, caplog: pytest.LogCaptureFixture
) -> None:
    """A stop while a model loads (seconds to minutes) must not wait for the load: the process exits
    and the engine's supervisor ends what the load started."""
    loading, release = threading.Event(), threading.Event()

    def slow(spec, _settings):
        loading.set()
        release.wait(30)
        return Weights(lambda v, s: object())

    specs = parse_specs({"models": [{"name": "slow", "source": "/slow"}]})
    registry = Registry(specs, settings, loaders={"auto": slow})
    registry.start()
    assert loading.wait(10)
    try:
        registry.close(wait_s=0.2)
        assert not release.is_set() and registry.status("slow").state is ModelState.LOADING
        assert "left to the exit: slow" in caplog.text
    finally:
        release.set()
    wait_for(lambda: registry.status("slow").state is ModelState.UNLOADED, 10, "the load was not undone after it ended")

"""The app as most tests run it, written once: the tiny model under a few names (greedy, short
replies), settings with no per-client limits and a quick leaderboard, and this app's `create_app`
under uvicorn on a free loopback port, models loaded first (readiness polled, never slept for).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.servers import RunningServer, serve_app
from webui.config import Settings
from webui.server.app import create_app
from webui.services import build_services

TINY_PAIR = ("tiny-a", "tiny-b")


def tiny_models(folder: Path, model_dir: Path, names: Sequence[str] = TINY_PAIR, max_new_tokens: int = 8) -> Path:
    """`folder`/models.yaml: the tiny model of `model_dir` under each of `names`, greedy."""
    sampling = f"    sampling: {{temperature: 0, max_new_tokens: {max_new_tokens}}}\n"
    path = folder / "models.yaml"
    path.write_text("models:\n" + "".join(f"  - name: {n}\n    source: {model_dir}\n{sampling}" for n in names))
    return path


def app_settings(folder: Path, model_dir: Path, *, max_new_tokens: int = 8, **overrides: Any) -> Settings:
    """Settings serving `tiny_models` from `folder` (logs and caches in it): many messages and votes
    from one address are allowed, the board bootstraps 5 rounds; `overrides` are Settings fields."""
    fields: dict[str, Any] = {
        "models_file": tiny_models(folder, model_dir, max_new_tokens=max_new_tokens),
        "log_dir": folder / "logs",
        "cache_dir": folder / "cache",
        "queue_timeout_s": 20.0,
        "leaderboard_rounds": 5,
        "rate_messages": 0,
        "rate_votes": 0,
    }
    return Settings(**{**fields, **overrides})


def start_app(settings: Settings, *, load: bool = True) -> RunningServer:
    """The app of `settings`, serving once its models are loaded (`load`); `.stop()` ends it."""
    services = build_services(settings)
    if load:
        services.registry.start()
        assert services.registry.wait_idle(120), "models did not finish loading"
    return serve_app(create_app(services), services)

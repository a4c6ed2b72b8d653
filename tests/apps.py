"""The app as tests run it, written once: settings serving the tiny model under a few names (greedy,
short replies) with no per-client limits and a quick leaderboard, and `start_app`, the one runner
of this app's `create_app` under uvicorn on a free loopback port, models loaded first (readiness
polled, never slept for). tests/uiapp.py's UI and tests/integration/apiserver.py's helpers use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.servers import RunningServer, serve_app
from tests.tiny import tiny_models
from webui.config import Settings
from webui.server.app import create_app
from webui.services import build_services


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


def start_app(
    settings: Settings, *, load: bool = True, ui: bool = True, load_timeout_s: float = 120.0, **parts: Any
) -> RunningServer:
    """The app of `settings` (the one app-server runner of the tests), serving once its models are
    loaded or failed (`load`); `.stop()` ends it. `parts` replace build_services' own (a registry
    with a fake's loader, a recorder the test reads); `ui=False` serves the API alone, quicker, for
    throwaway upstream servers."""
    services = build_services(settings, **parts)
    if load:
        services.registry.start()
        assert services.registry.wait_idle(load_timeout_s), "models did not finish loading"
    if ui:
        return serve_app(create_app(services), services)
    from fastapi import FastAPI

    from webui.api import install_api

    app = FastAPI()
    install_api(app, services)
    return serve_app(app, services)

"""Real servers for the HTTP API tests: uvicorn on 127.0.0.1, a free port, in a thread.

Readiness is polled (uvicorn's `started` flag, then the models' load state); nothing sleeps a fixed
time. The same `create_app` as `python app.py` builds the app, UI included, unless `ui=False`
asks for the API alone (quicker, for throwaway upstream servers).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from fastapi import FastAPI

from tests.servers import RunningServer, alive_threads, serve_app, threads_end_within, wait_for
from webui.config import Settings
from webui.server.app import create_app
from webui.services import build_services

__all__ = [
    "STOP_S",
    "RunningServer",
    "alive_threads",
    "decoding_steps",
    "serve_app",
    "start_arena",
    "threads_end_within",
    "wait_for",
]

# How long a stopped generation may take to end before a test calls it a hang. Only a hang guard:
# that a stop worked is shown by the steps the model made (`decoding_steps`), how fast it is by bench/.
STOP_S = 60.0


def start_arena(settings: Settings, *, ui: bool = True) -> RunningServer:
    """This app, serving `settings.models_file`, with every model loaded (or failed)."""
    services = build_services(settings)
    services.registry.start()
    assert services.registry.wait_idle(120), "models did not finish loading"
    if ui:
        app = create_app(services)
    else:
        from webui.api import install_api

        app = FastAPI()
        install_api(app, services)
    return serve_app(app, services)


@contextlib.contextmanager
def decoding_steps(server: RunningServer, model: str) -> Iterator[list[int]]:
    """The forward passes of `model`'s weights while the block runs, one per generated token: a
    generation that ran to its end has made max_new_tokens of them, a stopped one fewer."""
    weights = server.services.registry.get(model).model  # type: ignore[union-attr, attr-defined]
    steps: list[int] = []
    handle = weights.register_forward_hook(lambda *_: steps.append(1))
    try:
        yield steps
    finally:
        handle.remove()

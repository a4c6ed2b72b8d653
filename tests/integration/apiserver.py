"""What the HTTP API tests share: the one app runner (tests/apps.py's `start_app`; `ui=False` for
the API alone), the server helpers, and `decoding_steps`, which shows that a stop reached the model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tests.apps import start_app
from tests.servers import RunningServer, alive_threads, serve_app, threads_end_within, wait_for

__all__ = [
    "STOP_S",
    "RunningServer",
    "alive_threads",
    "decoding_steps",
    "serve_app",
    "start_app",
    "threads_end_within",
    "wait_for",
]

# How long a stopped generation may take to end before a test calls it a hang. Only a hang guard:
# that a stop worked is shown by the steps the model made (`decoding_steps`), how fast it is by bench/.
STOP_S = 60.0


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

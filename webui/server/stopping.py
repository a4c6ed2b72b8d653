"""How the server stops on Ctrl-C or SIGTERM: within `--shutdown-grace-s`, whatever browsers and
API clients keep open.

uvicorn's graceful shutdown closes idle connections and then waits, with no time limit, for the
others: an open tab keeps Gradio's heartbeat stream open for as long as the tab lives, and a reply
keeps its event stream (an API stream, its response) open until the model ends it. A container
manager kills a process that takes longer than its own grace (10 s for `docker stop`). So before
uvicorn waits, `StoppingServer` ends what holds the connections: every generation is cancelled as
Stop cancels it (the replies so far are recorded as stopped: `webui.services.Generations`), and
Gradio's heartbeat streams are told that the server stops (`App.stop_event`, which Gradio sets
itself when it runs its own server). uvicorn then waits at most `shutdown_grace_s` for the
connections to close and cuts off the rest; `serve()` stops the engines after it.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.routing import Mount

log = logging.getLogger(__name__)


class GradioInternalsMoved(RuntimeError):
    """The installed Gradio no longer has the event its heartbeat streams end on."""


class StoppingServer(uvicorn.Server):
    """uvicorn's server, whose shutdown first calls `on_stop` (on the event loop, before uvicorn
    closes the listening sockets and waits for open connections)."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_stop = on_stop
        self.stop_started: float | None = None  # time.monotonic() of the stop, for the log

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.stop_started = time.monotonic()
        try:
            self.on_stop()
        except Exception:  # a failure here must not keep the server up: uvicorn's deadline still holds
            log.exception("ending the open streams failed; the stop goes on")
        await super().shutdown(sockets)


def stop_streams(app: Any) -> Callable[[], None]:
    """What a stop does before uvicorn waits for connections, for the app `create_app` built: cancel
    every generation, end every heartbeat stream. Checked now, not at the stop: a Gradio upgrade
    that moved the event fails the start rather than a stop."""
    services = getattr(app.state, "services", None)
    gradio_apps: list[Any] = [r.app for r in app.routes if isinstance(r, Mount) and _is_gradio(r.app)]
    if not gradio_apps or not all(hasattr(gradio_app, "stop_event") for gradio_app in gradio_apps):
        raise GradioInternalsMoved(
            "no mounted Gradio App with a stop_event: its heartbeat streams would hold every stop up to "
            "--shutdown-grace-s; webui/server/stopping.py must follow the new layout"
        )
    grace = services.settings.shutdown_grace_s if services is not None else 0.0

    def on_stop() -> None:
        stopped = services.generations.stop_all() if services is not None else 0
        for gradio_app in gradio_apps:
            gradio_app.stop_event.set()  # an asyncio.Event: we run on the server's loop
        log.info("stopping: %d generation(s) stopped; open connections get %.1f s to close", stopped, grace)

    return on_stop


def _is_gradio(candidate: Any) -> bool:
    return type(candidate).__module__.startswith("gradio")

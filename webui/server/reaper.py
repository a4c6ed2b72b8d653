"""How long the server keeps a browser session: one unused for `Settings.session_idle_min` minutes
is removed, Gradio's state of it and its binding (webui.server.sessions) both.

Gradio keeps a copy of every component's config per session until 10,000 sessions exist, whether
or not the browser comes back (docs/deploy.md, "Sessions"); its own clean-up only empties
`gr.State` values. Removing a session means editing Gradio's private state, so `SessionReaper`
checks on construction that the attributes it edits are where it expects them, and fails loudly
(`GradioInternalsMoved`) when a Gradio upgrade has moved them, rather than leaking quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import AsyncIterator
from typing import Any

from webui.config import Settings
from webui.server.sessions import SessionBook

log = logging.getLogger(__name__)

# What the reaper reads and edits, by the path from a gr.Blocks (checked by `check_gradio_internals`).
GRADIO_INTERNALS = (
    "_queue.pending_event_ids_session",
    "_queue.pending_messages_per_session",
    "state_holder.session_data",
    "state_holder.time_last_used",
    "state_holder.lock",
    "state_holder.delete_state",
)


class GradioInternalsMoved(RuntimeError):
    """The installed Gradio keeps its per-session state somewhere else than this module expects."""


def check_gradio_internals(blocks: Any) -> None:
    missing = [path for path in GRADIO_INTERNALS if not _has_path(blocks, path)]
    if missing:
        raise GradioInternalsMoved(
            f"this Gradio ({_gradio_version()}) has no {', '.join('Blocks.' + p for p in missing)}: idle sessions "
            "cannot be removed; webui/server/reaper.py must follow the new layout"
        )


def _has_path(obj: Any, path: str) -> bool:
    for part in path.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _gradio_version() -> str:
    try:
        import gradio
    except ImportError:
        return "gradio not installed"
    return f"gradio {gradio.__version__}"


class SessionReaper:
    """Removes sessions unused for `idle_s`: Gradio's per-session state and the binding. A session
    with an event queued or running is in use, however long ago its last request was."""

    def __init__(self, blocks: Any, book: SessionBook, idle_s: float) -> None:
        check_gradio_internals(blocks)
        self.blocks = blocks
        self.book = book
        self.idle_s = idle_s
        book.on_evict = self.drop

    def sweep(self) -> int:
        """One pass; returns how many sessions were removed."""
        busy = {h for h, ids in self.blocks._queue.pending_event_ids_session.items() if ids}
        removed = 0
        for session_hash in self.book.idle(self.idle_s):
            if session_hash in busy:
                self.book.touch(session_hash)  # a long reply is use
                continue
            self.drop(session_hash)
            removed += 1
        # sessions nobody bound (gradio_api/call events are sessions of their own)
        holder = self.blocks.state_holder
        cutoff = datetime.datetime.now() - datetime.timedelta(seconds=self.idle_s)
        for session_hash, last in list(holder.time_last_used.items()):
            if last < cutoff and session_hash not in busy and session_hash not in self.book:
                self.drop(session_hash)
                removed += 1
        return removed

    def drop(self, session_hash: str) -> None:
        holder = self.blocks.state_holder
        holder.delete_state(session_hash)  # runs gr.State delete callbacks
        with holder.lock:
            holder.session_data.pop(session_hash, None)
            holder.time_last_used.pop(session_hash, None)
        queue = self.blocks._queue
        if not queue.pending_event_ids_session.get(session_hash):
            queue.pending_event_ids_session.pop(session_hash, None)
            queue.pending_messages_per_session.pop(session_hash, None)
        self.book.forget(session_hash)

    async def run(self, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                removed = self.sweep()
            except Exception:  # a failed sweep must not end the loop
                log.exception("session sweep failed")
                continue
            if removed:
                log.debug("removed %d idle sessions", removed)


def expire_idle_sessions(app: Any, blocks: Any, book: SessionBook, settings: Settings) -> SessionReaper:
    """Run a `SessionReaper` for as long as the app is being served (wraps the app's lifespan, as
    `gr.mount_gradio_app` does)."""
    idle_s = settings.session_idle_min * 60
    reaper = SessionReaper(blocks, book, idle_s)
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            task = asyncio.create_task(reaper.run(every_s=min(60.0, max(0.5, idle_s / 4))))
            try:
                yield state
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app.router.lifespan_context = lifespan
    return reaper

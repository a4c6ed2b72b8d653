"""What `webui.server.app.serve` starts beside the HTTP server: ZeroGPU preparation, the Hub log sync,
the snapshot schedule (with its webhook and Hub results) and the share link, plus warnings for settings that make a public deployment misbehave. Kept here
so that serve() stays a few lines and each piece can be tested on its own (see docs/deploy.md)."""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webui.access.auth import login_enabled
from webui.engine.zerogpu import on_space, prepare_zero_gpu
from webui.leaderboard.snapshots.announce import slack_message
from webui.leaderboard.snapshots.snapshot import FOLDER
from webui.server.hub_sync import start_hub_sync
from webui.server.notify import Notifier
from webui.server.schedule import POLL_S, FileClaim, SnapshotSchedule, StoreClaim, Taken
from webui.server.share import share_when_ready

if TYPE_CHECKING:
    from webui.config import Settings
    from webui.leaderboard.board.view import LeaderboardView
    from webui.services import Services

log = logging.getLogger(__name__)

STOP_WAIT_S = 2.0  # at a stop, for the snapshot schedule and again for its webhook's thread


def public_warnings(services: Services, space: bool) -> list[str]:
    """Settings that work locally but not on a public address, in words an operator can act on."""
    settings = services.settings
    warnings: list[str] = []
    if space and settings.trusted_proxies == 0:
        warnings.append(
            "running on a Space with trusted_proxies=0: every visitor appears to come from the "
            "Space's proxy, so rate limits are shared by all and logs cannot tell clients apart; "
            "set the Space variable ARENA_TRUSTED_PROXIES=1"
        )
    if settings.share and not login_enabled(settings):
        warnings.append(
            "--share makes the app public to anyone with the link, without a login; consider --auth-file or ARENA_AUTH"
        )
    if settings.share and settings.trusted_proxies == 0:
        warnings.append(
            "--share: visitors arrive through the local tunnel client (127.0.0.1), so rate limits "
            "are shared by all of them unless --trusted-proxies 1 is set"
        )
    return warnings


def before_serving(server: Any, app: Any, services: Services) -> None:
    """Called by serve() after the app is built and before uvicorn runs."""
    settings = services.settings
    space = on_space()
    for warning in public_warnings(services, space):
        log.warning("%s", warning)
    prepare_zero_gpu(services.registry)
    start_hub_sync(settings.hub_dataset, settings.log_dir, settings.hub_every_min)
    app.state.snapshots = start_snapshots(app.state.board, settings)
    if settings.share:
        share_when_ready(server, app.state.blocks, settings.host, settings.port, on_space=space)


def after_serving(app: Any) -> None:
    """Called by serve() when the server has stopped: ends what before_serving started."""
    scheduled = getattr(app.state, "snapshots", None)
    if scheduled is not None:
        scheduled.close()


@dataclass
class Scheduled:
    """The snapshot schedule and what it feeds, stopped together."""

    schedule: SnapshotSchedule
    notifier: Notifier | None
    store: Any = None  # the claims' connection, with --database

    def close(self, wait_s: float = STOP_WAIT_S) -> None:
        """Stop both threads, waiting at most `wait_s` for each: a Hub push or a webhook post in
        flight is abandoned then (daemon threads), so the server's stop stays within its grace."""
        self.schedule.close(wait_s)
        if self.notifier is not None:
            self.notifier.close(wait_s)
        if self.store is not None:
            self.store.close()


def start_snapshots(
    view: LeaderboardView,
    settings: Settings,
    *,
    clock: Callable[[], float] = time.time,
    poll_s: float = POLL_S,
    notifier: Notifier | None = None,
    hf_api: Any = None,
) -> Scheduled | None:
    """With --snapshot-every: the schedule that snapshots `view`'s board into LOG_DIR/snapshots,
    claiming each period in the shared database (--database) or by a file beside the snapshots,
    posting the changes to --notify-url and the results to --hub-dataset. None without it."""
    every = settings.snapshot_every_s
    if not every:
        return None
    folder = view.log_dir / FOLDER
    holder = f"{settings.server_name or socket.gethostname()}/{os.getpid()}/{secrets.token_hex(4)}"
    store = None
    if settings.database:
        from webui.db.store import open_store

        store = open_store(settings.database)
    claim = StoreClaim(store, holder) if store is not None else FileClaim(folder, holder)
    if notifier is None and settings.notify_url:
        notifier = Notifier(settings.notify_url)
    hooks: list[Callable[[Taken], None]] = []
    if notifier is not None:
        hooks.append(announcer(notifier))
    if settings.hub_dataset:
        from webui.server.hub_results import HubResults

        hooks.append(HubResults(settings.hub_dataset, view.export, hf_api=hf_api))

    def board() -> Any:
        published = view.live.latest()
        return published.board if published is not None else None

    schedule = SnapshotSchedule(folder, every, board, claim, after=hooks, clock=clock, poll_s=poll_s).start()
    log.info(
        "taking a board snapshot into %s every %s%s%s",
        folder,
        settings.snapshot_every,
        f", announced to {notifier.shown}" if notifier is not None else "",
        f", results pushed to the Hub dataset {settings.hub_dataset}" if settings.hub_dataset else "",
    )
    return Scheduled(schedule, notifier, store)


def announcer(notifier: Notifier) -> Callable[[Taken], None]:
    """The schedule's hook that queues each snapshot's changes for the webhook (the first snapshot,
    with nothing before it, announces nothing)."""

    def announce(taken: Taken) -> None:
        if taken.changes is not None:
            notifier.send(slack_message(taken.changes, taken.next_comparison))

    return announce

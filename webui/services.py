"""What the UI, the HTTP API and the server share: built once per server, passed down.

It sits below its users (arena handlers, ui, api, server) and above what it holds (the registry,
the recorder, the rate limiter), so that nothing has to import the module that builds the app.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

from webui.access.operator import OperatorGate
from webui.access.ratelimit import Limiter, build_rate_limiter
from webui.access.routes import RouteKeys
from webui.config import Settings
from webui.engine.registry import Registry, build_registry
from webui.leaderboard.votes.declared import Declared
from webui.leaderboard.votes.declared import load as load_declared
from webui.records.events import Recorder


class Generations:
    """The cancel events of the generations running now (UI runs, API requests), so that a server
    stop can end them all at once as Stop does, and a closed tab the runs of its own session: each
    reply so far is kept and recorded as stopped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # weak: a finished generation's event goes with its run, nobody has to remove it; the value
        # is the browser session that started it (None: an API request)
        self._live: weakref.WeakKeyDictionary[threading.Event, str | None] = weakref.WeakKeyDictionary()
        self.stopping = False

    def track(self, cancel: threading.Event, *, session_hash: str | None = None) -> threading.Event:
        """Register a generation's cancel event (returned); after `stop_all` it is set at once: a
        request that slipped in during the stop ends before it holds the server up."""
        with self._lock:
            if not self.stopping:
                self._live[cancel] = session_hash
                return cancel
        cancel.set()
        return cancel

    def stop_all(self) -> int:
        """Cancel every running generation and every later one; returns how many were running."""
        with self._lock:
            self.stopping = True
            running = [cancel for cancel in self._live if not cancel.is_set()]
            self._live.clear()
        return _set_all(running)

    def stop_session(self, session_hash: str) -> int:
        """Cancel the generations one browser session started (its tab was closed); returns how
        many were running. Gradio ends a run whose event stream drops, but a tab closed before
        the stream of its newest message connected leaves no stream to drop: this catches that."""
        with self._lock:
            running = [c for c, owner in self._live.items() if owner == session_hash and not c.is_set()]
        return _set_all(running)


def _set_all(running: list[threading.Event]) -> int:
    for cancel in running:
        cancel.set()
    return len(running)


@dataclass
class Services:
    """Everything the UI and the API share; built once per server."""

    settings: Settings
    registry: Registry
    recorder: Recorder
    # Per-client limits on messages and votes (webui/access/ratelimit.py): handlers call
    # `services.rate_limiter.check("message" | "vote", client_info(request, settings))`. Counted in the shared
    # database with --database (webui/access/shared_ratelimit.py), so that every server counts a client alike.
    rate_limiter: Limiter = field(default=None)  # type: ignore[assignment]  # built from settings below
    # Whether a request carries the operator key (webui/access/operator.py); built from settings below, so
    # that a missing or short key stops the start.
    operator: OperatorGate = field(default=None)  # type: ignore[assignment]
    # Every running generation's cancel event (the arena's runs, the API's requests): a server stop sets them all.
    generations: Generations = field(default_factory=Generations)
    # What a request to a remote model says about its conversation and user (keyed hashes), so that a
    # router in front of the upstream keeps a conversation on one replica (webui/access/routes.py).
    routes: RouteKeys = field(default=None)  # type: ignore[assignment]
    # The categories the operator declared (--categories-file): the leaderboard's boards, the visitors' tags.
    # Read from settings below, so that a malformed file stops the start with its line and the reason.
    categories: Declared = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.routes is None:
            self.routes = RouteKeys.from_settings(self.settings)
        if self.categories is None:
            self.categories = load_declared(self.settings.categories_file)
        if self.operator is None:
            self.operator = OperatorGate.from_settings(self.settings)
        if self.rate_limiter is None:
            self.rate_limiter = build_limiter(self.settings)


def build_limiter(settings: Settings) -> Limiter:
    """In this process; or, with --database, in the database, this process counting while it is out."""
    memory = build_rate_limiter(settings.rate_messages, settings.rate_votes, votes_per_day=settings.rate_votes_day)
    if not settings.database:
        return memory
    from webui.access.shared_ratelimit import SharedRateLimiter
    from webui.records.privacy import derived_key, load_shared_secret

    secret = load_shared_secret(settings.secret, settings.secret_file)
    return SharedRateLimiter(memory.limits, settings.database, derived_key(secret, "rate limit"), fallback=memory)


def build_services(settings: Settings, registry: Registry | None = None, recorder: Recorder | None = None) -> Services:
    categories = load_declared(settings.categories_file)  # first: a malformed file stops the start at once
    registry = registry or build_registry(settings)
    if recorder is None:
        from webui.leaderboard.votes.rows import vote_features
        from webui.records.storage import JsonlRecorder

        # each battle vote's features counted once, as it is written (the index then reads them)
        recorder = JsonlRecorder.from_settings(settings, registry.names(), features=vote_features)
    return Services(settings, registry, recorder, categories=categories)

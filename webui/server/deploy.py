"""What `webui.server.app.serve` starts beside the HTTP server: ZeroGPU preparation, the Hub log sync
and the share link, plus warnings for settings that make a public deployment misbehave. Kept here
so that serve() stays a few lines and each piece can be tested on its own (see docs/deploy.md)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from webui.access.auth import login_enabled
from webui.engine.zerogpu import on_space, prepare_zero_gpu
from webui.server.hub_sync import start_hub_sync
from webui.server.share import share_when_ready

if TYPE_CHECKING:
    from webui.services import Services

log = logging.getLogger(__name__)


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
    if settings.share:
        share_when_ready(server, app.state.blocks, settings.host, settings.port, on_space=space)

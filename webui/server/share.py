"""`--share`: a temporary public https://*.gradio.live link to the running server.

Gradio only offers share links from `Blocks.launch`, which starts its own server; ours is a FastAPI
app with Gradio mounted at / beside /healthz and /v1 (`mount_gradio_app` ignores share). So we
open the same tunnel `launch(share=True)` opens, with Gradio's own helper, pointed at our port
once uvicorn is listening. Everything behind the link (the UI, /healthz and the API) is then
public: turn on a login (docs/deploy.md) before sharing anything that is not a demo.

The tunnel needs the internet twice: to ask api.gradio.app for a share server, and to download the
`frpc` client the first time. Where either fails the app keeps serving locally and says why.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse, urlunparse

from webui.errors import ArenaError

log = logging.getLogger(__name__)

Tunnel = Callable[[str, int, str, Any, Any], str]
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


class ShareError(ArenaError):
    """The share link could not be created; the message says why and that the app still runs."""


def local_target(host: str) -> str:
    """Where the tunnel client connects: a wildcard listen address is reachable on loopback."""
    return "127.0.0.1" if host in WILDCARD_HOSTS else host


def open_share_link(blocks: Any, host: str, port: int, tunnel: Tunnel | None = None) -> str:
    """Open the tunnel and return the public https URL, or raise ShareError."""
    if tunnel is None:
        from gradio.networking import setup_tunnel

        tunnel = setup_tunnel
    local = f"http://{local_target(host)}:{port}"
    try:
        address = tunnel(local_target(host), port, blocks.share_token, None, None)
    except Exception as exc:  # any failure becomes one clear message
        log.debug("share tunnel failed", exc_info=True)
        raise ShareError(explain_failure(exc, local)) from exc
    url = urlunparse(("https", *urlparse(address)[1:]))
    # As launch(share=True) does: robots.txt says Disallow, and the page loads Gradio's JS from its
    # CDN instead of through the tunnel.
    blocks.share = True
    blocks.share_url = url
    return url


def explain_failure(exc: BaseException, local_url: str) -> str:
    reason = _root_cause(exc)
    return (
        f"Could not create a share link ({reason}). --share needs internet access to Gradio's share "
        f"service (api.gradio.app and its tunnel servers). The app is still running locally at {local_url}."
    )


def _root_cause(exc: BaseException) -> str:
    """The innermost error, in one line: 'Could not get share link' alone does not say DNS failed."""
    messages: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(messages) < 4:
        text = str(current).strip().splitlines()[0] if str(current).strip() else type(current).__name__
        messages.append(text)
        current = current.__cause__ or current.__context__
    return ": ".join(dict.fromkeys(messages))


def share_when_ready(
    server: Any,
    blocks: Any,
    host: str,
    port: int,
    *,
    on_space: bool = False,
    tunnel: Tunnel | None = None,
    wait_s: float = 120.0,
) -> threading.Thread | None:
    """Open the link from a background thread once `server` (a uvicorn.Server) is listening, and
    log the outcome. Returns the thread (tests join it)."""
    if on_space:
        log.warning("--share is ignored on a Hugging Face Space: the Space's own URL is already public")
        return None

    def run() -> None:
        deadline = time.monotonic() + wait_s
        while not server.started and time.monotonic() < deadline and not server.should_exit:
            time.sleep(0.1)
        if not server.started:
            log.error("share link not opened: the server did not start")
            return
        try:
            url = open_share_link(blocks, host, port, tunnel)
        except ShareError as exc:
            log.error("%s", exc)
            return
        log.info("public share link: %s (temporary; anyone with it can use the app)", url)

    thread = threading.Thread(target=run, name="share-link", daemon=True)
    thread.start()
    return thread

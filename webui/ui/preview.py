"""The page's link-preview tags: what a chat app or a social site shows for a link to the arena.

Gradio's page template opens its <head> with Gradio's own Open Graph and Twitter tags ("Gradio",
"Click to try out the app!", Gradio's banner) and repeats them further down, empty for a Blocks app;
crawlers take the first and run no JavaScript, so the page's script (webui.ui.page) cannot fix them.
`LinkPreview` rewrites the page on its way out instead: every og:/twitter: tag goes, ours take
their place.
"""

from __future__ import annotations

import html
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

TITLE = "Pairwise Arena"
DESCRIPTION = (
    "Chat with language models and compare them side by side: one prompt, two answers at once, "
    "vote for the better one. The votes build a leaderboard."
)

# <meta property="og:..." content="..." /> and <meta name="twitter:..." ...>, across line breaks
_PREVIEW_TAG = re.compile(rb'[ \t]*<meta\s+(?:property|name)="(?:og|twitter):[^"]*"\s+content="[^"]*"\s*/?>\s*')
_HEAD_END = b"</head>"


def preview_tags(title: str = TITLE, description: str = DESCRIPTION) -> str:
    title, description = html.escape(title), html.escape(description)
    return (
        f'<meta property="og:title" content="{title}" />\n'
        '<meta property="og:type" content="website" />\n'
        f'<meta property="og:description" content="{description}" />\n'
        '<meta name="twitter:card" content="summary" />\n'
        f'<meta name="twitter:title" content="{title}" />\n'
        f'<meta name="twitter:description" content="{description}" />\n'
        f'<meta name="description" content="{description}" />\n'
    )


def rewrite(page: bytes) -> bytes:
    """The page with its link-preview tags replaced by ours (a page without a head as it was)."""
    end = page.find(_HEAD_END)
    if end < 0:
        return page
    head = _PREVIEW_TAG.sub(b"", page[:end])
    return head + preview_tags().encode() + page[end:]


Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]


class LinkPreview:
    """ASGI middleware: GET responses that are HTML pages (small, never streamed) are held until
    their last byte, rewritten and sent with the new length; everything else passes untouched."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Message, receive: Any, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def relay(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and _is_plain_html(message):
                start = message
            elif start is None or message["type"] != "http.response.body":
                await send(message)
            else:
                chunks.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                body = rewrite(b"".join(chunks))
                headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
                await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, relay)


def _is_plain_html(start: Message) -> bool:
    headers = {k.lower(): v for k, v in start.get("headers", [])}
    return headers.get(b"content-type", b"").startswith(b"text/html") and b"content-encoding" not in headers

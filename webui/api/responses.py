"""OpenAI's response objects: chat completions and text completions, whole or as SSE chunks."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from webui.api.errors import from_finished
from webui.types import Finished, FinishReason, StreamEvent, TextDelta

DONE = "data: [DONE]\n\n"


def finish_reason(final: Finished) -> str:
    return "length" if final.reason is FinishReason.LENGTH else "stop"


def usage(final: Finished) -> dict[str, int]:
    return {
        "prompt_tokens": final.prompt_tokens,
        "completion_tokens": final.completion_tokens,
        "total_tokens": final.prompt_tokens + final.completion_tokens,
    }


def sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"


@dataclass
class Reply:
    """The identity of one answer: the same id and timestamp on every chunk."""

    kind: Literal["chat", "text"]
    model: str
    id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        if not self.id:
            self.id = ("chatcmpl-" if self.kind == "chat" else "cmpl-") + secrets.token_hex(12)

    def _head(self, suffix: str) -> dict[str, Any]:
        obj = "chat.completion" if self.kind == "chat" else "text_completion"
        return {"id": self.id, "object": obj + suffix, "created": self.created, "model": self.model}

    def whole(self, text: str, final: Finished) -> dict[str, Any]:
        if self.kind == "chat":
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text}}
        else:
            choice = {"index": 0, "text": text}
        choice.update(logprobs=None, finish_reason=finish_reason(final))
        return {**self._head(""), "choices": [choice], "usage": usage(final)}

    def chunk(self, text: str | None, finish: str | None = None, *, role: bool = False) -> dict[str, Any]:
        if self.kind == "chat":
            delta: dict[str, Any] = {"role": "assistant"} if role else {}
            if text is not None:
                delta["content"] = text
            choice: dict[str, Any] = {"index": 0, "delta": delta}
        else:
            choice = {"index": 0, "text": text or ""}
        choice.update(logprobs=None, finish_reason=finish)
        return {**self._head(".chunk" if self.kind == "chat" else ""), "choices": [choice]}

    def usage_chunk(self, final: Finished) -> dict[str, Any]:
        return {**self._head(".chunk" if self.kind == "chat" else ""), "choices": [], "usage": usage(final)}


async def sse_stream(reply: Reply, events: AsyncIterator[StreamEvent], include_usage: bool) -> AsyncIterator[str]:
    """Chunks in OpenAI's order: the role, the text, one chunk with finish_reason, the usage chunk
    when asked for, then [DONE]. A failure mid-stream becomes an error event (the openai client
    raises it) because the status line has already been sent."""
    if reply.kind == "chat":
        yield sse(reply.chunk("", role=True))
    async for event in events:
        if isinstance(event, TextDelta):
            yield sse(reply.chunk(event.text))
            continue
        if event.reason is FinishReason.ERROR:
            yield sse(from_finished(event).body())
        else:
            yield sse(reply.chunk(None if reply.kind == "chat" else "", finish_reason(event)))
            if include_usage:
                yield sse(reply.usage_chunk(event))
        break
    yield DONE

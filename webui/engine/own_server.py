"""A model on an engine server of our own (vLLM's, llama.cpp's): our prompt, as token ids, over HTTP.

The engine contract does not change with the engine. Our template renders the prompt and our
tokenizer turns it into token ids, which the server receives as they are (`/v1/completions` with a
list of ids), so the prompt shown under "Show prompt" is exactly what the model saw; the context is
fitted the same way; stop strings (ours and the template's), the per-request seed, repetition
penalty and ignore_eos go with each request. Stop, a closed tab or a dropped API client close the
HTTP stream, which makes the server abort the request at once.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import httpx

from webui.config import Settings
from webui.engine.base import ENGINE_EXITED, Slots, Weights
from webui.engine.remote_backend import RemoteBackend
from webui.engine.templates import PromptBuilder, Rendered
from webui.engine.upstream import CONNECTION_LOST, UNREACHABLE, Health
from webui.errors import ModelNotReady
from webui.models.specs import ModelSpec
from webui.types import Finished, FinishReason, Message, Route, SamplingParams, StreamEvent


class Server(Protocol):
    """What the backend needs of the server process: where it listens and whether it died."""

    @property
    def base_url(self) -> str: ...

    def failure(self) -> str | None: ...

    def on_exit(self, listener: Callable[[], None]) -> None: ...

    def stop(self) -> None: ...


@dataclasses.dataclass(frozen=True)
class Dialect:
    """How one engine's server is asked: its name in records, and what each request adds to the
    OpenAI body (llama.cpp's own sampler defaults must be turned off, vLLM's are already neutral)."""

    engine: str  # "vllm", "llamacpp": the `engine` of every Finished record
    request: Callable[[SamplingParams, int], dict[str, Any]]  # (settings, context) -> extra body fields


class ServerBackend(RemoteBackend):
    """A variant of a model on our own engine server."""

    def __init__(
        self,
        spec: ModelSpec,
        client: httpx.Client,
        slots: Slots,
        health: Health,
        server: Server,
        prompts: PromptBuilder,
        dialect: Dialect,
        *,
        queue_timeout_s: float,
    ) -> None:
        super().__init__(spec, client, slots, health, queue_timeout_s=queue_timeout_s)
        self.server = server
        self.prompts = prompts
        self.tokenizer = prompts.tokenizer
        self.dialect = dialect

    @property
    def context_length(self) -> int:
        return self.prompts.context_length

    def health(self) -> str | None:
        return ENGINE_EXITED if self.server.failure() else super().health()

    def render_prompt(self, messages: Sequence[Message]) -> str:
        return self.prompts.render(messages)

    def prompt_tokens(self, prompt: Sequence[Message] | str) -> int:
        return self.prompts.count(prompt)

    def template_source(self) -> str:
        return self.prompts.template.source

    def stream(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        cancel: threading.Event | None = None,
        *,
        route: Route | None = None,
    ) -> Iterator[StreamEvent]:
        rendered = self.prompts.prepare(messages, params)
        params = params.replace(stop=(*params.stop, *self.prompts.template.stop))
        return self._send(rendered, params, cancel, self.prompts.template.name)

    def complete(
        self,
        prompt: str,
        params: SamplingParams,
        cancel: threading.Event | None = None,
        *,
        route: Route | None = None,
    ) -> Iterator[StreamEvent]:
        return self._send(self.prompts.raw(prompt, params), params, cancel, "raw")

    def _send(
        self, rendered: Rendered, params: SamplingParams, cancel: threading.Event | None, template: str
    ) -> Iterator[StreamEvent]:
        if self.server.failure() is not None or self.client.is_closed:  # died (and failed or about to be)
            raise ModelNotReady(f"{self.name} is not ready ({ENGINE_EXITED})")

        def finish(final: Finished) -> Finished:
            extra: dict[str, Any] = {
                "dropped_messages": rendered.dropped_messages,
                "template": template,
                "engine": self.dialect.engine,
            }
            lost = (final.extra or {}).get("upstream_failure") in (UNREACHABLE, CONNECTION_LOST)
            if final.reason is FinishReason.ERROR and (lost or self.server.failure() is not None):
                extra["engine_down"] = True  # our own engine died under the request: it comes back
            return Finished(
                final.reason,
                prompt_tokens=len(rendered.token_ids),
                completion_tokens=final.completion_tokens,
                ttft_s=final.ttft_s,
                tokens_per_s=final.tokens_per_s,
                error=final.error,
                prompt=rendered.text,
                extra=extra,
            )

        payload = {"prompt": rendered.token_ids, **self.dialect.request(params, self.context_length)}
        return self._start(
            "completions",
            payload,
            params,
            cancel,
            finish=finish,
            prompt_tokens=len(rendered.token_ids),
            prompt=rendered.text,
        )


class RunningServer:
    """A server that another process started and will stop (`attach` in webui.engine.vllm)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def failure(self) -> str | None:
        return None

    def on_exit(self, listener: Callable[[], None]) -> None:
        pass  # not ours to watch

    def stop(self) -> None:
        pass


def server_weights(
    name: str,
    server: Server,
    tokenizer: Any,
    context: int,
    settings: Settings,
    dialect: Dialect,
    *,
    engine: str,
    device: str,
) -> Weights:
    """Weights whose variants all talk to one server (one HTTP client, one health record); closing
    them stops the server."""
    client = httpx.Client(
        base_url=server.base_url,
        timeout=httpx.Timeout(None, connect=5.0),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
    )
    health = Health(name)

    def make_backend(variant: ModelSpec, slots: Slots) -> ServerBackend:
        return ServerBackend(
            _as_remote(variant, server.base_url),
            client,
            slots,
            health,
            server,
            PromptBuilder(variant, tokenizer, context),
            dialect,
            queue_timeout_s=settings.queue_timeout_s,
        )

    def close() -> None:
        client.close()
        closing = getattr(tokenizer, "close", None)  # one that asks the server (llama.cpp's) has a client
        if callable(closing):
            closing()
        server.stop()

    return Weights(
        make_backend, device=device, engine=engine, close=close, failure=server.failure, on_failure=server.on_exit
    )


def _as_remote(spec: ModelSpec, base_url: str) -> ModelSpec:
    """The entry as the HTTP client sees it: our server, the model under its own name."""
    return dataclasses.replace(spec, base_url=f"{base_url}/v1", remote_model=spec.name)


def trained_context(config: Mapping[str, Any]) -> int | None:
    """The context a model was trained for, from its config (a text model's or a multimodal one's)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    value = text.get("max_position_embeddings") if isinstance(text, Mapping) else None
    return value if isinstance(value, int) and 16 <= value <= 10_000_000 else None


def file_name(name: str) -> str:
    """A model's name as a file name (its server's log)."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)

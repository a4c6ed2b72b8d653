"""Local generation with Hugging Face transformers.

Two ways to run a request, chosen per set of weights when they load:

* continuous batching (webui.engine.batching): one manager per set of weights decodes every running
  request in one forward pass per step; with `--transformers-batching on`, wherever the manager
  serves the model (webui.engine.batching_load checks at load);
* one `generate()` thread per request (webui.engine.hf_generate): the default, and where the
  manager cannot serve (an architecture or attention it refuses, a ZeroGPU Space, a paged cache
  that does not fit); the model status says why.

Either way each request gets its own streamer, cancel event and stop filter; nothing request-shaped
lives on the shared weights, so concurrent users never see each other's tokens.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch

from webui.config import Settings
from webui.engine.base import (
    Backend,
    ClosingStream,
    Slots,
    Weights,
    cancelled_before_start,
    start_in_slot,
)
from webui.engine.batching_load import start_batching
from webui.engine.hf_generate import Halt, Streamer, generate_reply, reply_events
from webui.engine.templates import PromptBuilder, Rendered, Template
from webui.errors import ParamError
from webui.handoff import Handoff, run_in_thread
from webui.models.specs import ModelSpec
from webui.types import Message, Route, SamplingParams, StreamEvent

if TYPE_CHECKING:
    from webui.engine.batching import Batching  # imported at load, where batching is on: it needs transformers' API

log = logging.getLogger(__name__)


class TransformersBackend(Backend):
    def __init__(
        self,
        spec: ModelSpec,
        model: Any,
        tokenizer: Any,
        slots: Slots,
        *,
        queue_timeout_s: float,
        join_timeout_s: float = 30.0,
        batching: Batching | None = None,
    ) -> None:
        self.spec = spec
        self.model = model
        self.tokenizer = tokenizer
        self.slots = slots
        self.queue_timeout_s = queue_timeout_s
        self.join_timeout_s = join_timeout_s
        self.batching = batching
        context = spec.context_length or _model_context(model, tokenizer)
        # One request never holds more than the whole paged cache: a longer conversation drops its
        # oldest turns to fit, as for any context limit. A request the manager could never place
        # would end its loop, and with it every other request in the batch.
        self.cache_cap = (
            batching.kv_cache_tokens if batching is not None and batching.kv_cache_tokens < context else None
        )
        self.prompts = PromptBuilder(spec, tokenizer, self.cache_cap or context)
        self.template: Template = self.prompts.template

    @property
    def context_length(self) -> int:
        return self.prompts.context_length

    @property
    def context_name(self) -> str:
        if self.cache_cap is None:
            return super().context_name
        return (
            f"this model's paged KV cache of {self.cache_cap} tokens "
            "(kv_cache_tokens in the models file, --transformers-kv-cache-tokens)"
        )

    def render_prompt(self, messages: Sequence[Message]) -> str:
        return self.prompts.render(messages)

    def prepare(self, messages: Sequence[Message], params: SamplingParams) -> Rendered:
        """Validate and render: everything that can be refused before any work starts."""
        self._within_cache(params)
        return self.prompts.prepare(messages, params)

    def _within_cache(self, params: SamplingParams) -> None:
        """A reply longer than the paged cache is refused saying so, not only as out of range."""
        if self.cache_cap is not None and params.validate().max_new_tokens > self.cache_cap:
            raise ParamError(
                "max_new_tokens",
                f"must be 1..{self.cache_cap}, got {params.max_new_tokens}: a prompt and its reply must fit in "
                f"{self.context_name}",
            )

    def stream(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        cancel: threading.Event | None = None,
        *,
        route: Route | None = None,
    ) -> Iterator[StreamEvent]:
        """Checks, queueing and the thread start happen here, eagerly, so that errors reach the
        caller before any event; the returned iterator only reads the tokens."""
        rendered = self.prepare(messages, params)
        return self._launch(rendered, params, cancel, self.template.stop, self.template.name)

    def complete(
        self,
        prompt: str,
        params: SamplingParams,
        cancel: threading.Event | None = None,
        *,
        route: Route | None = None,
    ) -> Iterator[StreamEvent]:
        """Raw completion (the /v1/completions route): no template, no template stop strings."""
        self._within_cache(params)
        return self._launch(self.prompts.raw(prompt, params), params, cancel, (), "raw")

    def prompt_tokens(self, prompt: Sequence[Message] | str) -> int:
        return self.prompts.count(prompt)

    def template_source(self) -> str:
        return self.template.source

    def _launch(
        self,
        rendered: Rendered,
        params: SamplingParams,
        cancel: threading.Event | None,
        template_stops: Sequence[str],
        template_name: str,
    ) -> Iterator[StreamEvent]:
        """Queue for a slot and start the generate thread (eagerly: a full queue raises here)."""
        if self.batching is not None:
            return self._launch_batched(self.batching, rendered, params, cancel, template_stops, template_name)
        started = time.perf_counter()
        cancel = cancel or threading.Event()
        halt = threading.Event()  # set on a stop string, an error or an early close; `cancel` is the caller's
        texts: Handoff[str] = Handoff()
        streamer = Streamer(self.tokenizer, texts)

        def generate() -> None:
            self._generate(rendered.token_ids, params, streamer, Halt(cancel, halt))

        thread = start_in_slot(
            self.slots,
            self.spec.name,
            self.queue_timeout_s,
            cancel,
            lambda: run_in_thread(generate, texts, name=f"generate:{self.spec.name}"),
        )
        if thread is None:
            return cancelled_before_start(len(rendered.token_ids), rendered.text)
        events = reply_events(
            rendered,
            params,
            texts,
            streamer,
            lambda: self._join(thread),
            cancel,
            halt,
            started,
            template_stops,
            template_name,
        )
        return ClosingStream(events, stop=halt.set, wait=lambda: self._join(thread))

    def _launch_batched(
        self,
        batching: Batching,
        rendered: Rendered,
        params: SamplingParams,
        cancel: threading.Event | None,
        template_stops: Sequence[str],
        template_name: str,
    ) -> Iterator[StreamEvent]:
        """Queue for a slot and add the request to the manager (eagerly, as `_launch`). The manager's
        router thread feeds the streamer; this request's slot and its place in the manager are
        given back once, when the stream ends or is closed."""
        started = time.perf_counter()
        cancel = cancel or threading.Event()
        halt = threading.Event()
        texts: Handoff[str] = Handoff()
        streamer = Streamer(self.tokenizer, texts)
        streamer.next_tokens_are_prompt = False  # the manager sends only new tokens
        ended = threading.Event()

        def on_tokens(ids: list[int]) -> None:
            streamer.put(torch.tensor(ids))

        def on_end(error: str | None) -> None:
            if ended.is_set():
                return
            ended.set()
            if error is None:
                streamer.end()  # the text held back for a whole word
            else:
                texts.fail(RuntimeError(error))
            texts.close()

        if not self.slots.acquire(self.spec.name, self.queue_timeout_s, cancel):
            return cancelled_before_start(len(rendered.token_ids), rendered.text)
        try:
            request = batching.submit(rendered.token_ids, params, on_tokens, on_end)
        except BaseException:
            self.slots.release()
            raise
        released = threading.Lock()

        def finish() -> None:
            if released.acquire(blocking=False):  # once, from whichever of close and the end comes first
                batching.cancel(request)  # nothing when it finished: the manager dropped it already
                self.slots.release()

        reading = texts.until(lambda: cancel.is_set() or halt.is_set())
        events = reply_events(
            rendered,
            params,
            texts,
            streamer,
            finish,
            cancel,
            halt,
            started,
            template_stops,
            template_name,
            reading=reading,
        )
        return ClosingStream(events, stop=halt.set, wait=finish)

    def _join(self, thread: threading.Thread) -> None:
        thread.join(self.join_timeout_s)
        if thread.is_alive():
            log.error("generate thread %s did not stop within %.0f s", thread.name, self.join_timeout_s)

    def _generate(self, token_ids: list[int], params: SamplingParams, streamer: Streamer, halt: Halt) -> None:
        """Runs in its own thread because generate blocks until the last token; the consumer reads
        the hand-off meanwhile (run_in_thread reports a failure there and always ends it)."""
        try:
            generate_reply(self.model, self.tokenizer, token_ids, params, streamer, halt)
        except BaseException:
            log.exception("generation failed for %s", self.spec.name)
            raise
        finally:
            self.slots.release()


def _model_context(model: Any, tokenizer: Any) -> int:
    for value in (getattr(model.config, "max_position_embeddings", None), getattr(tokenizer, "model_max_length", None)):
        if isinstance(value, int) and 16 <= value <= 10_000_000:
            return value
    return 2048


def load_transformers(spec: ModelSpec, settings: Settings) -> Any:
    """Registry loader: weights for `spec`, shared by all its variants, on continuous batching where
    the manager serves them (the engine line of the status says which way and, if not, why)."""
    import gc
    from importlib.metadata import version

    from webui.models.fingerprint import source_components
    from webui.models.loading import load_weights

    loaded = load_weights(spec, settings.cache_dir)
    context = spec.context_length or _model_context(loaded.model, loaded.tokenizer)
    batching, why_not = start_batching(loaded.model, loaded.tokenizer, spec, settings, context)

    def make_backend(variant: ModelSpec, slots: Slots) -> TransformersBackend:
        return TransformersBackend(
            variant,
            loaded.model,
            loaded.tokenizer,
            slots,
            queue_timeout_s=settings.queue_timeout_s,
            join_timeout_s=settings.thread_join_timeout_s,
            batching=batching,
        )

    def close() -> None:
        if batching is not None:
            batching.close()
        loaded.model = loaded.tokenizer = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    return Weights(
        make_backend,
        device=loaded.device,
        from_cache=loaded.from_cache,
        close=close,
        engine=_engine_status(batching, why_not, _cache_note(batching, spec, loaded)),
        # A batching engine's slots (as vLLM's and llama.cpp's), else one generate() thread each
        concurrency=settings.batch_slots if batching is not None else settings.max_concurrency,
        identity=source_components(
            spec.source, str(loaded.model.dtype).removeprefix("torch."), f"transformers {version('transformers')}"
        ),
    )


def default_concurrency(settings: Settings) -> int:
    """Slots for a batching engine where continuous batching will serve (auto: where a GPU is; a
    model that ends up on generate() is resized to --max-concurrency when it loads)."""
    from webui.engine.batching_load import batching_wanted
    from webui.engine.zerogpu import zero_gpu_requested

    device = "cuda" if torch.cuda.is_available() else "cpu"
    wanted = batching_wanted(settings.transformers_batching, device) and not zero_gpu_requested()
    return settings.batch_slots if wanted else settings.max_concurrency


BATCHED = "continuous batching"
UNBATCHED = "one generate() per reply"


def _engine_status(batching: Batching | None, why_not: str, cache_note: str = "") -> str:
    """The status's engine: "transformers", or which path serves and why where batching was asked for."""
    if batching is not None:
        return f"transformers ({BATCHED}{batching.describe()}{cache_note})"
    return f"transformers ({UNBATCHED}: {why_not})" if why_not else "transformers"


def _cache_note(batching: Batching | None, spec: ModelSpec, loaded: Any) -> str:
    """Said at load when the model's context is larger than its paged cache: a reply (prompt and
    new tokens) is then capped at the cache, and a longer one is refused with the same reason."""
    if batching is None:
        return ""
    context = spec.context_length or _model_context(loaded.model, loaded.tokenizer)
    if batching.kv_cache_tokens >= context:
        return ""
    log.warning(
        "%s: its context of %d tokens is larger than its paged KV cache of %d tokens; a prompt and its reply are "
        "capped at the cache (raise kv_cache_tokens or --transformers-kv-cache-tokens)",
        spec.name,
        context,
        batching.kv_cache_tokens,
    )
    return f"; context capped at the paged KV cache's {batching.kv_cache_tokens} tokens, the model's is {context}"

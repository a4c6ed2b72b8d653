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
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import Any

import torch

from webui.config import Settings
from webui.engine.base import (
    Backend,
    ClosingStream,
    Slots,
    Weights,
    cancelled_before_start,
    decode_rate,
    start_in_slot,
)
from webui.engine.batching import Batching
from webui.engine.batching_load import start_batching
from webui.engine.hf_generate import Halt, Streamer, generation_config, sampling_processors
from webui.engine.stops import StopFilter, shown_until_stop
from webui.engine.templates import PromptBuilder, Rendered, Template
from webui.engine.zerogpu import generate as generate_on_device
from webui.errors import ParamError
from webui.handoff import Handoff, run_in_thread
from webui.models.loading import import_transformers
from webui.models.specs import ModelSpec
from webui.types import Finished, FinishReason, Message, Route, SamplingParams, StreamEvent

import_transformers()  # under a lock: another loader thread may be importing transformers right now
from transformers import StoppingCriteriaList  # noqa: E402

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
        events = self._events(
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
        events = self._events(
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

    def _events(
        self,
        rendered: Rendered,
        params: SamplingParams,
        texts: Handoff[str],
        streamer: Streamer,
        wait: Callable[[], None],
        cancel: threading.Event,
        halt: threading.Event,
        started: float,
        template_stops: Sequence[str],
        template_name: str,
        reading: Iterable[str] | None = None,
    ) -> Generator[StreamEvent, None, None]:
        reason: FinishReason | None = None
        error: str | None = None
        stops = StopFilter((*params.stop, *template_stops))
        try:
            # A stream cut short (Stop) may have held back half a stop string: not shown then.
            if (
                yield from shown_until_stop(texts if reading is None else reading, stops, complete=lambda: texts.ended)
            ):
                reason = FinishReason.STOP
        except Exception as exc:  # the generate thread failed; reported as the finish
            reason, error = FinishReason.ERROR, f"{type(exc).__name__}: {exc}"
        if reason is None:
            if cancel.is_set():
                reason = FinishReason.CANCELLED
            elif streamer.generated >= params.max_new_tokens:
                reason = FinishReason.LENGTH
            else:
                reason = FinishReason.STOP
        final = self._finished(reason, rendered, streamer, started, error, template_name)
        # When the caller sees Finished, the model is idle and the slot is free.
        halt.set()
        wait()
        yield final

    def _join(self, thread: threading.Thread) -> None:
        thread.join(self.join_timeout_s)
        if thread.is_alive():
            log.error("generate thread %s did not stop within %.0f s", thread.name, self.join_timeout_s)

    def _finished(
        self,
        reason: FinishReason,
        rendered: Rendered,
        streamer: Streamer,
        started: float,
        error: str | None,
        template_name: str,
    ) -> Finished:
        first = streamer.first_token_at
        return Finished(
            reason=reason,
            prompt_tokens=len(rendered.token_ids),
            completion_tokens=streamer.generated,
            ttft_s=(first - started) if first is not None else None,
            tokens_per_s=decode_rate(streamer.generated, first, time.perf_counter()),
            error=error,
            prompt=rendered.text,
            extra={"dropped_messages": rendered.dropped_messages, "template": template_name},
        )

    def _generate(self, token_ids: list[int], params: SamplingParams, streamer: Streamer, halt: Halt) -> None:
        """Runs in its own thread because generate blocks until the last token; the consumer reads
        the hand-off meanwhile (run_in_thread reports a failure there and always ends it)."""
        params = params.effective()  # a 1e-45 temperature is greedy: dividing by it overflows the logits
        try:
            device = next(self.model.parameters()).device
            input_ids = torch.tensor([token_ids], device=device)
            with torch.inference_mode():
                # On a ZeroGPU Space this runs inside spaces.GPU; elsewhere it is model.generate.
                generate_on_device(
                    self.model,
                    input_ids=input_ids,
                    attention_mask=torch.ones_like(input_ids),
                    generation_config=generation_config(self.model, self.tokenizer, params),
                    logits_processor=sampling_processors(params),
                    stopping_criteria=StoppingCriteriaList([halt]),
                    streamer=streamer,
                )
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
    batching, why_not = start_batching(loaded.model, loaded.tokenizer, spec, settings)

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
        engine=_engine_status(batching is not None, why_not, _cache_note(batching, spec, loaded)),
        # A batching engine's slots (as vLLM's and llama.cpp's), else one generate() thread each
        concurrency=settings.vllm_concurrency if batching is not None else settings.max_concurrency,
        identity=source_components(
            spec.source, str(loaded.model.dtype).removeprefix("torch."), f"transformers {version('transformers')}"
        ),
    )


def default_concurrency(settings: Settings) -> int:
    """Slots for a batching engine where continuous batching is on (a model that falls back to
    generate() is resized to --max-concurrency when it loads)."""
    from webui.engine.zerogpu import zero_gpu_requested

    return (
        settings.vllm_concurrency
        if settings.transformers_batching and not zero_gpu_requested()
        else settings.max_concurrency
    )


BATCHED = "continuous batching"
UNBATCHED = "one generate() per reply"


def _engine_status(batched: bool, why_not: str, cache_note: str = "") -> str:
    """The status's engine: "transformers", or which path serves and why where batching was asked for."""
    if batched:
        return f"transformers ({BATCHED}{cache_note})"
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

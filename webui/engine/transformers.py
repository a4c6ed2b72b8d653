"""Local generation with Hugging Face transformers.

Each request gets its own streamer, cancel event and generate thread; nothing request-shaped lives
on the shared weights, so concurrent users never see each other's tokens.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Generator, Iterator, Sequence
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
from webui.engine.stops import StopFilter, shown_until_stop
from webui.engine.templates import PromptBuilder, Rendered, Template
from webui.engine.zerogpu import generate as generate_on_device
from webui.handoff import Handoff, run_in_thread
from webui.models.loading import import_transformers
from webui.models.specs import ModelSpec
from webui.types import Finished, FinishReason, Message, SamplingParams, StreamEvent

import_transformers()  # under a lock: another loader thread may be importing transformers right now
from transformers import (  # noqa: E402
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
    TemperatureLogitsWarper,
    TextStreamer,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

log = logging.getLogger(__name__)


class _Streamer(TextStreamer):
    """Decodes the generated tokens into text (transformers holds text back until it is safe to
    show, e.g. a whole word) and hands it over; also counts the tokens and notes when the first
    one came."""

    def __init__(self, tokenizer: Any, handoff: Handoff[str]) -> None:
        super().__init__(tokenizer, skip_prompt=True, skip_special_tokens=True)
        self.handoff = handoff
        self.generated = 0
        self.first_token_at: float | None = None

    def put(self, value: torch.Tensor) -> None:
        if not (self.skip_prompt and self.next_tokens_are_prompt):
            self.generated += int(value.numel())
            if self.first_token_at is None:
                self.first_token_at = time.perf_counter()
        super().put(value)

    def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
        if text:
            self.handoff.put(text)


class _Halt(StoppingCriteria):
    """Stops generate at the next decoding step once any of the events is set."""

    def __init__(self, *events: threading.Event) -> None:
        self.events = events

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        stop = any(e.is_set() for e in self.events)
        return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)


class _SeededSampler(LogitsProcessor):
    """Samples with a per-request torch.Generator and leaves only the chosen token finite, so that
    greedy decoding picks it. The global RNG is never touched: two concurrent requests with the same
    seed each get the same output as they would alone."""

    def __init__(self, seed: int) -> None:
        self.generator = torch.Generator(device="cpu").manual_seed(seed)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        probs = torch.softmax(scores.float(), dim=-1).cpu()
        choice = torch.multinomial(probs, 1, generator=self.generator).to(scores.device)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, choice, 0.0)


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
    ) -> None:
        self.spec = spec
        self.model = model
        self.tokenizer = tokenizer
        self.slots = slots
        self.queue_timeout_s = queue_timeout_s
        self.join_timeout_s = join_timeout_s
        self.prompts = PromptBuilder(spec, tokenizer, spec.context_length or _model_context(model, tokenizer))
        self.template: Template = self.prompts.template

    @property
    def context_length(self) -> int:
        return self.prompts.context_length

    def render_prompt(self, messages: Sequence[Message]) -> str:
        return self.prompts.render(messages)

    def prepare(self, messages: Sequence[Message], params: SamplingParams) -> Rendered:
        """Validate and render: everything that can be refused before any work starts."""
        return self.prompts.prepare(messages, params)

    def stream(
        self, messages: Sequence[Message], params: SamplingParams, cancel: threading.Event | None = None
    ) -> Iterator[StreamEvent]:
        """Checks, queueing and the thread start happen here, eagerly, so that errors reach the
        caller before any event; the returned iterator only reads the tokens."""
        rendered = self.prepare(messages, params)
        return self._launch(rendered, params, cancel, self.template.stop, self.template.name)

    def complete(
        self, prompt: str, params: SamplingParams, cancel: threading.Event | None = None
    ) -> Iterator[StreamEvent]:
        """Raw completion (the /v1/completions route): no template, no template stop strings."""
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
        started = time.perf_counter()
        cancel = cancel or threading.Event()
        halt = threading.Event()  # set on a stop string, an error or an early close; `cancel` is the caller's
        texts: Handoff[str] = Handoff()
        streamer = _Streamer(self.tokenizer, texts)

        def generate() -> None:
            self._generate(rendered.token_ids, params, streamer, _Halt(cancel, halt))

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
            rendered, params, texts, streamer, thread, cancel, halt, started, template_stops, template_name
        )
        return ClosingStream(events, stop=halt.set, wait=lambda: self._join(thread))

    def _events(
        self,
        rendered: Rendered,
        params: SamplingParams,
        texts: Handoff[str],
        streamer: _Streamer,
        thread: threading.Thread,
        cancel: threading.Event,
        halt: threading.Event,
        started: float,
        template_stops: Sequence[str],
        template_name: str,
    ) -> Generator[StreamEvent, None, None]:
        reason: FinishReason | None = None
        error: str | None = None
        try:
            if (yield from shown_until_stop(texts, StopFilter((*params.stop, *template_stops)))):
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
        self._join(thread)
        yield final

    def _join(self, thread: threading.Thread) -> None:
        thread.join(self.join_timeout_s)
        if thread.is_alive():
            log.error("generate thread %s did not stop within %.0f s", thread.name, self.join_timeout_s)

    def _finished(
        self,
        reason: FinishReason,
        rendered: Rendered,
        streamer: _Streamer,
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

    def _generate(self, token_ids: list[int], params: SamplingParams, streamer: _Streamer, halt: _Halt) -> None:
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
                    generation_config=self._generation_config(params),
                    logits_processor=_sampling_processors(params),
                    stopping_criteria=StoppingCriteriaList([halt]),
                    streamer=streamer,
                )
        except BaseException:
            log.exception("generation failed for %s", self.spec.name)
            raise
        finally:
            self.slots.release()

    def _generation_config(self, params: SamplingParams) -> GenerationConfig:
        base = self.model.generation_config
        eos = base.eos_token_id if base is not None else None
        eos = eos if eos is not None else self.tokenizer.eos_token_id
        pad = (base.pad_token_id if base is not None else None) or self.tokenizer.pad_token_id
        return GenerationConfig(
            max_new_tokens=params.max_new_tokens,
            do_sample=False,
            repetition_penalty=params.repetition_penalty,
            min_new_tokens=params.max_new_tokens if params.ignore_eos else 0,
            eos_token_id=eos,
            pad_token_id=pad if pad is not None else eos,
        )


def _sampling_processors(params: SamplingParams) -> LogitsProcessorList:
    if params.greedy:
        return LogitsProcessorList()
    processors: list[LogitsProcessor] = [TemperatureLogitsWarper(params.temperature)]
    if params.top_k:
        processors.append(TopKLogitsWarper(params.top_k))
    if params.top_p < 1.0:
        processors.append(TopPLogitsWarper(params.top_p))
    seed = params.seed if params.seed is not None else secrets.randbits(63)
    processors.append(_SeededSampler(seed))
    return LogitsProcessorList(processors)


def _model_context(model: Any, tokenizer: Any) -> int:
    for value in (getattr(model.config, "max_position_embeddings", None), getattr(tokenizer, "model_max_length", None)):
        if isinstance(value, int) and 16 <= value <= 10_000_000:
            return value
    return 2048


def load_transformers(spec: ModelSpec, settings: Settings) -> Any:
    """Registry loader: weights for `spec`, shared by all its variants."""
    import gc
    from importlib.metadata import version

    from webui.models.fingerprint import source_components
    from webui.models.loading import load_weights

    loaded = load_weights(spec, settings.cache_dir)

    def make_backend(variant: ModelSpec, slots: Slots) -> TransformersBackend:
        return TransformersBackend(
            variant,
            loaded.model,
            loaded.tokenizer,
            slots,
            queue_timeout_s=settings.queue_timeout_s,
            join_timeout_s=settings.thread_join_timeout_s,
        )

    def close() -> None:
        loaded.model = loaded.tokenizer = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    return Weights(
        make_backend,
        device=loaded.device,
        from_cache=loaded.from_cache,
        close=close,
        identity=source_components(
            spec.source, str(loaded.model.dtype).removeprefix("torch."), f"transformers {version('transformers')}"
        ),
    )

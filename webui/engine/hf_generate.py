"""The pieces of one `generate()` call per request, the transformers backend's path wherever
continuous batching does not serve (webui.engine.transformers): the halt on Stop, the per-request
seeded sampler, the generation config and the call itself. Both paths share the streamer that turns
token ids into text and the events read from it (`reply_events`). Each request gets its own of
every one; nothing here is shared between requests.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any

import torch

from webui.engine.base import decode_rate
from webui.engine.stops import StopFilter, shown_until_stop
from webui.engine.templates import Rendered
from webui.engine.zerogpu import generate as generate_on_device
from webui.handoff import Handoff
from webui.models.loading import import_transformers
from webui.types import Finished, FinishReason, SamplingParams, StreamEvent

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


class Streamer(TextStreamer):
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


class Halt(StoppingCriteria):
    """Stops generate at the next decoding step once any of the events is set."""

    def __init__(self, *events: threading.Event) -> None:
        self.events = events

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        stop = any(e.is_set() for e in self.events)
        return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)


class SeededSampler(LogitsProcessor):
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


def sampling_processors(params: SamplingParams) -> LogitsProcessorList:
    """Temperature, top_k, top_p and the seeded draw (a fresh seed when none is given); nothing for
    greedy decoding."""
    if params.greedy:
        return LogitsProcessorList()
    processors: list[LogitsProcessor] = [TemperatureLogitsWarper(params.temperature)]
    if params.top_k:
        processors.append(TopKLogitsWarper(params.top_k))
    if params.top_p < 1.0:
        processors.append(TopPLogitsWarper(params.top_p))
    seed = params.seed if params.seed is not None else secrets.randbits(63)
    processors.append(SeededSampler(seed))
    return LogitsProcessorList(processors)


def generation_config(model: Any, tokenizer: Any, params: SamplingParams) -> GenerationConfig:
    """Greedy over what the processors left, with the request's length, repetition penalty and end
    of sequence (held back for ignore_eos); the model's own end and pad tokens, else the tokenizer's."""
    base = model.generation_config
    eos = base.eos_token_id if base is not None else None
    eos = eos if eos is not None else tokenizer.eos_token_id
    pad = (base.pad_token_id if base is not None else None) or tokenizer.pad_token_id
    return GenerationConfig(
        max_new_tokens=params.max_new_tokens,
        do_sample=False,
        repetition_penalty=params.repetition_penalty,
        min_new_tokens=params.max_new_tokens if params.ignore_eos else 0,
        eos_token_id=eos,
        pad_token_id=pad if pad is not None else eos,
    )


def generate_reply(
    model: Any, tokenizer: Any, token_ids: list[int], params: SamplingParams, streamer: Streamer, halt: Halt
) -> None:
    """One reply by `model.generate` (inside spaces.GPU on a ZeroGPU Space), its tokens to `streamer`."""
    params = params.effective()  # a 1e-45 temperature is greedy: dividing by it overflows the logits
    device = next(model.parameters()).device
    input_ids = torch.tensor([token_ids], device=device)
    with torch.inference_mode():
        generate_on_device(
            model,
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            generation_config=generation_config(model, tokenizer, params),
            logits_processor=sampling_processors(params),
            stopping_criteria=StoppingCriteriaList([halt]),
            streamer=streamer,
        )


def reply_events(
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
    """The events of one reply (either path), read from its streamer's text: what shows until a stop
    string, then Finished with why it ended; `wait` frees the model and the slot before Finished."""
    reason: FinishReason | None = None
    error: str | None = None
    stops = StopFilter((*params.stop, *template_stops))
    try:
        # A stream cut short (Stop) may have held back half a stop string: not shown then.
        if (yield from shown_until_stop(texts if reading is None else reading, stops, complete=lambda: texts.ended)):
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
    final = _finished(reason, rendered, streamer, started, error, template_name)
    # When the caller sees Finished, the model is idle and the slot is free.
    halt.set()
    wait()
    yield final


def _finished(
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

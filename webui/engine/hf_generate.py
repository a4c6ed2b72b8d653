"""The pieces of one `generate()` call per request, the transformers backend's path wherever
continuous batching does not serve (webui.engine.transformers): the streamer that turns token ids
into text (the batching path feeds it too), the halt on Stop, the per-request seeded sampler and
the generation config. Each request gets its own of every one; nothing here is shared.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any

import torch

from webui.handoff import Handoff
from webui.models.loading import import_transformers
from webui.types import SamplingParams

import_transformers()  # under a lock: another loader thread may be importing transformers right now
from transformers import (  # noqa: E402
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
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

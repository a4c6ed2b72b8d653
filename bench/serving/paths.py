"""The four ways one request can travel, each timed from the caller's side:

    raw     the engine alone, the reference: model.generate on the prompt's token ids in this process
            (transformers), or the app's own vLLM server for the model asked directly over HTTP with
            those ids (bench.serving.attach)
    engine  the backend's stream(), in this process: template, context fitting, hand-offs, stop strings
            (for vLLM, against the app's own server too)
    gradio  the UI's Direct chat event over HTTP, read as the page reads it (bench.serving.ui_client),
            against the real server
    api     POST /v1/chat/completions with stream=True through the openai client, same server

Every runner returns a `Sample`: when each piece of text arrived, how many tokens were generated
and by whose count. The same greedy request goes down every path, so their texts should match.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from bench.stats import median, rate
from webui.errors import Overloaded
from webui.types import Finished, Message, SamplingParams, TextDelta

T = TypeVar("T")
CURSOR = "▌"  # webui.ui.views shows it after a reply that is still streaming


@dataclass(frozen=True)
class Request:
    model: str
    prompt: str
    max_tokens: int
    ignore_eos: bool = True

    def messages(self) -> list[Message]:
        return [Message("user", self.prompt)]


@dataclass
class Sample:
    path: str
    model: str
    total_s: float  # request sent -> stream finished
    ttft_s: float | None = None  # request sent -> first visible text (raw: first token)
    tokens: int | None = None
    counted_by: str = ""  # generate | engine | usage | ui-stats
    chunk_times: list[float] = field(default_factory=list)  # arrival of each piece of text, from the start
    text: str = ""
    finish: str | None = None
    error: str | None = None
    rejected: bool = False  # refused for load (HTTP 429 / a full queue), as opposed to failed
    server_ttft_s: float | None = None  # the engine's own first-token time, where the path reports it

    @property
    def tokens_per_s(self) -> float | None:
        return rate(self.tokens, self.total_s) if self.error is None else None

    def as_dict(self, keep_text: bool = False) -> dict[str, Any]:
        data = asdict(self)
        data["tokens_per_s"] = self.tokens_per_s
        data["chunk_times"] = [round(t, 4) for t in self.chunk_times]
        if not keep_text:
            data["text"] = self.text[:80]
        return data


def greedy_params(backend: Any, request: Request) -> SamplingParams:
    """The model entry's defaults (its stop strings stay, as on the UI and API paths) made greedy,
    with a fixed length."""
    return backend.default_params().replace(
        temperature=0.0,
        top_p=1.0,
        top_k=0,
        repetition_penalty=1.0,
        max_new_tokens=request.max_tokens,
        ignore_eos=request.ignore_eos,
        seed=None,
    )


# ---- raw -------------------------------------------------------------------------------------------
class _TokenClock:
    """A transformers streamer that only notes when each new token exists (the first `put` is the
    prompt). Cheaper than any text streamer, so the raw path pays nothing for being watched."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.times: list[float] = []
        self._prompt_seen = False

    def put(self, value: Any) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.times.append(time.perf_counter() - self.start)

    def end(self) -> None:
        pass


def in_fresh_thread(fn: Callable[[], T]) -> T:
    """Run `fn` in a new thread and return its result. The engine runs every generation in a new
    thread; the raw reference does the same, so that both get the same OpenMP thread team set-up.
    (On the contended 2-core machine, torch calls from the long-lived main thread stalled for
    seconds more often than calls from fresh threads.)"""
    box: list[Any] = []

    def target() -> None:
        try:
            box.append((True, fn()))
        except BaseException as exc:  # re-raised in the caller
            box.append((False, exc))

    thread = threading.Thread(target=target, name="bench-raw", daemon=True)
    thread.start()
    thread.join()
    ok, value = box[0]
    if not ok:
        raise value
    return value


def run_raw(backend: Any, request: Request) -> Sample:
    if getattr(backend, "server", None) is not None:  # served by vLLM: its own server, without our code
        return run_vllm_direct(backend, request)
    return in_fresh_thread(lambda: _run_raw(backend, request))


_DIRECT_CLIENTS: dict[str, Any] = {}
_DIRECT_LOCK = threading.Lock()


def run_vllm_direct(backend: Any, request: Request) -> Sample:
    """The vLLM server the backend uses, asked directly: the same prompt token ids and settings
    the backend would send, streamed with plain httpx. What the app adds is measured against this."""
    import json

    import httpx

    params = greedy_params(backend, request)
    rendered = backend.prompts.prepare(request.messages(), params)
    body = {
        "model": backend.spec.remote_model,
        "prompt": rendered.token_ids,
        "max_tokens": request.max_tokens,
        "temperature": 0.0,
        "ignore_eos": request.ignore_eos,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    sample = Sample("raw", request.model, 0.0, counted_by="usage")
    parts: list[str] = []
    # one kept-alive client per server, as the backend has: a new httpx client per request costs
    # ~40 ms (its SSL context), which would be charged to the engine alone
    url = backend.server.base_url
    with _DIRECT_LOCK:  # the many-users section sends from many threads at once
        client = _DIRECT_CLIENTS.get(url) or _DIRECT_CLIENTS.setdefault(url, httpx.Client(timeout=600))
    start = time.perf_counter()
    with client.stream("POST", f"{url}/v1/completions", json=body) as response:
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: ") :])
            if chunk.get("usage"):
                sample.tokens = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices", []):
                if choice.get("text"):
                    sample.chunk_times.append(time.perf_counter() - start)
                    parts.append(choice["text"])
                sample.finish = choice.get("finish_reason") or sample.finish
    return _finish(sample, start, parts)


def _run_raw(backend: Any, request: Request) -> Sample:
    import torch
    from transformers import GenerationConfig

    model, tokenizer = backend.model, backend.tokenizer
    ids = prompt_ids(backend, request)
    eos = model.generation_config.eos_token_id if model.generation_config is not None else tokenizer.eos_token_id
    config = GenerationConfig(
        max_new_tokens=request.max_tokens,
        min_new_tokens=request.max_tokens if request.ignore_eos else 0,
        do_sample=False,
        repetition_penalty=1.0,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos,
    )
    start = time.perf_counter()
    clock = _TokenClock(start)
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config, streamer=clock
        )
    total = time.perf_counter() - start
    new = out[0, ids.shape[1] :]
    return Sample(
        "raw",
        request.model,
        total,
        clock.times[0] if clock.times else None,
        int(new.numel()),
        "generate",
        clock.times,
        tokenizer.decode(new, skip_special_tokens=True),
    )


def prompt_ids(backend: Any, request: Request) -> Any:
    """The engine's own rendering of the prompt, as a tensor on the model's device."""
    import torch

    rendered = backend.prepare(request.messages(), greedy_params(backend, request))
    device = next(backend.model.parameters()).device
    return torch.tensor([rendered.token_ids], device=device)


def prefill_s(backend: Any, request: Request, repeats: int) -> float | None:
    """Median time of one forward pass over the prompt: the floor under any time to first token
    (None for a model in a vLLM server: its first-token time on the raw path says the same)."""
    if getattr(backend, "model", None) is None:
        return None
    return in_fresh_thread(lambda: _prefill_s(backend, request, repeats))


def _prefill_s(backend: Any, request: Request, repeats: int) -> float | None:
    import torch

    ids = prompt_ids(backend, request)
    times = []
    with torch.inference_mode():
        for _ in range(repeats + 1):  # the first pass warms up and is dropped
            start = time.perf_counter()
            # logits for the last position only, as generate asks for: the full logits of a
            # 262k-token vocabulary (Gemma 3) at every prompt position would double the time.
            backend.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True, logits_to_keep=1)
            if ids.device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return median(times[1:])


# ---- engine ----------------------------------------------------------------------------------------
def run_engine(backend: Any, request: Request) -> Sample:
    start = time.perf_counter()
    sample = Sample("engine", request.model, 0.0, counted_by="engine")
    parts: list[str] = []
    try:
        stream = backend.stream(request.messages(), greedy_params(backend, request))
    except Overloaded as exc:  # no free generation slot within the queue timeout
        sample.error, sample.rejected = f"overloaded: {exc}", True
        return _finish(sample, start, parts)
    try:
        for event in stream:
            if isinstance(event, TextDelta) and event.text:
                sample.chunk_times.append(time.perf_counter() - start)
                parts.append(event.text)
            elif isinstance(event, Finished):
                sample.tokens, sample.finish = event.completion_tokens, event.reason.value
                sample.error, sample.server_ttft_s = event.error, event.ttft_s
    finally:
        stream.close()
    return _finish(sample, start, parts)


def _finish(sample: Sample, start: float, parts: Sequence[str]) -> Sample:
    sample.total_s = time.perf_counter() - start
    sample.text = "".join(parts)
    sample.ttft_s = sample.chunk_times[0] if sample.chunk_times else None
    return sample


# ---- api -------------------------------------------------------------------------------------------
def api_client(base_url: str, timeout_s: float = 600.0) -> Any:
    from openai import OpenAI

    # No retries: a 429 is a figure to report, not something to hide by asking again.
    return OpenAI(base_url=base_url, api_key="bench", max_retries=0, timeout=timeout_s)


def run_api(client: Any, request: Request) -> Sample:
    import openai

    start = time.perf_counter()
    sample = Sample("api", request.model, 0.0, counted_by="usage")
    parts: list[str] = []
    try:
        stream = client.chat.completions.create(
            model=request.model,
            messages=[m.as_dict() for m in request.messages()],
            stream=True,
            max_tokens=request.max_tokens,
            temperature=0.0,
            top_p=1.0,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": request.ignore_eos, "repetition_penalty": 1.0, "top_k": 0},
        )
        for chunk in stream:
            if chunk.usage is not None:
                sample.tokens = chunk.usage.completion_tokens
            for choice in chunk.choices:
                if choice.delta.content:
                    sample.chunk_times.append(time.perf_counter() - start)
                    parts.append(choice.delta.content)
                sample.finish = choice.finish_reason or sample.finish
    except openai.RateLimitError as exc:
        sample.error, sample.rejected = f"429: {exc.message}", True
    except openai.OpenAIError as exc:
        sample.error = f"{type(exc).__name__}: {exc}"
    return _finish(sample, start, parts)

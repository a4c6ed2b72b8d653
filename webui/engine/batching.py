"""Continuous batching for weights served by transformers: one `ContinuousBatchingManager` per set
of weights (transformers' own engine behind `transformers serve`), which decodes every running
request of every variant in one forward pass per step, over a paged KV cache.

The manager batches; we keep the contract of every engine: our prompt token ids go in as they are,
text comes out through the same streamer and stop filter as on the generate() path, and Stop ends a
request at the next step (`cancel_request`), freeing its cache blocks.

Sampling. The manager itself honours only temperature, top_k and top_p per request, and only when
the manager was created sampling (greedy and sampled requests cannot share one), and it samples
from the global torch RNG (no per-request seed) and drops the repetition penalty (its processor
does not support batching). So we plug one processor of our own into its logits-processor hook
(`ContinuousBatchingLogitsProcessor`): for each row of the batch it runs the same Hugging Face
processors as the generate() path on that request's own tokens (repetition penalty, temperature,
top_k, top_p, end of sequence held back for ignore_eos) and picks the token greedily or with the
request's own seeded generator, leaving only that token finite; the manager, created greedy, then
takes it. Every setting is therefore honoured per request, with the same seed giving the same text
as on the generate() path. The price: a Python loop over the batch's rows at every step, and a
step that cannot be captured in a CUDA graph (the GPU capture of issue 34 is not done yet).

A failure in one request's sampling (a bad parameter) fails that request alone; an error that ends
the manager's loop fails the requests it held, and the next request starts the loop again.
"""

from __future__ import annotations

import logging
import math
import queue
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from webui.models.loading import import_transformers
from webui.types import SamplingParams

import_transformers()  # under a lock: another loader thread may be importing transformers right now
from transformers import (  # noqa: E402
    GenerationConfig,
    LogitsProcessorList,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)
from transformers.generation.configuration_utils import ContinuousBatchingConfig  # noqa: E402
from transformers.generation.continuous_batching import RequestStatus  # noqa: E402
from transformers.generation.continuous_batching.cb_logits_processors import (  # noqa: E402
    ContinuousBatchingLogitsProcessor,
    ContinuousBatchingLogitsProcessorList,
)

log = logging.getLogger(__name__)
DEFAULT_KV_CACHE_TOKENS = 8192
PAGE_SIZE = 256  # tokens per cache page: the manager's default
_POLL_S = 0.1  # how often the router looks whether the manager's loop is still alive


@dataclass
class Request:
    """One request in the manager: its settings, its own sampling generator, and where its tokens
    go (`on_tokens`, called on the router thread with the new token ids; `on_end` once, with the
    error when it failed)."""

    id: str
    params: SamplingParams
    eos: tuple[int, ...]
    on_tokens: Callable[[list[int]], None]
    on_end: Callable[[str | None], None]
    generator: torch.Generator | None = None
    error: str | None = None  # set by the sampler when this request's row failed
    seen: int = 0
    processors: LogitsProcessorList = field(default_factory=LogitsProcessorList)


class _RowSampler(ContinuousBatchingLogitsProcessor):
    """Chooses each row's token with that request's own settings (see the module docstring). The
    manager calls `prepare_tensor_args` with the rows of the coming step and then, in the same thread
    (synchronous batching, which we ask for), `__call__` on their logits in that order."""

    # Instance attributes: the base class declares them so, and ruff wants no mutable class default
    def __init__(self) -> None:
        self.supported_kwargs: dict[str, type] = {"arena": Request}
        self.ignored_kwargs: tuple[str, ...] = ()
        self._rows: list[Any] = []

    def fill_defaults(self, int32_tensor: torch.Tensor) -> None:
        int32_tensor.fill_(0)

    def prepare_tensor_args(self, requests_with_new_token: list[Any]) -> torch.Tensor:
        self._rows = [future.state for future in requests_with_new_token]
        return torch.zeros(len(self._rows), dtype=torch.int32)

    def __call__(self, scores: torch.Tensor, tensor_arg: torch.Tensor) -> torch.Tensor:
        chosen = torch.full_like(scores, float("-inf"))
        for row, state in enumerate(self._rows[: scores.shape[0]]):
            request: Request = state.logit_processor_kwargs["arena"]
            try:
                token = _choose(request, state.initial_tokens + state.generated_tokens, scores[row : row + 1])
            except Exception as exc:  # this request alone fails: an exception here would end every request
                request.error = request.error or f"{type(exc).__name__}: {exc}"
                token = 0  # any token: the router ends the request before it is shown
            chosen[row, token] = 0.0
        return chosen


def _choose(request: Request, history: list[int], scores: torch.Tensor) -> int:
    """The generate() path's processors, in its order, on one row; then argmax or a seeded draw."""
    params = request.params
    ids = torch.tensor([history], device=scores.device)
    scores = request.processors(ids, scores)  # type: ignore[arg-type]  # a LongTensor at run time
    if params.ignore_eos and request.eos:
        scores[:, list(request.eos)] = float("-inf")  # as min_new_tokens does on the generate() path
    if params.greedy:
        return int(scores.argmax(dim=-1))
    probs = torch.softmax(scores.float(), dim=-1).cpu()
    return int(torch.multinomial(probs, 1, generator=request.generator))


def _processors(params: SamplingParams) -> LogitsProcessorList:
    processors: list[Any] = []
    if params.repetition_penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(params.repetition_penalty))
    if not params.greedy:
        processors.append(TemperatureLogitsWarper(params.temperature))
        if params.top_k:
            processors.append(TopKLogitsWarper(params.top_k))
        if params.top_p < 1.0:
            processors.append(TopPLogitsWarper(params.top_p))
    return LogitsProcessorList(processors)


def whole_pages(tokens: int) -> int:
    """A cache size in tokens, up to whole pages: what the manager allocates."""
    return PAGE_SIZE * math.ceil(tokens / PAGE_SIZE)


class Batching:
    """The manager of one set of weights, and the thread that routes its outputs to the requests."""

    def __init__(self, model: Any, eos: Sequence[int], kv_cache_tokens: int, name: str) -> None:
        self.name = name
        self.eos = tuple(eos)
        self.kv_cache_tokens = whole_pages(kv_cache_tokens)
        config = ContinuousBatchingConfig(
            num_blocks=self.kv_cache_tokens // PAGE_SIZE,
            page_size=PAGE_SIZE,
            use_async_batching=False,  # our sampler reads the rows of the step it is called for
            use_cuda_graph=False,  # our sampler is Python per row: not capturable
            allow_block_sharing=False,  # a cache hit would skip history our sampler still sees; keeps it simple
            auto_switch_to_flash=False,  # the generate() path's attention, for the same answers
        )
        generation = GenerationConfig(do_sample=False, eos_token_id=-1, pad_token_id=0)
        self.manager = model.init_continuous_batching(generation_config=generation, continuous_batching_config=config)
        hook = ContinuousBatchingLogitsProcessorList(LogitsProcessorList([_RowSampler()]))
        hook.tensors_required = 1  # one int32 row of arguments for our sampler (unused, but reserved)
        hook.do_processing = True
        self.manager.logit_processor = hook
        self._lock = threading.Lock()
        self._requests: dict[str, Request] = {}
        self._closed = threading.Event()
        self._start_loop()
        self._router = threading.Thread(target=self._route, name=f"batching:{name}", daemon=True)
        self._router.start()

    def _start_loop(self) -> None:
        """The manager's loop, started from a daemon thread: transformers' loop thread takes its
        daemon flag from its starter, and a non-daemon one keeps a script that never closes its
        registry from exiting."""

        failed: list[BaseException] = []

        def start() -> None:
            try:
                with torch.inference_mode():  # thread-local: the loop runs in the mode of its starter
                    self.manager.start()
            except BaseException as exc:  # raised again in the caller's thread, where it belongs
                failed.append(exc)

        starter = threading.Thread(target=start, name=f"batching-start:{self.name}", daemon=True)
        starter.start()
        starter.join()
        if failed:
            raise failed[0]

    # ---- requests ---------------------------------------------------------------------------
    def submit(
        self,
        token_ids: list[int],
        params: SamplingParams,
        on_tokens: Callable[[list[int]], None],
        on_end: Callable[[str | None], None],
        **injected: Any,
    ) -> Request:
        """Add a request (streaming). `injected` goes to the manager as extra logit-processor
        arguments: only tests use it, to make one request fail inside the manager."""
        params = params.effective()
        seed = params.seed if params.seed is not None else secrets.randbits(63)
        request = Request(
            id=f"arena-{secrets.token_hex(8)}",
            params=params,
            eos=self.eos,
            on_tokens=on_tokens,
            on_end=on_end,
            generator=torch.Generator(device="cpu").manual_seed(seed),
            processors=_processors(params),
        )
        with self._lock:
            self._ensure_running()
            self._requests[request.id] = request
        added = self.manager.add_request(
            token_ids,
            request_id=request.id,
            max_new_tokens=params.max_new_tokens,
            streaming=True,
            eos_token_id=-1 if params.ignore_eos else list(self.eos),
            arena=request,
            **injected,
        )
        if added is None:
            self._forget(request.id)
            raise RuntimeError(f"the batching engine of {self.name} refused the request (stopping)")
        return request

    def cancel(self, request: Request) -> None:
        """Stop, a closed tab or a dropped client: the manager drops it at its next step."""
        if self._forget(request.id) is not None:
            self.manager.cancel_request(request.id)

    def active(self) -> int:
        """Requests the manager holds (running or waiting), as its scheduler counts them."""
        processor = self.manager.batch_processor
        if processor is None:
            return 0
        scheduler = processor.scheduler
        return len(scheduler.active_requests) + len(scheduler.waiting_requests) + self.manager.input_queue.qsize()

    def close(self) -> None:
        self._closed.set()
        self.manager.stop(block=True, timeout=30, hard_stop=True)
        self._router.join(5)
        for request in self._drain():
            request.on_end("the model was unloaded")

    # ---- the router thread ------------------------------------------------------------------
    def _route(self) -> None:
        """Runs on its own thread: takes the manager's outputs from its queue and hands each to its
        request, so that no consumer reads (and puts back) another request's outputs."""
        outputs = self.manager.output_router.output_queue
        while not self._closed.is_set():
            try:
                output = outputs.get(timeout=_POLL_S)
            except queue.Empty:
                if not self.manager.is_running():
                    self._fail_all("the batching engine stopped")
                continue
            try:
                self._deliver(output)
            except Exception:  # a consumer's callback failing must not stop the router for the others
                log.exception("%s: delivering an output failed", self.name)

    def _deliver(self, output: Any) -> None:
        with self._lock:
            request = self._requests.get(output.request_id)
        if request is None:
            return  # cancelled already; the manager may still report its last step
        new = output.generated_tokens[request.seen :]
        request.seen += len(new)
        error = request.error or output.error
        if new and error is None:
            request.on_tokens(new)
        if error is not None:
            self.cancel(request)
            request.on_end(error)
        elif output.status >= RequestStatus.FINISHED:
            self._forget(request.id)
            request.on_end(None)

    def _fail_all(self, reason: str) -> None:
        for request in self._drain():
            request.on_end(reason)

    def _drain(self) -> list[Request]:
        with self._lock:
            requests, self._requests = list(self._requests.values()), {}
        return requests

    def _forget(self, request_id: str) -> Request | None:
        with self._lock:
            return self._requests.pop(request_id, None)

    def _ensure_running(self) -> None:
        """A loop that died (an error in a forward pass) failed its requests; start it again."""
        if not self.manager.is_running() and not self._closed.is_set():
            log.warning("%s: the batching loop had stopped; starting it again", self.name)
            self._start_loop()

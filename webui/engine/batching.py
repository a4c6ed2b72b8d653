"""Continuous batching for weights served by transformers: one `ContinuousBatchingManager` per set
of weights (transformers' own engine behind `transformers serve`), which decodes every running
request of every variant in one forward pass per step, over a paged KV cache.

The manager batches; we keep the contract of every engine: our prompt token ids go in as they are,
text comes out through the same streamer and stop filter as on the generate() path, and Stop ends a
request at the next step (`cancel_request`), freeing its cache blocks.

Sampling. The manager itself honours only temperature, top_k and top_p per request, and only when
the manager was created sampling (greedy and sampled requests cannot share one), and it samples
from the global torch RNG (no per-request seed) and drops the repetition penalty (its processor
does not support batching). So each step's tokens are ours: a processor of our own in its
logits-processor hook (`ContinuousBatchingLogitsProcessor`) keeps the step's logits, and once the
step is done we choose every row's token, on all the step's rows at once and each row with its
request's settings, with the arithmetic of the Hugging Face processors the generate() path runs
(repetition penalty over that request's own tokens, temperature, top_k, top_p, end of sequence held
back for ignore_eos), greedily or with the request's own seeded generator, and write it where the
manager reads its tokens. Every setting is therefore honoured per request, with the same seed
giving the same text as on the generate() path.

GPU. Choosing after the step keeps Python out of the function the manager runs for a step, so on a
GPU the manager captures that function in CUDA graphs (`manager_config`; with flash attention where
flash-attn is installed, else with sdpa over padded inputs). The graphs are captured when the
engine starts (`warmup_s`), not in a visitor's first reply.

A failure in one request's sampling (a bad parameter) fails that request alone; an error that ends
the manager's loop fails the requests it held, and the next request starts the loop again.
"""

from __future__ import annotations

import importlib.util
import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from webui.engine.paging import PAGE_SIZE, whole_pages
from webui.models.loading import import_transformers
from webui.types import SamplingParams

import_transformers()  # under a lock: another loader thread may be importing transformers right now
from transformers import GenerationConfig, LogitsProcessorList  # noqa: E402
from transformers.generation.configuration_utils import ContinuousBatchingConfig  # noqa: E402
from transformers.generation.continuous_batching import RequestStatus  # noqa: E402
from transformers.generation.continuous_batching.cb_logits_processors import (  # noqa: E402
    ContinuousBatchingLogitsProcessor,
    ContinuousBatchingLogitsProcessorList,
)

log = logging.getLogger(__name__)
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


class _RowSampler(ContinuousBatchingLogitsProcessor):
    """Keeps each step's logits; the step's tokens are chosen after the forward pass (`choose`).

    The manager calls `prepare_tensor_args` with the rows of the coming step, then, inside the
    function it runs for the step (the one a GPU captures in a CUDA graph), `__call__` on their
    logits. A replayed graph runs no Python, so `__call__` does tensor work only: it copies the
    logits into a buffer that outlives the capture, where every replay writes its step's logits
    again. Our Python sampler reads them there once the step is done."""

    # Instance attributes: the base class declares them so, and ruff wants no mutable class default
    def __init__(self, rows_at_most: int) -> None:
        self.supported_kwargs: dict[str, type] = {"arena": Request}
        self.ignored_kwargs: tuple[str, ...] = ()
        self._rows: list[Any] = []
        self._rows_at_most = rows_at_most
        self._logits: torch.Tensor | None = None

    def fill_defaults(self, int32_tensor: torch.Tensor) -> None:
        int32_tensor.fill_(0)

    def prepare_tensor_args(self, requests_with_new_token: list[Any]) -> torch.Tensor:
        self._rows = [future.state for future in requests_with_new_token]
        return torch.zeros(len(self._rows), dtype=torch.int32)

    def __call__(self, scores: torch.Tensor, tensor_arg: torch.Tensor) -> torch.Tensor:
        kept = self._logits
        if kept is None or kept.shape[0] < scores.shape[0] or kept.shape[1:] != scores.shape[1:]:
            if _capturing(scores):  # a capture always follows a run of the same step, which sized it
                raise RuntimeError("the logits buffer was not sized before the CUDA graph capture")
            rows = max(scores.shape[0], self._rows_at_most)
            kept = self._logits = scores.new_empty((rows, *scores.shape[1:]), dtype=torch.float32)
        kept[: scores.shape[0]].copy_(scores)
        return scores  # the manager's own greedy pick; `choose` replaces it

    def choose(self) -> list[int]:
        """This step's token for each row, each with its request's settings (see the module
        docstring). A row whose settings fail the batched pass is found by running each alone."""
        if not self._rows:
            return []
        assert self._logits is not None, "a step with rows but no logits"
        scores = self._logits[: len(self._rows)]
        rows = [Row(state.logit_processor_kwargs["arena"], state) for state in self._rows]
        try:
            return _choose_rows(rows, scores)
        except Exception:  # some row's settings: each row again alone, so that only that one fails
            return [_alone(row, scores[i : i + 1]) for i, row in enumerate(rows)]


def _flash_installed() -> bool:
    """flash-attn's own package, and not the `kernels` package: with it, the manager would prefer
    flash attention 3 fetched from the Hub, and the app never downloads at run time."""
    return importlib.util.find_spec("flash_attn") is not None and importlib.util.find_spec("kernels") is None


def _capturing(tensor: torch.Tensor) -> bool:
    return tensor.device.type == "cuda" and torch.cuda.is_current_stream_capturing()


@dataclass(frozen=True)
class Row:
    """One row of a step: the request and the manager's state of it (its tokens so far)."""

    request: Request
    state: Any

    def history(self) -> list[int]:
        return self.state.initial_tokens + self.state.generated_tokens


def _alone(row: Row, scores: torch.Tensor) -> int:
    try:
        return _choose_rows([row], scores)[0]
    except Exception as exc:  # this request alone fails: an exception here would end every request
        row.request.error = row.request.error or f"{type(exc).__name__}: {exc}"
        return 0  # any token: the router ends the request before it is shown


def _choose_rows(rows: Sequence[Row], scores: torch.Tensor) -> list[int]:
    """The generate() path's processors (`_process`), then argmax or each request's seeded draw."""
    params = [row.request.params for row in rows]
    scores = _process(rows, scores)
    tokens = [int(token) for token in scores.argmax(dim=-1).tolist()]
    sampled = [i for i, p in enumerate(params) if not p.greedy]
    if sampled:
        probs = torch.softmax(scores[sampled], dim=-1).cpu()  # each request's generator is on the CPU
        for j, i in enumerate(sampled):  # one draw per row: each request's own generator
            tokens[i] = int(torch.multinomial(probs[j : j + 1], 1, generator=rows[i].request.generator))
    return tokens


def _process(rows: Sequence[Row], scores: torch.Tensor) -> torch.Tensor:
    """The generate() path's processors, in its order (repetition penalty, temperature, top_k,
    top_p), on every row at once, each row with its request's settings, on the logits' own device.
    Each is the same elementwise arithmetic as the processor on one row, so a row gets the token it
    would get alone; batching saves a sort per top_p row and the processors' per-call overhead."""
    params = [row.request.params for row in rows]
    scores = scores.to(torch.float32, copy=True)  # as generate() takes the logits
    penalised = [i for i, p in enumerate(params) if p.repetition_penalty != 1.0]
    if penalised:
        histories = [rows[i].history() for i in penalised]
        penalties = [params[i].repetition_penalty for i in penalised]
        index = _on(penalised, scores)
        scores.index_copy_(0, index, _penalise(scores.index_select(0, index), histories, penalties))
    sampled = [i for i, p in enumerate(params) if not p.greedy]
    if sampled:
        index = _on(sampled, scores)
        scores.index_copy_(0, index, _warp(scores.index_select(0, index), [params[i] for i in sampled]))
    held = [list(row.request.eos) if p.ignore_eos else [] for row, p in zip(rows, params, strict=True)]
    if any(held):  # end of sequence held back, as min_new_tokens does on the generate() path
        scores = scores.masked_fill(_marked(held, scores), float("-inf"))
    return scores


def _on(ids: list[int], like: torch.Tensor) -> torch.Tensor:
    """Row ids as an index on the logits' device."""
    return torch.tensor(ids, dtype=torch.long, device=like.device)


def _marked(ids_per_row: list[list[int]], like: torch.Tensor) -> torch.Tensor:
    """A mask shaped as the logits, true at each row's own token ids (those within the logits):
    one scatter for all rows, on the logits' device."""
    vocab = like.shape[-1]
    kept = [[token for token in ids if 0 <= token < vocab] for ids in ids_per_row]
    width = max(1, *(len(ids) for ids in kept))
    index = torch.tensor([ids + [0] * (width - len(ids)) for ids in kept], dtype=torch.long, device=like.device)
    real = torch.tensor(
        [[1.0] * len(ids) + [0.0] * (width - len(ids)) for ids in kept], dtype=like.dtype, device=like.device
    )
    return torch.zeros_like(like).scatter_add_(1, index, real) > 0  # a sum: padding adds 0 to token 0


def _per_row(values: list[float] | list[int], like: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """One value per row as a column, on the logits' device (a CPU column and GPU logits do not mix)."""
    return torch.tensor(values, dtype=dtype or like.dtype, device=like.device).unsqueeze(1)


def _penalise(scores: torch.Tensor, histories: list[list[int]], penalties: list[float]) -> torch.Tensor:
    """RepetitionPenaltyLogitsProcessor per row: each token seen so far is multiplied by the penalty
    when negative and divided by it otherwise; ids beyond the logits are ignored, as there."""
    seen = _marked(histories, scores)
    penalty = _per_row(penalties, scores)
    return torch.where(seen, torch.where(scores < 0, scores * penalty, scores / penalty), scores)


def _warp(scores: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    """TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper per row, in that order. top_p
    drops the least likely tokens while their running sum stays within 1 - top_p, keeping one."""
    minus_inf = float("-inf")
    scores = scores / _per_row([p.temperature for p in params], scores)
    ks = [min(p.top_k, scores.shape[-1]) for p in params]
    if any(ks):
        top_k = _per_row(ks, scores, torch.long)
        kth = torch.topk(scores, max(ks), dim=-1).values.gather(1, (top_k - 1).clamp(min=0))
        kth = kth.masked_fill(top_k == 0, minus_inf)  # no top_k: nothing below the threshold
        scores = scores.masked_fill(scores < kth, minus_inf)
    nucleus = [row for row, p in enumerate(params) if p.top_p < 1.0]
    if nucleus:
        index = _on(nucleus, scores)
        part = scores.index_select(0, index)
        ordered, order = torch.sort(part, descending=False)
        running = ordered.softmax(dim=-1).cumsum(dim=-1)
        drop = running <= _per_row([1 - params[row].top_p for row in nucleus], running)
        drop.select(1, -1).fill_(False)  # the most likely token stays
        scores = scores.index_copy(0, index, part.masked_fill(drop.scatter(1, order, drop), minus_inf))
    return scores


def manager_config(kv_cache_tokens: int, slots: int, on_gpu: bool, graphs: bool) -> ContinuousBatchingConfig:
    """How our engine asks transformers' manager to run."""
    return ContinuousBatchingConfig(
        num_blocks=kv_cache_tokens // PAGE_SIZE,
        page_size=PAGE_SIZE,
        max_requests_per_batch=slots,  # its default, 1024, would size our logits buffer and its graphs
        use_async_batching=False,  # our sampler reads the rows of the step it is called for
        # On a GPU the step is captured, with sdpa too, which the manager would not do by itself (its
        # inputs are then padded): on an H200, one chat and 16 chats each ran 4.8x faster than uncaptured
        use_cuda_graph=on_gpu and graphs,
        allow_block_sharing=False,  # a cache hit would skip history our sampler still sees; keeps it simple
        # The generate() path's attention; on a GPU with flash-attn installed, flash attention, which
        # needs no padding (never a download of its kernels)
        auto_switch_to_flash=on_gpu and graphs and _flash_installed(),
    )


class Batching:
    """The manager of one set of weights, and the thread that routes its outputs to the requests."""

    def __init__(
        self, model: Any, eos: Sequence[int], kv_cache_tokens: int, name: str, slots: int = 8, graphs: bool = True
    ) -> None:
        """`slots`: the most requests the registry lets in at once (the rows of a step);
        `graphs`: have the manager capture its steps on a GPU (False: never, as after a failed capture)."""
        self.name = name
        self.eos = tuple(eos)
        self.kv_cache_tokens = whole_pages(kv_cache_tokens)
        config = manager_config(self.kv_cache_tokens, slots, on_gpu=model.device.type == "cuda", graphs=graphs)
        generation = GenerationConfig(do_sample=False, eos_token_id=-1, pad_token_id=0)
        self.manager = model.init_continuous_batching(generation_config=generation, continuous_batching_config=config)
        self._sampler = _RowSampler(rows_at_most=slots)  # the manager's max_requests_per_batch
        hook = ContinuousBatchingLogitsProcessorList(LogitsProcessorList([self._sampler]))
        hook.tensors_required = 1  # one int32 row of arguments for our sampler (unused, but reserved)
        hook.do_processing = True
        self.manager.logit_processor = hook
        self.warmup_s = 0.0
        self._serving = False
        self._choose_after_each_step()
        self.no_graphs_why = ""  # set by the loader where capturing failed and the engine runs without
        self._lock = threading.Lock()
        self._requests: dict[str, Request] = {}
        self._closed = threading.Event()
        self._start_loop()
        self.ready_s = self.warmup_s  # the loader sets the whole start, its first token included
        self._router = threading.Thread(target=self._route, name=f"batching:{name}", daemon=True)
        self._router.start()

    @property
    def graphs(self) -> tuple[bool, bool]:
        """Whether the manager captures its (prefill, decode) steps in CUDA graphs."""
        varlen, decode = self.manager.continuous_batching_config.cuda_graph_booleans
        return bool(varlen), bool(decode)

    def describe(self) -> str:
        """What the model's status says of this engine, after "continuous batching"."""
        captured = [path for path, on in zip(("prefill", "decode"), self.graphs, strict=True) if on]
        graphs = f"; CUDA graphs: {' and '.join(captured)}" if captured else ""
        failed = f"; no CUDA graphs ({self.no_graphs_why})" if self.no_graphs_why else ""
        return f"; paged KV cache of {self.kv_cache_tokens} tokens{graphs}{failed}; warmed up in {self.ready_s:.1f} s"

    def _choose_after_each_step(self) -> None:
        """Sets our sampler to choose each step's tokens once the step is done, in every batch
        processor the manager builds (its loop builds one on its own thread: built on the caller's
        thread instead, the CPU forward pass ran about 10% slower)."""
        build = self.manager._create_batch_processor

        def build_then_hook() -> Any:
            processor = build()
            runner, io = processor.model_runner, processor.inputs_and_outputs
            if getattr(runner, "arena_choosing", False):  # a restart reuses the processor
                return processor
            forward = runner.compute_batch

            def forward_then_choose(model: Any, batch_data: dict) -> None:
                forward(model, batch_data)
                if not self._serving:  # the warm-up's steps have no requests of ours
                    return
                if io.compute_stream is not None:  # the step runs on its own stream on a GPU
                    io.compute_stream.synchronize()
                tokens = self._sampler.choose()
                if tokens:  # the manager reads each row's token from here (its greedy pick is replaced)
                    io.output_ids[0, : len(tokens)].copy_(torch.tensor(tokens, dtype=io.output_ids.dtype))

            runner.compute_batch = forward_then_choose
            runner.arena_choosing = True
            return processor

        self.manager._create_batch_processor = build_then_hook

    def _warm_up(self) -> None:
        """Where the manager captures CUDA graphs, it does so now, before its loop starts, and not
        in a visitor's first reply (seconds, in `warmup_s`). Elsewhere there is nothing to warm."""
        if any(self.graphs) and self.manager.batch_processor is None:
            started = time.perf_counter()
            self.manager.warmup()
            self.warmup_s = time.perf_counter() - started
        self._serving = True

    def _start_loop(self) -> None:
        """The manager's loop, started from a daemon thread: transformers' loop thread takes its
        daemon flag from its starter, and a non-daemon one keeps a script that never closes its
        registry from exiting."""

        failed: list[BaseException] = []

        def start() -> None:
            try:
                with torch.inference_mode():  # thread-local: the loop runs in the mode of its starter
                    self._warm_up()
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

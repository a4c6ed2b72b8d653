"""Hugging Face Spaces: where we run, and ZeroGPU generation.

ZeroGPU lends a GPU only inside functions decorated with `spaces.GPU`, and runs them in a forked
worker process: arguments and results cross by pickling, and the worker sees the memory the server
had when it forked. `model.generate` with our per-request streamer and cancel event (thread objects
in this process) cannot cross that line, so on ZeroGPU `generate` below runs a small generator in
the worker that calls `model.generate` there and yields the token ids; this process replays them
into the real streamer and closes the worker's generator when the request is cancelled. The model
is found in the worker by a key registered before the first fork (`prepare_zero_gpu`), since a
model object cannot be pickled cheaply.

Everywhere else (no `spaces` package, or SPACES_ZERO_GPU unset) `gpu` is the identity and
`generate` is `model.generate`: one attribute lookup of overhead.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import threading
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any, TypeVar

from webui.handoff import Handoff, run_in_thread

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
GPU_DURATION_S = 120  # the longest a generation may hold a ZeroGPU slot


# ---- where are we --------------------------------------------------------------------------------
def on_space(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return bool(environ.get("SPACE_ID")) or environ.get("SYSTEM") == "spaces"


def zero_gpu_requested(environ: Mapping[str, str] | None = None) -> bool:
    """ZeroGPU Spaces set SPACES_ZERO_GPU=true; the `spaces` package must be installed too."""
    environ = os.environ if environ is None else environ
    flag = environ.get("SPACES_ZERO_GPU", "").strip().lower() in ("1", "t", "true")
    return flag and importlib.util.find_spec("spaces") is not None


@functools.lru_cache(maxsize=1)
def zero_gpu() -> bool:
    """Decided once per process: the environment of a Space does not change while it runs."""
    return zero_gpu_requested()


def import_spaces_early() -> None:
    """On ZeroGPU, `spaces` must be imported before anything initialises CUDA (it patches torch);
    app.py calls this first. Elsewhere it does nothing."""
    if zero_gpu():
        import spaces  # noqa: F401


def gpu(fn: F | None = None, *, duration: int = GPU_DURATION_S) -> Any:
    """`spaces.GPU(duration=...)` on ZeroGPU, the function itself elsewhere. Works bare or with
    arguments: `@gpu` and `@gpu(duration=60)`."""

    def wrap(f: F) -> F:
        if not zero_gpu():
            return f
        import spaces

        return spaces.GPU(f, duration=duration)

    return wrap(fn) if fn is not None else wrap


# ---- generation ----------------------------------------------------------------------------------
_MODELS: dict[str, Any] = {}  # key -> model; filled before the worker forks, read in the worker


def register_model(model: Any) -> str:
    """Make `model` findable in the ZeroGPU worker. Must happen before the first generation: the
    worker is a fork and never sees models registered after it started."""
    key = f"model-{id(model)}"
    _MODELS[key] = model
    return key


def generate(model: Any, **kwargs: Any) -> Any:
    """`model.generate(**kwargs)`, inside a ZeroGPU allocation where there is one."""
    if not zero_gpu():
        return model.generate(**kwargs)
    return _generate_via_worker(model, _gpu_stream(), **kwargs)


@functools.lru_cache(maxsize=1)
def _gpu_stream() -> Callable[..., Generator[Any, None, None]]:
    """The decorated worker generator, created once: ZeroGPU wants its GPU functions known when
    the server starts (`prepare_zero_gpu` calls this then)."""
    return gpu(stream_in_worker)


def _generate_via_worker(
    model: Any,
    worker: Callable[..., Generator[Any, None, None]],
    *,
    input_ids: Any,
    streamer: Any,
    stopping_criteria: Any = None,
    attention_mask: Any = None,
    **rest: Any,
) -> None:
    """Runs `worker` (stream_in_worker, possibly in another process) and replays what it yields
    into `streamer`, checking `stopping_criteria` (our cancel event) after every token."""
    import torch

    key = f"model-{id(model)}"
    if key not in _MODELS:  # fine in one process (tests); on ZeroGPU prepare_zero_gpu registered it
        register_model(model)
    prompt = input_ids[0].tolist()
    seen = list(prompt)
    stream = worker(key, prompt, rest)
    try:
        for value in stream:
            streamer.put(torch.tensor(value))
            if isinstance(value, list) and value and not isinstance(value[0], list):
                seen.extend(value)  # a new token (the prompt arrives first as a nested [[...]] list)
            if stopping_criteria is not None and bool(stopping_criteria(torch.tensor([seen]), None).all()):
                break
    finally:
        stream.close()  # on ZeroGPU this stops the worker's generate (its GeneratorExit sets stop_event)
        streamer.end()


def stream_in_worker(key: str, prompt: list[int], generate_kwargs: dict[str, Any]) -> Iterator[Any]:
    """The GPU side: `model.generate` in a thread of the worker, yielding each value its streamer
    receives (as plain lists, which pickle). Closing this generator stops generation."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList
    from transformers.generation.streamers import BaseStreamer

    try:
        model = _MODELS[key]
    except KeyError:
        raise RuntimeError(
            "this model was loaded after the GPU worker started; on ZeroGPU every model "
            "must be loaded before the server starts"
        ) from None
    items: Handoff[Any] = Handoff()
    halt = threading.Event()

    class Collect(BaseStreamer):
        def put(self, value: Any) -> None:
            items.put(value.tolist())

        def end(self) -> None:
            pass  # run_in_thread ends the hand-off when generate returns

    class Halt(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return torch.full((input_ids.shape[0],), halt.is_set(), dtype=torch.bool, device=input_ids.device)

    def run() -> None:
        device = next(model.parameters()).device
        ids = torch.tensor([prompt], device=device)
        with torch.inference_mode():
            model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                streamer=Collect(),
                stopping_criteria=StoppingCriteriaList([Halt()]),
                **generate_kwargs,
            )

    thread = run_in_thread(run, items, name="zerogpu-generate")
    try:
        yield from items  # a failure of generate is raised here, in the worker's generator
    finally:
        halt.set()
        thread.join()


def prepare_zero_gpu(registry: Any, wait_s: float = 1800.0) -> None:
    """On ZeroGPU: load every model now (the worker forks from this state), make them findable
    in the worker, declare the GPU function, and run the `spaces` start-up that Blocks.launch would
    have run (we serve with uvicorn instead). Elsewhere: nothing."""
    if not zero_gpu():
        return
    registry.start()
    if not registry.wait_idle(wait_s):
        log.error("ZeroGPU: models still loading after %.0f s; starting anyway", wait_s)
    for name in registry.ready_names():
        model = getattr(registry.get(name), "model", None)
        if model is not None:
            register_model(model)
    _gpu_stream()
    import spaces.zero

    startup = getattr(spaces.zero, "startup", None)
    if startup is not None:
        startup()
    log.info("ZeroGPU: %d model(s) ready; generation runs inside spaces.GPU", len(_MODELS))

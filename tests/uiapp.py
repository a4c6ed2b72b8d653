"""The whole app (create_app: UI, API, security) on a free port in a thread, for the gradio_client
and browser tests, with the tiny random Llama behind four entries:

* tiny-a, tiny-b: quick (16 tokens), the only ones with a battle weight (tiny-b has a system prompt);
* long-a, long-b: weight 0 (never in a battle), EOS ignored and 3000 new tokens, so that a reply
  is still streaming when a test presses Stop or closes the tab; four may generate at once (four
  side-by-side panes);
* echo: weight 0, a fake that repeats the user's message (entering through the registry's loader,
  like any model): it lets the browser test check what the UI does with HTML, Markdown and LaTeX
  coming from a model.

Readiness is polled (uvicorn's `started`, the models' load state); nothing sleeps a fixed time.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.apps import start_app
from tests.servers import RunningServer, alive_threads, serve_app, wait_for
from tests.tiny import tiny_models
from webui.config import Settings
from webui.engine.base import Backend, Weights
from webui.engine.registry import build_registry
from webui.models.specs import ModelSpec
from webui.records.events import NullRecorder
from webui.server.app import create_app
from webui.services import Services
from webui.types import Finished, FinishReason, Message, Route, SamplingParams, StreamEvent, TextDelta

__all__ = ["RunningUI", "generate_threads", "join", "serve", "start_ui", "ui_settings", "wait_for"]


QUICK = {"sampling": {"temperature": 0, "max_new_tokens": 16}}
# dtype fp32: their own copy of the weights, so that long streams never take the quick ones' slots
LONG = {
    "weight": 0,
    "dtype": "fp32",
    "context_length": 4096,
    "max_concurrency": 4,
    "sampling": {"ignore_eos": True, "max_new_tokens": 3000},
}
ENTRIES = (
    {"name": "tiny-a", **QUICK},
    {"name": "tiny-b", "system_prompt": "Answer briefly.", **QUICK},
    {"name": "long-a", **LONG},
    {"name": "long-b", **LONG},
    {"name": "echo", "weight": 0, "dtype": "bf16", **QUICK},
)
NAMES = tuple(str(entry["name"]) for entry in ENTRIES)


@dataclasses.dataclass
class RunningUI(RunningServer):
    """The url ends with "/" (the page); the recorder is a NullRecorder the tests can read."""

    @property
    def recorder(self) -> NullRecorder:
        return self.services.recorder  # type: ignore[union-attr,return-value]

    @classmethod
    def of(cls, running: RunningServer) -> RunningUI:
        return cls(**{**vars(running), "url": running.url + "/"})


def join(
    http: httpx.Client, ui: RunningUI, api_name: str, session_hash: str, data: Sequence[Any] | None = None
) -> httpx.Response:
    """What the page sends to run an event, without opening the stream of its updates. `data`: the
    event's inputs in order (default all None: State inputs are taken from the server-side session)."""
    index = next(i for i, fn in ui.app.state.blocks.fns.items() if fn.api_name == api_name)
    values = list(data) if data is not None else [None] * len(ui.app.state.blocks.fns[index].inputs)
    return http.post(
        "gradio_api/queue/join",
        json={"data": values, "fn_index": index, "session_hash": session_hash, "event_data": None, "trigger_id": None},
    )


def ui_settings(tmp: Path, model_dir: Path) -> Settings:
    # The tests send many messages from one address: no per-client rate limits.
    return Settings(
        models_file=tiny_models(tmp, model_dir, ENTRIES),
        log_dir=tmp / "logs",
        cache_dir=tmp / "cache",
        queue_timeout_s=20.0,
        rate_messages=0,
        rate_votes=0,
    )


class EchoBackend(Backend):
    """Streams the newest user message back, a few characters at a time."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    def stream(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        cancel: threading.Event | None = None,
        *,
        route: Route | None = None,
    ) -> Iterator[StreamEvent]:
        text = messages[-1].content

        def events() -> Iterator[StreamEvent]:
            for i in range(0, len(text), 8):
                yield TextDelta(text[i : i + 8])
            yield Finished(FinishReason.STOP, completion_tokens=len(text) // 8 + 1, ttft_s=0.0, prompt=text)

        return events()


def loaders() -> dict:
    from webui.engine.transformers import load_transformers

    def load(spec: ModelSpec, settings: Settings) -> Weights:
        if spec.name == "echo":
            return Weights(lambda variant, slots: EchoBackend(variant))
        return load_transformers(spec, settings)

    return {"transformers": load, "auto": load}  # "auto", the default backend, would load echo as a real model


def start_ui(settings: Settings) -> RunningUI:
    """The app of `settings` through tests/apps.py's runner, with the echo fake and a NullRecorder."""
    running = start_app(settings, registry=build_registry(settings, loaders=loaders()), recorder=NullRecorder())
    return RunningUI.of(running)


def serve(services: Services) -> RunningUI:
    """create_app(services) under uvicorn on a free port, in a thread, for services a test built
    itself (the demo models'); returns once it answers."""
    running = serve_app(create_app(services), services)
    return RunningUI.of(running)


def generate_threads() -> list[threading.Thread]:
    return alive_threads("generate:")

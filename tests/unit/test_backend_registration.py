"""A backend is one engine module and one row in `BACKENDS`: the registry, the models file and the
placement know no engine by name. Proven with a backend that exists only in this test module."""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Literal

import pytest
from pydantic import StrictStr

from webui.config import Settings
from webui.engine.base import Backend, Slots, Weights, collect
from webui.engine.registry import ModelState, Registry
from webui.errors import ConfigError
from webui.models import entries
from webui.models.specs import ModelSpec, parse_specs
from webui.types import Finished, FinishReason, Message, Route, SamplingParams, StreamEvent, TextDelta

HERE = __name__


class EchoEntry(entries.LocalEntry):
    backend: Literal["echo"]
    greeting: StrictStr = "hello"


class EchoBackend(Backend):
    def __init__(self, spec: ModelSpec, slots: Slots) -> None:
        self.spec, self.slots = spec, slots

    def stream(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        cancel: threading.Event | None = None,
        *,
        route: Route | None = None,
    ) -> Iterator[StreamEvent]:
        assert isinstance(self.spec.entry, EchoEntry)
        yield TextDelta(f"{self.spec.entry.greeting}, {messages[-1].content}")
        yield Finished(FinishReason.STOP)


def load_echo(spec: ModelSpec, settings: Settings) -> Weights:
    return Weights(EchoBackend, engine="echo engine")


def echo_concurrency(settings: Settings) -> int:
    return 3


def place_echo(specs: Sequence[ModelSpec], cores: int) -> list[ModelSpec]:
    return [dataclasses.replace(s, description=f"core {i % cores}") for i, s in enumerate(specs)]


@pytest.fixture
def echo_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        entries.BACKENDS,
        "echo",
        entries.Backend(
            EchoEntry, f"{HERE}:load_echo", concurrency=f"{HERE}:echo_concurrency", place=f"{HERE}:place_echo"
        ),
    )


@pytest.mark.usefixtures("echo_registered")
def test_one_row_registers_a_backend_with_its_keys_loader_concurrency_and_placement(settings: Settings) -> None:
    specs = parse_specs(
        {
            "models": [
                {"name": "e1", "backend": "echo", "source": "/e", "greeting": "ahoy"},
                {"name": "e2", "backend": "echo", "source": "/other"},
                {"name": "t", "backend": "transformers", "source": "/t"},
            ]
        }
    )
    registry = Registry(specs, settings)
    try:
        assert registry.concurrency(registry.spec("e1").weights_key) == 3
        assert registry.concurrency(registry.spec("t").weights_key) == settings.max_concurrency  # batching off
        on = Registry(specs, settings.replace(transformers_batching=True))
        assert on.concurrency(on.spec("t").weights_key) == settings.vllm_concurrency  # a batching engine's slots
        on.close()
        # placement sees the echo entries only; the transformers entry is left as it was
        cores = os.cpu_count() or 1
        assert [registry.spec(n).description for n in ("e1", "e2", "t")] == ["core 0", f"core {1 % cores}", ""]
        registry.start()
        registry.wait_idle(30)
        status = registry.status("e1")
        assert status.state is ModelState.READY and status.engine == "echo engine"
        text, _ = collect(registry.get("e1").stream([Message("user", "sailor")], SamplingParams()))
        assert text == "ahoy, sailor"
    finally:
        registry.close()


@pytest.mark.usefixtures("echo_registered")
def test_a_registered_backend_still_refuses_keys_it_does_not_take() -> None:
    with pytest.raises(ConfigError, match="greting"):
        parse_specs({"models": [{"name": "e", "backend": "echo", "source": "/e", "greting": "typo"}]})
    with pytest.raises(ConfigError, match="greeting"):
        parse_specs(
            {
                "models": [
                    {
                        "name": "e",
                        "backend": "openai",
                        "base_url": "http://x/v1",
                        "remote_model": "m",
                        "greeting": "not an openai key",
                    }
                ]
            }
        )

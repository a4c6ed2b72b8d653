"""A backend is one engine module and one row in `BACKENDS`: the registry, the models file, the
placement and `backend: auto` know no engine by name. Proven with backends that exist only in this
test module: one in this process, and one server engine that runs a real server process of its own."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, StrictStr

from tests.servers import process_group, wait_for
from webui.config import Settings
from webui.engine.base import Backend, Slots, Weights, collect
from webui.engine.folder_tokenizer import read_folder
from webui.engine.own_server import Dialect, server_weights
from webui.engine.process import EngineServer
from webui.engine.registry import ModelState, Registry
from webui.engine.templates import PromptBuilder
from webui.errors import ConfigError
from webui.models import entries
from webui.models.specs import ModelSpec, parse_specs
from webui.types import Finished, FinishReason, Message, Route, SamplingParams, StreamEvent, TextDelta

HERE = __name__
# A real server process: /health, and a streamed /v1/completions that replies with the token ids it got
ECHO_SERVER = Path(__file__).resolve().parents[2] / "fakes" / "fake_vllm_server.py"


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
        on = Registry(specs, settings.replace(transformers_batching="on"))
        assert on.concurrency(on.spec("t").weights_key) == settings.batch_slots  # a batching engine's slots
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


# ---- a server engine: one module (here, this test's functions) and one row --------------------------
class ParrotOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    cpu_cores: StrictStr | None = None
    slots: int = 5


class ParrotEntry(entries.LocalEntry):
    backend: Literal["parrot"]
    parrot: ParrotOptions = ParrotOptions()


@dataclasses.dataclass(frozen=True)
class ParrotLaunch:
    """What webui.engine.process needs to run the parrot's server under the supervisor."""

    served_name: str
    log_file: Path
    cache_root: Path
    label = "parrot"

    @property
    def supervisor_python(self) -> str:
        return sys.executable

    def server_command(self, port: int) -> list[str]:
        return [sys.executable, str(ECHO_SERVER), "--port", str(port)]

    def environment(self) -> dict[str, str]:
        return dict(os.environ)


PARROT = Dialect("parrot", lambda _params, _context: {"ignore_eos": True})
SERVERS: list[EngineServer] = []


def load_parrot(spec: ModelSpec, settings: Settings) -> Weights:
    folder = Path(spec.source)
    server = EngineServer(ParrotLaunch(spec.name, Path(settings.cache_dir) / "parrot.log", Path(settings.cache_dir)))
    server.start(timeout_s=60)
    SERVERS.append(server)
    return server_weights(
        spec.name, server, read_folder(folder), 512, settings, PARROT, engine="parrot 1", device="cpu"
    )


def parrot_try_serve(spec: ModelSpec, settings: Settings) -> Weights | str:
    return load_parrot(spec, settings) if spec.dtype == "auto" else f"it repeats in its own dtype, not {spec.dtype}"


def parrot_concurrency(settings: Settings) -> int:
    return 5


@pytest.fixture
def parrot_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        entries.BACKENDS,
        "parrot",
        entries.Backend(
            ParrotEntry,
            f"{HERE}:load_parrot",
            concurrency=f"{HERE}:parrot_concurrency",
            place="webui.engine.placement:place",
            options=("parrot",),
            gpu_share=True,
            auto=entries.AutoChoice(5, "parrot", f"{HERE}:parrot_try_serve"),  # tried before every other engine
        ),
    )


def _chat(registry: Registry, name: str) -> tuple[str, Finished, Any]:
    backend = registry.get(name)
    messages = [Message("user", "hello cat")]
    text, final = collect(backend.stream(messages, SamplingParams(temperature=0, max_new_tokens=64)))
    return text, final, backend


@pytest.mark.usefixtures("parrot_registered")
def test_a_server_engine_is_one_row_its_options_placement_auto_and_a_served_chat(
    settings: Settings, tiny_model_dir: Path
) -> None:
    """The parrot's row alone: its options block reaches the spec, placement gives it cores and a GPU
    share, `auto` tries it first (and says why not where it refuses), and the registry serves a chat
    through its own server process, which receives our prompt's token ids; closing stops it."""
    source = str(tiny_model_dir)
    specs = parse_specs(
        {
            "models": [
                {"name": "p", "backend": "parrot", "source": source, "parrot": {"slots": 3}},
                {"name": "a", "source": source, "system_prompt": "Be brief."},  # backend: auto
                {"name": "a32", "source": source, "dtype": "fp32"},  # auto, which the parrot refuses
            ]
        }
    )
    assert specs[0].engine_options == {"slots": 3}
    with pytest.raises(ConfigError, match="unknown key in 'parrot'"):
        parse_specs({"models": [{"name": "p", "backend": "parrot", "source": source, "parrot": {"slot": 3}}]})
    registry = Registry(specs, settings.replace(vllm_python="none", llama_server="none"))
    try:
        placed = {name: registry.spec(name).engine_options for name in ("p", "a", "a32")}
        assert placed["p"]["gpu_memory_utilization"] == placed["a"]["gpu_memory_utilization"] > 0
        if (os.cpu_count() or 1) >= 2:
            assert placed["p"]["cpu_cores"] != placed["a"]["cpu_cores"]  # the servers are not pinned together
        assert registry.concurrency(registry.spec("p").weights_key) == 5
        registry.start()
        assert registry.wait_idle(120)
        assert registry.status("p").engine == "parrot 1" and registry.status("a").engine == "parrot 1"
        refused = registry.status("a32")
        assert refused.state is ModelState.READY and refused.engine.startswith(
            "transformers: parrot: it repeats in its own dtype, not fp32; vLLM is turned off"
        ), refused.engine
        for name in ("p", "a"):
            text, final, backend = _chat(registry, name)
            sent = backend.prompts.prepare([Message("user", "hello cat")], SamplingParams(max_new_tokens=64))
            assert text == "".join(f"{token} " for token in sent.token_ids) and final.reason is FinishReason.STOP
            assert final.extra["engine"] == "parrot" and final.prompt == sent.text
            assert isinstance(backend.prompts, PromptBuilder)
        assert "Be brief." in _chat(registry, "a")[1].prompt  # the variant's own prompt, on the same server
        groups = [server.process.pid for server in SERVERS]
    finally:
        registry.close()
        SERVERS.clear()
    for pgid in groups:
        wait_for(lambda pgid=pgid: not process_group(pgid), 30, "the parrot's server outlived its registry")

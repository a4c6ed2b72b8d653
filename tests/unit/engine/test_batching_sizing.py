"""The paged KV cache's size where none was chosen, and the batching engine started again without
CUDA graphs where capturing them failed (webui.engine.batching_load). A GPU is not needed: the
sizing is arithmetic on the model's config and the free memory, and the retry is logic around the
engine, tested here with a stand-in engine; the real engine on a CPU is tested in
test_transformers_batching.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from transformers import LlamaConfig

from webui.config import Settings
from webui.config.values import ConfigError
from webui.engine import batching_load
from webui.engine.batching_load import _start, cache_bytes, sized_cache
from webui.engine.paging import DEFAULT_KV_CACHE_TOKENS, PAGE_SIZE

GIB = 1024**3
# 4 layers, 2 KV heads of 64 in bf16: 2 * 2 * 64 * 2 bytes * 4 layers = 2 KiB a token
CONFIG = LlamaConfig(num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, hidden_size=256)


def _model(device: str) -> Any:
    return SimpleNamespace(config=CONFIG, dtype=torch.bfloat16, device=torch.device(device))


def _settings(**chosen: Any) -> Settings:
    return Settings(models_file=Path("models.yaml"), **chosen)


def test_a_gpu_cache_holds_every_slots_whole_context_where_the_memory_allows() -> None:
    per_token = cache_bytes(CONFIG, torch.bfloat16, 1)
    assert per_token == 2 * 2 * 64 * 2 * 4
    # 8 slots of 8,100 tokens: 64,800, up to whole pages (254 of 256); 1 GiB free is plenty
    assert sized_cache(_model("cuda"), 8 * 8100, _settings(), GIB) == 254 * PAGE_SIZE


def test_a_gpu_cache_takes_its_share_of_free_memory_and_no_more() -> None:
    free = 100 * 1024**2  # 100 MiB free, half of it for the cache: 25,600 tokens of 2 KiB
    tokens = sized_cache(_model("cuda"), 8 * 32_768, _settings(), free)
    assert tokens == 25_600 // PAGE_SIZE * PAGE_SIZE and tokens * 2048 <= free * 0.5
    more = sized_cache(_model("cuda"), 8 * 32_768, _settings(transformers_kv_cache_memory=0.8), free)
    assert more == int(free * 0.8) // 2048 // PAGE_SIZE * PAGE_SIZE > tokens
    # Not even a page fits: a page, so that the load's own check says what is missing
    assert sized_cache(_model("cuda"), 8 * 32_768, _settings(), 1024) == PAGE_SIZE


def test_a_cpu_or_an_unknown_memory_keeps_the_fixed_default() -> None:
    assert sized_cache(_model("cpu"), 8 * 32_768, _settings(), 64 * GIB) == DEFAULT_KV_CACHE_TOKENS
    assert sized_cache(_model("cuda"), 8 * 32_768, _settings(), None) == DEFAULT_KV_CACHE_TOKENS


@pytest.mark.parametrize("share", [0, 0.9, -0.5])
def test_a_share_of_memory_out_of_range_is_refused_naming_the_setting(share: float) -> None:
    with pytest.raises(ConfigError, match=r"transformers_kv_cache_memory: must be more than 0 and at most 0\.8"):
        _settings(transformers_kv_cache_memory=share)


@dataclass
class _Engine:
    """Stands in for Batching: refuses to start with CUDA graphs when told to, and gives the load's
    one-token probe its token."""

    model: Any
    eos: Any
    kv_cache_tokens: int
    name: str
    slots: int
    graphs: bool = True
    closed: bool = False
    no_graphs_why: str = ""

    def __post_init__(self) -> None:
        if self.graphs and _FAIL_CAPTURE:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    def submit(self, token_ids: list[int], params: Any, on_tokens: Any, on_end: Any) -> None:
        on_tokens([7])
        on_end(None)

    def close(self) -> None:
        self.closed = True


_FAIL_CAPTURE = True
TOKENIZER = SimpleNamespace(bos_token_id=1, eos_token_id=2)
SPEC = SimpleNamespace(name="m")


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> None:
    from webui.engine import batching

    monkeypatch.setattr(batching, "Batching", _Engine)
    monkeypatch.setattr(batching_load, "eos_ids", lambda model, tokenizer: [2])


def test_a_failed_capture_starts_the_engine_again_without_graphs_saying_why(engine: None) -> None:
    model = SimpleNamespace(device=torch.device("cuda"))
    started = _start(model, TOKENIZER, SPEC, 512, 8, graphs=True)  # type: ignore[arg-type]
    assert isinstance(started, _Engine) and started.graphs is False
    assert started.no_graphs_why == "RuntimeError: CUDA error: operation not permitted when stream is capturing"


def test_a_failure_without_graphs_to_drop_is_the_loads_own(engine: None) -> None:
    with pytest.raises(RuntimeError, match="stream is capturing"):  # a CPU captures nothing: no second try
        _start(SimpleNamespace(device=torch.device("cpu")), TOKENIZER, SPEC, 512, 8, graphs=True)  # type: ignore[arg-type]


def test_the_batch_sampler_keeps_to_the_logits_device() -> None:
    """The batch's processors on logits on a GPU, without one: fake CUDA tensors (torch's
    FakeTensorMode) carry devices and shapes but no data, and raise where a CPU tensor meets a GPU
    one, as a real GPU would. Every setting that makes a per-row column is in the batch."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from webui.engine.batching import Request, Row, _process
    from webui.types import SamplingParams

    settings = [
        SamplingParams(temperature=0.7, top_p=0.9, repetition_penalty=1.1),
        SamplingParams(temperature=1.3, top_k=5, ignore_eos=True),
        SamplingParams(temperature=0, repetition_penalty=1.3),
    ]
    rows = [
        Row(
            Request(f"r{i}", params.effective(), (2,), print, print),
            SimpleNamespace(initial_tokens=[1, 5], generated_tokens=[7, 99]),
        )
        for i, params in enumerate(settings)
    ]
    with FakeTensorMode():
        scores = torch.empty(3, 64, device="cuda")
        processed = _process(rows, scores)
    assert processed.device.type == "cuda" and processed.shape == (3, 64)


@pytest.mark.parametrize(
    ("on_gpu", "graphs", "captured"),
    [(True, True, (True, True)), (True, False, (False, False)), (False, True, (False, False))],
)
def test_a_gpu_captures_the_batchs_steps_unless_told_not_to(on_gpu: bool, graphs: bool, captured: tuple) -> None:
    """The manager leaves its steps uncaptured where the attention needs a mask (sdpa); ours asks it
    to capture on a GPU all the same, as measured (docs/performance.md), and never on a CPU or
    where capturing failed once (`graphs=False`)."""
    from webui.engine.batching import manager_config

    config = manager_config(8192, 8, on_gpu=on_gpu, graphs=graphs)
    assert config.cuda_graph_booleans == captured
    assert (config.max_requests_per_batch, config.num_blocks, config.use_async_batching) == (8, 32, False)


@pytest.mark.parametrize(
    ("mode", "device", "wanted"),
    [("auto", "cuda", True), ("auto", "cpu", False), ("on", "cpu", True), ("on", "cuda", True), ("off", "cuda", False)],
)
def test_auto_batches_a_model_on_a_gpu_and_not_on_a_cpu(mode: str, device: str, wanted: bool) -> None:
    from webui.engine.batching_load import batching_wanted

    assert batching_wanted(mode, device) is wanted


def test_a_batching_mode_out_of_its_choices_is_refused_naming_them() -> None:
    with pytest.raises(ConfigError, match="transformers_batching: must be one of auto, on, off, got 'yes'"):
        _settings(transformers_batching="yes")
    assert _settings().transformers_batching == "auto"
    assert (
        Settings.from_env({"ARENA_TRANSFORMERS_BATCHING": "on"}, models_file=Path("m.yaml")).transformers_batching
        == "on"
    )

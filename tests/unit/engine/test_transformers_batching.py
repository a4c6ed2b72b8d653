"""transformers on continuous batching (webui.engine.batching): one manager per set of weights,
the generate() path's answers, requests that end alone, and the fallback with its reason."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tiny import THREE, build_tiny_model
from tests.tiny import tiny_models as write_tiny_models
from webui.config import Settings
from webui.engine import collect
from webui.engine.registry import Registry, build_registry
from webui.handoff import Handoff
from webui.types import Finished, FinishReason, Message, SamplingParams

HELLO = [Message("user", "hello world")]
GREEDY = SamplingParams(temperature=0, max_new_tokens=64, ignore_eos=True)
SAMPLED = SamplingParams(temperature=0.9, top_k=12, top_p=0.9, repetition_penalty=1.3, seed=11, max_new_tokens=64)
LONG = {"name": "long", "backend": "transformers", "context_length": 1024}  # one entry, on the batching engine


def _registry(models: Path, folder: Path, **settings: object) -> Registry:
    """The models on continuous batching (`--transformers-batching on`; off by default)."""
    chosen = {"transformers_batching": "on", **settings}
    registry = build_registry(
        Settings(models_file=models, log_dir=folder / "logs", cache_dir=folder / "cache", queue_timeout_s=5.0, **chosen)
    )
    registry.start()
    assert registry.wait_idle(60)
    return registry


@pytest.fixture(scope="module")
def tiny_models(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_models(tmp_path_factory.mktemp("batching"), tiny_model_dir, THREE)


@pytest.fixture(scope="module")
def batched(tiny_models: Path) -> Iterator[Registry]:
    registry = _registry(tiny_models, tiny_models.parent)
    yield registry
    registry.close()


@pytest.fixture(scope="module")
def unbatched(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    registry = _registry(tiny_models, tmp_path_factory.mktemp("unbatched"), transformers_batching="off")
    yield registry
    registry.close()


@pytest.fixture
def slow_steps(batched: Registry) -> Iterator[list[int]]:
    """Every forward pass of the tiny model takes 20 ms more, so that a 200-token reply is still
    running when a test acts on it; yields the count of forward passes so far."""
    model = batched.get("tiny-a").model
    count = [0]

    def hook(module: object, args: object) -> None:
        count[0] += 1
        time.sleep(0.02)

    handle = model.model.layers[0].register_forward_pre_hook(hook)
    yield count
    handle.remove()


def _serves_on_generate(registry: Registry, name: str) -> None:
    """The model is on the generate() path: no manager, one generate() thread per slot, and a reply."""
    backend = registry.get(name)
    assert backend.batching is None and backend.slots.size == registry.settings.max_concurrency
    _text, final = collect(backend.stream(HELLO, GREEDY.replace(max_new_tokens=4)))
    assert (final.reason, final.completion_tokens) == (FinishReason.LENGTH, 4)


def _wait_for(condition, what: str, limit_s: float = 20.0) -> None:
    """Polls a condition; the limit only keeps a broken engine from hanging the suite."""
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.01)


def test_variants_share_one_manager_with_a_batching_engines_slots(batched: Registry) -> None:
    backend = batched.get("tiny-a")
    assert backend.batching is not None
    assert batched.get("tiny-b").batching is backend.batching  # one manager per set of weights
    engine = batched.status("tiny-a").engine
    said = re.search(r"\(continuous batching; paged KV cache of 8192 tokens; warmed up in ([\d.]+) s\)$", engine)
    assert said, engine  # on a CPU: the fixed default cache, no CUDA graphs, and the time its start took
    assert (
        float(said[1]) == round(backend.batching.ready_s, 1) and backend.batching.ready_s >= backend.batching.warmup_s
    )
    assert backend.slots.size == batched.settings.batch_slots == 8  # as vLLM's and llama.cpp's
    assert batched.get("tiny-b").slots is backend.slots
    # A step has at most a row per slot, and the logits kept for choosing its tokens no more
    assert backend.batching.manager.continuous_batching_config.max_requests_per_batch == 8
    collect(backend.stream(HELLO, GREEDY.replace(max_new_tokens=2)))
    assert backend.batching._sampler._logits.shape[0] == 8


def test_same_text_as_the_generate_path_greedy_and_seeded(batched: Registry, unbatched: Registry) -> None:
    assert unbatched.get("tiny-a").batching is None
    for params in (GREEDY, SAMPLED, SAMPLED.replace(seed=12, temperature=1.4, repetition_penalty=1.0)):
        text, final = collect(batched.get("tiny-a").stream(HELLO, params))
        expected, expected_final = collect(unbatched.get("tiny-a").stream(HELLO, params))
        assert text == expected and text
        assert (final.completion_tokens, final.reason) == (expected_final.completion_tokens, expected_final.reason)


def test_eight_streams_at_once_end_with_their_own_lengths_and_stop_strings(batched: Registry) -> None:
    backend = batched.get("tiny-a")
    # one step samples rows with different settings at once: each must get what it gets alone
    top_k, top_p = (0, 0, 9, 0, 0, 0, 25, 0), (0.8, 1.0, 1.0, 1.0, 0.95, 1.0, 0.7, 1.0)
    penalty = (1.0, 1.3, 1.2, 1.0, 1.0, 1.1, 1.0, 1.0)
    requests = [
        SamplingParams(
            temperature=0 if i % 2 else 1.1,
            top_k=top_k[i],
            top_p=top_p[i],
            repetition_penalty=penalty[i],
            seed=i,
            max_new_tokens=6 + 5 * i,
            ignore_eos=True,
        )
        for i in range(8)
    ]
    alone = [collect(backend.stream(HELLO, params)) for params in requests]
    for i in (1, 4, 7):  # these stop at a word of their own reply
        text = alone[i][0]
        stop = text.split()[3]
        requests[i] = requests[i].replace(stop=[stop])
        alone[i] = (text[: text.index(stop)], alone[i][1])
    results: list[tuple[str, Finished] | None] = [None] * 8
    start = threading.Barrier(8)

    def chat(i: int) -> None:
        start.wait()
        results[i] = collect(backend.stream(HELLO, requests[i]))

    threads = [threading.Thread(target=chat, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for i, (result, (text, final)) in enumerate(zip(results, alone, strict=True)):
        assert result is not None, f"chat {i} did not finish"
        assert result[0] == text, f"chat {i}"
        if requests[i].stop:
            assert result[1].reason is FinishReason.STOP
        else:
            assert (result[1].reason, result[1].completion_tokens) == (FinishReason.LENGTH, final.completion_tokens)
    assert backend.batching.active() == 0 and backend.slots.busy == 0


def test_stop_mid_stream_frees_the_request_at_the_next_step(batched: Registry, slow_steps: list[int]) -> None:
    backend = batched.get("tiny-a")
    long = SamplingParams(temperature=0, max_new_tokens=200, ignore_eos=True)
    stream = backend.stream(HELLO, long)
    next(stream)
    next(stream)
    assert backend.batching.active() == 1
    stream.close()  # what Stop, a closed tab and a dropped API client do
    steps_at_close = slow_steps[0]
    _wait_for(lambda: backend.batching.active() == 0, "the manager to drop the request")
    assert slow_steps[0] - steps_at_close <= 3, "the manager kept decoding a closed request"
    assert backend.slots.busy == 0

    cancel = threading.Event()
    events = []
    for event in backend.stream(HELLO, long, cancel):
        events.append(event)
        if len(events) == 2:
            cancel.set()  # the UI's Stop button sets the request's cancel event
    final = events[-1]
    assert isinstance(final, Finished) and final.reason is FinishReason.CANCELLED
    assert final.completion_tokens < 200
    _wait_for(lambda: backend.batching.active() == 0, "the manager to drop the cancelled request")


def test_a_request_that_fails_ends_alone(
    batched: Registry, slow_steps: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from webui.engine import batching

    backend = batched.get("tiny-a")
    good = SamplingParams(temperature=0, max_new_tokens=40, ignore_eos=True)
    expected = collect(backend.stream(HELLO, good))[0]
    real_choose = batching._choose_rows

    def choose(rows: list[batching.Row], scores: object) -> list[int]:
        for row in rows:  # its third token: a bad parameter, as far as the batch can tell
            if row.request.params.seed == 666 and len(row.state.generated_tokens) == 2:
                raise RuntimeError("injected fault")
        return real_choose(rows, scores)

    monkeypatch.setattr(batching, "_choose_rows", choose)
    streams = [backend.stream(HELLO, good) for _ in range(3)]
    firsts = [next(stream).text for stream in streams]  # all three are running in the manager now
    text, failed = collect(backend.stream(HELLO, good.replace(seed=666)))
    assert failed.reason is FinishReason.ERROR and "injected fault" in (failed.error or "")
    assert failed.completion_tokens == 2 and text == expected[: len(text)]
    for first, stream in zip(firsts, streams, strict=True):
        text, final = collect(stream)
        assert (first + text, final.reason, final.completion_tokens) == (expected, FinishReason.LENGTH, 40)
    assert backend.batching.active() == 0 and backend.slots.busy == 0


def test_a_request_the_manager_refuses_ends_alone(batched: Registry) -> None:
    batching = batched.get("tiny-a").batching
    outcomes: list[Handoff[list[int]]] = [Handoff(), Handoff()]
    ids = batched.get("tiny-a").prepare(HELLO, GREEDY).token_ids
    for i, handoff in enumerate(outcomes):
        injected = {"unknown_knob": 1} if i else {}  # the manager's own check refuses this one
        batching.submit(
            ids,
            GREEDY.replace(max_new_tokens=8),
            handoff.put,
            lambda error, h=handoff: (h.fail(RuntimeError(error)) if error else None, h.close()),
            **injected,
        )
    assert sum(len(ids) for ids in outcomes[0]) == 8
    with pytest.raises(RuntimeError, match="unknown_knob"):
        list(outcomes[1])
    assert batching.active() == 0


def test_a_full_cache_makes_requests_wait_their_turn(tiny_models: Path, tmp_path: Path) -> None:
    """One page of 256 tokens: three 200-token replies take turns in the cache."""
    registry = _registry(tiny_models, tmp_path, transformers_kv_cache_tokens=256)
    try:
        backend = registry.get("tiny-a")
        assert backend.context_length == 256  # the tiny model's own context fits in the cache
        params = SamplingParams(temperature=0, max_new_tokens=200, ignore_eos=True)
        expected = collect(backend.stream(HELLO, params))[0]
        results: list[str] = []
        threads = [
            threading.Thread(target=lambda: results.append(collect(backend.stream(HELLO, params))[0])) for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert results == [expected] * 3
    finally:
        registry.close()


def test_replies_that_outgrow_a_full_cache_wait_and_keep_their_text(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pages, three replies of two pages each: the first two start, both run out of blocks half
    way, and the manager puts one back in the queue (its cache freed, its tokens kept) until the
    other ends. Each still gets the text it has alone, sampled ones included."""
    from transformers.generation.continuous_batching.offloading_manager import OffloadingManager

    put_back: list[bool] = []
    real_offload = OffloadingManager.offload_requests

    def offload(manager: OffloadingManager) -> bool:
        put_back.append(real_offload(manager))
        return put_back[-1]

    monkeypatch.setattr(OffloadingManager, "offload_requests", offload)
    models = write_tiny_models(tmp_path, tiny_model_dir, [LONG])
    registry = _registry(models, tmp_path, transformers_kv_cache_tokens=512)
    try:
        backend = registry.get("long")
        requests = [SAMPLED.replace(seed=i, max_new_tokens=270, ignore_eos=True) for i in range(2)]
        requests.append(GREEDY.replace(max_new_tokens=270))
        alone = [collect(backend.stream(HELLO, params))[0] for params in requests]
        results: list[tuple[str, Finished] | None] = [None] * 3
        start = threading.Barrier(3)

        def chat(i: int) -> None:
            start.wait()
            results[i] = collect(backend.stream(HELLO, requests[i]))

        threads = [threading.Thread(target=chat, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        for i, result in enumerate(results):
            assert result is not None, f"chat {i} did not finish"
            assert (result[1].reason, result[1].error, result[1].completion_tokens) == (FinishReason.LENGTH, None, 270)
            assert result[0] == alone[i], f"chat {i}"
        assert any(put_back), "no reply ran out of blocks: the test did not fill the cache"
        assert backend.batching.active() == 0 and backend.slots.busy == 0
    finally:
        registry.close()


def test_a_reply_larger_than_the_whole_cache_is_refused_saying_so(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A model whose context (1024) is larger than its cache (one page, 256 tokens) says so at load,
    and a reply that could never fit is refused before it starts, while the batch goes on. Let in,
    it would grow past the last free block, and the manager then ends its loop with every request."""
    from webui.errors import ParamError, PromptTooLong

    models = write_tiny_models(tmp_path, tiny_model_dir, [{**LONG, "sampling": {"max_new_tokens": 16}}])
    registry = _registry(models, tmp_path, transformers_kv_cache_tokens=256)
    try:
        assert (
            "context capped at the paged KV cache's 256 tokens, the model's is 1024" in registry.status("long").engine
        )
        backend = registry.get("long")
        assert backend.context_length == 256
        running = SamplingParams(temperature=0, max_new_tokens=200, ignore_eos=True)
        expected = collect(backend.stream(HELLO, running))[0]
        other = backend.stream(HELLO, running)
        first = next(other).text
        too_long = SamplingParams(temperature=0, max_new_tokens=300, ignore_eos=True)
        with pytest.raises(ParamError, match="paged KV cache of 256 tokens"):
            backend.stream(HELLO, too_long)
        with pytest.raises(ParamError, match="paged KV cache of 256 tokens"):
            backend.complete("hello world", too_long)
        with pytest.raises(PromptTooLong):  # fits the model's context, not the cache
            backend.stream([Message("user", "hello world " * 100)], running.replace(max_new_tokens=100))
        text, final = collect(other)
        assert (first + text, final.reason, final.completion_tokens) == (expected, FinishReason.LENGTH, 200)
        assert backend.batching.active() == 0 and backend.slots.busy == 0
    finally:
        registry.close()


def test_an_entry_sizes_its_own_cache_and_a_bad_size_names_the_key(tiny_model_dir: Path, tmp_path: Path) -> None:
    """`transformers: {kv_cache_tokens: N}` overrides --transformers-kv-cache-tokens for one entry;
    an entry with a cache of its own is its own copy of the weights (its own manager)."""
    from webui.errors import ConfigError
    from webui.models.specs import parse_specs

    own = {**LONG, "name": "own", "transformers": {"kv_cache_tokens": 600}}
    shared = {**LONG, "name": "global", "sampling": {"max_new_tokens": 16}}
    models = write_tiny_models(tmp_path, tiny_model_dir, [own, shared])
    registry = _registry(models, tmp_path, transformers_kv_cache_tokens=256)
    try:
        own, shared = registry.get("own"), registry.get("global")
        assert (own.batching.kv_cache_tokens, shared.batching.kv_cache_tokens) == (768, 256)  # whole pages
        assert (own.context_length, shared.context_length) == (768, 256)
        assert "the paged KV cache's 768 tokens" in registry.status("own").engine
    finally:
        registry.close()
    entry = {"name": "m", "backend": "transformers", "source": str(tiny_model_dir)}
    for bad, says in (
        ({"kv_cache_tokens": 0}, "'transformers.kv_cache_tokens': Input should be greater than or equal to 1"),
        ({"kv_cache": 512}, "'transformers.kv_cache': unknown key in 'transformers'; known: kv_cache_tokens"),
    ):
        with pytest.raises(ConfigError, match=re.escape(says)):
            parse_specs({"models": [{**entry, "transformers": bad}]})


def test_an_architecture_the_manager_refuses_is_served_by_generate_with_the_reason(tmp_path: Path) -> None:
    import torch
    from transformers import AutoTokenizer, MambaConfig, MambaForCausalLM

    folder = build_tiny_model(tmp_path / "tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(0)
    config = MambaConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2, state_size=4, eos_token_id=3)
    MambaForCausalLM(config).save_pretrained(tmp_path / "mamba")
    tokenizer.save_pretrained(tmp_path / "mamba")
    models = write_tiny_models(
        tmp_path, tmp_path / "mamba", [{"name": "mamba", "backend": "transformers", "source": str(tmp_path / "mamba")}]
    )
    registry = _registry(models, tmp_path)
    try:
        engine = registry.status("mamba").engine
        assert "one generate() per reply: continuous batching cannot run MambaForCausalLM" in engine
        backend = registry.get("mamba")
        assert backend.batching is None
        assert backend.slots.size == registry.settings.max_concurrency  # one generate() thread per slot
        _text, final = collect(backend.stream(HELLO, SamplingParams(temperature=0, max_new_tokens=4, ignore_eos=True)))
        assert (final.reason, final.completion_tokens) == (FinishReason.LENGTH, 4)
    finally:
        registry.close()


def test_a_cache_larger_than_free_memory_is_refused_at_load_saying_so(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A cache the machine cannot hold (2**40 tokens: 256 TiB for the tiny model) is not handed to
    the manager, which would allocate it at once (or, overcommitted, be killed for it later): the
    model runs on generate() and its status says how much the cache needs and what fits."""
    huge = {"name": "huge", "backend": "transformers", "sampling": {"max_new_tokens": 16}}
    models = write_tiny_models(tmp_path, tiny_model_dir, [{**huge, "transformers": {"kv_cache_tokens": 2**40}}])
    registry = _registry(models, tmp_path)
    try:
        engine = registry.status("huge").engine
        said = re.search(
            r"one generate\(\) per reply: its paged KV cache of 1099511627776 tokens needs 262144\.0 GiB, more than "
            r"80% of the [\d.]+ GiB free on cpu: lower kv_cache_tokens \(models file\) or "
            r"--transformers-kv-cache-tokens to at most (\d+)\)",
            engine,
        )
        assert said, engine
        assert 0 < int(said[1]) < 2**40 and int(said[1]) % 256 == 0
        _serves_on_generate(registry, "huge")
    finally:
        registry.close()


def test_the_cache_estimate_is_what_the_manager_allocates(batched: Registry) -> None:
    from webui.engine.batching_load import cache_bytes

    batching = batched.get("tiny-a").batching
    model = batched.get("tiny-a").model
    cache = batching.manager.batch_processor.cache
    allocated = cache.num_sectors * cache.bytes_per_sector  # without the two trash sectors
    assert cache.num_blocks * 256 == batching.kv_cache_tokens == 8192
    assert cache_bytes(model.config, model.dtype, batching.kv_cache_tokens) == allocated


def test_a_cache_that_cannot_hold_the_entrys_own_reply_is_refused_at_load(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Every reply with the entry's settings (300 new tokens) would be refused by a cache of 256:
    the generate() path serves the entry, and the status says what cache size would do."""
    wordy = {**LONG, "name": "wordy", "sampling": {"temperature": 0, "max_new_tokens": 300}}
    models = write_tiny_models(tmp_path, tiny_model_dir, [wordy])
    registry = _registry(models, tmp_path, transformers_kv_cache_tokens=256)
    try:
        engine = registry.status("wordy").engine
        assert re.search(
            r"one generate\(\) per reply: its paged KV cache of 256 tokens cannot hold a reply of max_new_tokens 300 "
            r"\(sampling\) after the \d+-token prompt of a one-word message: raise kv_cache_tokens \(models file\) "
            r"or --transformers-kv-cache-tokens to at least 512, or lower max_new_tokens",
            engine,
        ), engine
        backend = registry.get("wordy")
        assert backend.batching is None and backend.context_length == 1024
        _text, final = collect(backend.stream(HELLO, backend.default_params().replace(ignore_eos=True)))
        assert (final.reason, final.completion_tokens) == (FinishReason.LENGTH, 300)
    finally:
        registry.close()


def test_auto_falling_back_to_transformers_sizes_the_entrys_own_cache(tiny_model_dir: Path, tmp_path: Path) -> None:
    """`backend: auto` takes the same `transformers: {kv_cache_tokens: N}` as `backend: transformers`,
    for when it falls back to transformers (here: vLLM and llama.cpp turned off)."""
    own = {"name": "own", "context_length": 1024, "sampling": {"max_new_tokens": 16}}
    models = write_tiny_models(tmp_path, tiny_model_dir, [{**own, "transformers": {"kv_cache_tokens": 600}}])
    registry = _registry(models, tmp_path, transformers_kv_cache_tokens=256, vllm_python="none", llama_server="none")
    try:
        backend = registry.get("own")
        assert (backend.batching.kv_cache_tokens, backend.context_length) == (768, 768)
        engine = registry.status("own").engine
        assert engine.startswith("transformers: ") and "the paged KV cache's 768 tokens" in engine, engine
        _text, final = collect(backend.stream(HELLO, GREEDY.replace(max_new_tokens=4)))
        assert (final.reason, final.completion_tokens) == (FinishReason.LENGTH, 4)
    finally:
        registry.close()


_LEFT_OPEN = """
import sys
from pathlib import Path
from webui.config import Settings
from webui.engine import collect
from webui.engine.registry import build_registry
from webui.types import Message, SamplingParams

folder = Path(sys.argv[2])
settings = Settings(models_file=Path(sys.argv[1]), log_dir=folder / "logs", cache_dir=folder / "cache",
                    transformers_batching="on")
registry = build_registry(settings)
registry.load("tiny-a")  # in this (the main) thread, as a script or a bench does
backend = registry.get("tiny-a")
assert backend.batching is not None, "not on continuous batching"
text, _ = collect(backend.stream([Message("user", "hi")], SamplingParams(temperature=0, max_new_tokens=4)))
print("replied", flush=True)
"""  # and ends without closing the registry


def test_a_script_that_never_closes_its_registry_still_exits(tiny_models: Path, tmp_path: Path) -> None:
    """The manager's loop thread must not keep the interpreter alive (it did: a non-daemon thread)."""
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _LEFT_OPEN, str(tiny_models), str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=root,
        )
    except subprocess.TimeoutExpired as stuck:
        pytest.fail(f"the script replied, then never exited: {stuck.stdout!r}")
    assert done.returncode == 0 and "replied" in done.stdout, done.stderr[-2000:]


def test_a_transformers_without_the_batching_api_serves_on_generate_saying_so(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app's pin is transformers>=5.0, and the manager's API moved between 5.x releases: an
    install without the module our engine imports still serves, one generate() per reply."""
    monkeypatch.delitem(sys.modules, "webui.engine.batching")
    monkeypatch.setitem(sys.modules, "transformers.generation.continuous_batching.cb_logits_processors", None)
    models = write_tiny_models(tmp_path, tiny_model_dir, [{"name": "old", "backend": "transformers"}])
    registry = _registry(models, tmp_path)
    try:
        engine = registry.status("old").engine
        assert re.search(r"one generate\(\) per reply: transformers [\d.]+ lacks the continuous-batching API", engine)
        _serves_on_generate(registry, "old")
    finally:
        registry.close()


def test_auto_serves_a_model_on_a_cpu_with_generate_and_says_nothing_of_it(tiny_models: Path, tmp_path: Path) -> None:
    """The default, auto: the batch for a model on a GPU; on a CPU one generate() per reply, which is
    no fallback, so the status gives no reason."""
    registry = _registry(tiny_models, tmp_path, transformers_batching="auto")
    try:
        engine = registry.status("tiny-a").engine
        assert engine.startswith("transformers") and "batching" not in engine and "generate()" not in engine, engine
        _serves_on_generate(registry, "tiny-a")
    finally:
        registry.close()

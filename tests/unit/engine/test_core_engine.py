"""The transformers engine on a real tiny Llama: event sequences, cancellation, errors, seeds."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from webui.engine import collect
from webui.errors import Overloaded, ParamError, PromptTooLong
from webui.types import Finished, FinishReason, Message, SamplingParams, TextDelta

HELLO = [Message("user", "hello world")]
LONG = SamplingParams(temperature=0, max_new_tokens=200, ignore_eos=True)


def _generate_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("generate:")]


def test_stream_is_deltas_then_one_finished(registry, no_thread_leak) -> None:
    events = list(
        registry.get("tiny-a").stream(HELLO, SamplingParams(temperature=0, max_new_tokens=12, ignore_eos=True))
    )
    assert all(isinstance(e, TextDelta) for e in events[:-1]) and len(events) > 1
    final = events[-1]
    assert isinstance(final, Finished)
    assert final.reason is FinishReason.LENGTH
    assert final.completion_tokens == 12
    assert final.prompt_tokens == 5  # <|user|> hello world <|end|> <|assistant|>
    assert final.prompt == "<|user|> hello world <|end|> <|assistant|> "
    assert final.ttft_s is not None and final.ttft_s >= 0 and final.tokens_per_s and final.tokens_per_s > 0
    # the streamed text is exactly what a plain greedy generate decodes to
    backend = registry.get("tiny-a")
    ids = backend.tokenizer(final.prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    out = backend.model.generate(ids, max_new_tokens=12, min_new_tokens=12, do_sample=False)
    expected = backend.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    assert "".join(e.text for e in events[:-1]) == expected


def test_greedy_is_deterministic_and_seed_reproduces_sampling(registry) -> None:
    backend = registry.get("tiny-b")
    greedy = SamplingParams(temperature=0, max_new_tokens=16, ignore_eos=True)
    assert collect(backend.stream(HELLO, greedy))[0] == collect(backend.stream(HELLO, greedy))[0]
    seeded = SamplingParams(temperature=1.5, max_new_tokens=16, seed=1234, ignore_eos=True)
    first = collect(backend.stream(HELLO, seeded))[0]
    assert collect(backend.stream(HELLO, seeded))[0] == first
    others = {collect(backend.stream(HELLO, seeded.replace(seed=s)))[0] for s in range(5)}
    assert len(others) > 1, "different seeds should give different samples"


def test_same_seed_concurrently_gives_same_output(registry) -> None:
    backend = registry.get("tiny-b")
    seeded = SamplingParams(temperature=1.5, max_new_tokens=24, seed=99, ignore_eos=True)
    alone = collect(backend.stream(HELLO, seeded))[0]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: collect(backend.stream(HELLO, seeded))[0], range(2)))
    assert results == [alone, alone]


def test_cancel_event_stops_the_model(registry, no_thread_leak) -> None:
    cancel = threading.Event()
    stream = registry.get("tiny-a").stream(
        HELLO, SamplingParams(temperature=0, max_new_tokens=200, ignore_eos=True), cancel
    )
    events = []
    for event in stream:
        events.append(event)
        if len(events) == 2:
            cancel.set()
    final = events[-1]
    assert final.reason is FinishReason.CANCELLED
    assert final.completion_tokens < 200
    assert not _generate_threads()


def test_closing_the_iterator_ends_the_generate_thread(generate_registry, no_thread_leak) -> None:
    stream = generate_registry.get("tiny-a").stream(HELLO, LONG.replace(max_new_tokens=255 - 5))
    next(stream)
    assert _generate_threads()
    stream.close()
    assert not [t for t in _generate_threads() if t.is_alive()]
    assert generate_registry.get("tiny-a").slots.busy == 0


def test_never_iterated_stream_can_be_closed(registry, no_thread_leak) -> None:
    stream = registry.get("tiny-a").stream(HELLO, LONG)
    stream.close()
    assert not _generate_threads()


def test_fault_in_forward_pass_becomes_an_error_event(registry, no_thread_leak) -> None:
    backend = registry.get("tiny-a")
    calls = {"n": 0}

    def explode(module, args):
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("injected fault")

    handle = backend.model.model.layers[0].register_forward_pre_hook(explode)
    try:
        _text, final = collect(backend.stream(HELLO, LONG))
    finally:
        handle.remove()
    assert final.reason is FinishReason.ERROR
    assert "injected fault" in (final.error or "")
    assert final.completion_tokens == 3
    assert (
        collect(backend.stream(HELLO, SamplingParams(temperature=0, max_new_tokens=4, ignore_eos=True)))[1].reason
        is FinishReason.LENGTH
    )


def test_stop_string_ends_generation_and_is_trimmed(registry) -> None:
    backend = registry.get("tiny-a")
    params = SamplingParams(temperature=0, max_new_tokens=30, ignore_eos=True)
    text, _ = collect(backend.stream(HELLO, params))
    words = text.split()
    stop_word = words[5]
    expected = text[: text.index(stop_word)]
    cut, final = collect(backend.stream(HELLO, params.replace(stop=[stop_word])))
    assert cut == expected
    assert final.reason is FinishReason.STOP
    assert stop_word not in cut


def test_bad_parameters_and_long_prompts_fail_before_streaming(registry) -> None:
    backend = registry.get("tiny-a")
    with pytest.raises(ParamError) as info:
        backend.stream(HELLO, SamplingParams(top_p=0))
    assert info.value.param == "top_p"
    with pytest.raises(ParamError, match="max_new_tokens"):
        backend.stream(HELLO, SamplingParams(max_new_tokens=10_000))  # the tiny context is 256
    with pytest.raises(PromptTooLong):
        backend.stream([Message("user", "hello " * 300)], SamplingParams(max_new_tokens=10))
    assert backend.slots.busy == 0


def test_requests_beyond_the_limit_wait_then_time_out(registry, no_thread_leak) -> None:
    backend = registry.get("tiny-a")
    held = [backend.stream(HELLO, LONG) for _ in range(backend.slots.size)]
    backend.queue_timeout_s = 0.2
    try:
        with pytest.raises(Overloaded, match="busy"):
            backend.stream(HELLO, LONG)
    finally:
        for stream in held:
            stream.close()
    assert (
        collect(backend.stream(HELLO, SamplingParams(temperature=0, max_new_tokens=2, ignore_eos=True)))[
            1
        ].completion_tokens
        == 2
    )


def test_fschat_entry_uses_plain_template_and_bos(registry) -> None:
    backend = registry.get("tiny-fschat")
    final = collect(backend.stream(HELLO, SamplingParams(temperature=0, max_new_tokens=3, ignore_eos=True)))[1]
    assert final.prompt.endswith("### Human: hello world\n### Assistant:")
    assert backend.tokenizer(final.prompt)["input_ids"][0] == backend.tokenizer.bos_token_id

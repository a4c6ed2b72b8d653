"""The OpenAI-compatible API, driven by the official `openai` client against a running server (the
same app as `python app.py`, UI mounted at "/"), on the tiny random-weight Llama.

Random weights emit EOS early, so tests that need a known length send `ignore_eos` and check for
finish_reason "length". "tiny-long" has a long context and one generation slot: a stream there runs
for ~25 s unless something stops it, which is what the cancellation tests need.

Every answer the openai client gets here is also validated against the openai package's own types
(`tests/integration/test_api_shapes.py`): the client alone builds its objects without checking them.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from tests.integration.apiserver import (
    STOP_S,
    RunningServer,
    alive_threads,
    decoding_steps,
    start_app,
    threads_end_within,
)
from tests.integration.test_api_shapes import Checked, checked_http_client
from tests.tiny import tiny_models
from webui.config import Settings

LONG = {"max_tokens": 3000, "extra_body": {"ignore_eos": True}}  # ~25 s on the tiny model


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> RunningServer:
    root = tmp_path_factory.mktemp("api")
    entries = [
        "tiny-a",
        {"name": "tiny-sampled", "sampling": {"temperature": 0.9, "max_new_tokens": 16}},
        # dtype fp32: its own copy of the weights, so that its single slot is its own
        {"name": "tiny-long", "dtype": "fp32", "context_length": 4096, "max_concurrency": 1,
         "sampling": {"temperature": 0, "max_new_tokens": 16}},
    ]  # fmt: skip
    models = tiny_models(root, tiny_model_dir, entries, max_new_tokens=16)
    settings = Settings(
        models_file=models, log_dir=root / "logs", cache_dir=root / "cache", queue_timeout_s=1.0, rate_messages=0
    )  # one client sends far more than 20 a minute here (limits: test_api_limits.py)
    running = start_app(settings)
    yield running
    running.stop()


@pytest.fixture
def client(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.v1, api_key="unused", max_retries=0, timeout=60, http_client=checked_http_client()
    )


def _hello(**kwargs):
    return {
        "model": "tiny-a",
        "messages": [{"role": "user", "content": "hello what is the capital of france"}],
        **kwargs,
    }


# ---- happy paths --------------------------------------------------------------------------------
def test_models_lists_every_entry_with_its_status(client: openai.OpenAI) -> None:
    models = {m.id: m for m in client.models.list().data}
    assert set(models) == {"tiny-a", "tiny-sampled", "tiny-long"}
    assert all(m.model_extra["status"] == "ready" for m in models.values())
    assert models["tiny-long"].model_extra["context_length"] == 4096
    assert client.models.retrieve("tiny-a").id == "tiny-a"


def test_chat_whole_and_streamed_agree_with_usage(client: openai.OpenAI, no_thread_leak: None) -> None:
    whole = client.chat.completions.create(**_hello(max_tokens=6), extra_body={"ignore_eos": True})
    choice = whole.choices[0]
    assert choice.finish_reason == "length"
    assert choice.message.role == "assistant" and choice.message.content
    assert whole.usage.completion_tokens == 6
    assert whole.usage.prompt_tokens > 0
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + 6

    chunks = list(
        client.chat.completions.create(
            **_hello(max_tokens=6), stream=True, extra_body={"ignore_eos": True}, stream_options={"include_usage": True}
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len({c.id for c in chunks}) == 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content  # greedy: the same answer either way
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens


def test_stream_without_include_usage_has_no_usage_chunk(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(**_hello(max_tokens=3), stream=True))
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


def test_raw_sse_ends_with_done(server: RunningServer) -> None:
    with httpx.stream("POST", f"{server.v1}/chat/completions", json=_hello(max_tokens=3, stream=True)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"


def test_completions_whole_and_streamed(client: openai.OpenAI, no_thread_leak: None) -> None:
    args = {"model": "tiny-a", "prompt": "the cat sat on the", "max_tokens": 5, "extra_body": {"ignore_eos": True}}
    whole = client.completions.create(**args)
    assert whole.object == "text_completion"
    assert whole.choices[0].finish_reason == "length" and whole.usage.completion_tokens == 5
    assert whole.usage.prompt_tokens == 6  # BOS + five words: the raw prompt, no chat template
    chunks = list(client.completions.create(**args, stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole.choices[0].text
    assert chunks[-1].usage.completion_tokens == 5


def test_stop_sequence_cuts_the_answer(client: openai.OpenAI) -> None:
    full = (
        client.chat.completions.create(**_hello(max_tokens=12), extra_body={"ignore_eos": True})
        .choices[0]
        .message.content
    )
    words = full.split()
    stop = next((w for w in words[1:] if full.find(w) > 0), None)
    assert stop, f"need a word not at the start of {full!r}"
    cut = client.chat.completions.create(**_hello(max_tokens=12), stop=[stop, "zzz"], extra_body={"ignore_eos": True})
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == full[: full.find(stop)]
    streamed = client.chat.completions.create(
        **_hello(max_tokens=12), stop=stop, stream=True, extra_body={"ignore_eos": True}
    )
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == full[: full.find(stop)]


def test_seed_makes_sampling_repeatable(client: openai.OpenAI) -> None:
    def ask() -> str:
        reply = client.chat.completions.create(
            **{**_hello(max_tokens=8), "model": "tiny-sampled"}, seed=7, extra_body={"ignore_eos": True}
        )
        return reply.choices[0].message.content

    assert ask() == ask()


def test_every_answer_was_checked_against_openai_types(client: openai.OpenAI) -> None:
    before = Checked.count
    client.chat.completions.create(**_hello(max_tokens=2), stream=True).close()
    client.completions.create(model="tiny-a", prompt="hello", max_tokens=2)
    assert Checked.count > before + 2


# ---- values at the ends of their ranges ---------------------------------------------------------
@pytest.mark.parametrize(
    "values",
    [
        {"temperature": 1e-45},
        {"temperature": 5e-324},
        {"repetition_penalty": 1e-300},
        {"repetition_penalty": 5e-324, "temperature": 2},
        {"temperature": 1e-45, "repetition_penalty": 1e-300},
        {"top_p": 1e-300},
        {"temperature": 2, "top_p": 1, "top_k": 1_000_000, "repetition_penalty": 2},
        {"temperature": 1e-45, "top_k": 1},
    ],
)
def test_every_value_the_validator_accepts_generates(client: openai.OpenAI, values: dict) -> None:
    """Each was a 500 "probability tensor contains either inf, nan or element < 0" once."""
    for stream in (False, True):
        reply = client.chat.completions.create(
            **{**_hello(max_tokens=5), "model": "tiny-sampled"},
            seed=1,
            stream=stream,
            extra_body={"ignore_eos": True, **values},
        )
        if stream:
            chunks = list(reply)
            assert chunks[-1].choices[0].finish_reason == "length"
        else:
            assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 5


def test_a_tiny_temperature_is_greedy(client: openai.OpenAI) -> None:
    def answer(**values: float) -> str:
        return (
            client.chat.completions.create(
                **{**_hello(max_tokens=8), "model": "tiny-sampled"}, extra_body={"ignore_eos": True, **values}
            )
            .choices[0]
            .message.content
        )

    assert answer(temperature=1e-45) == answer(temperature=1e-6) == answer(temperature=0)


# ---- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "param"),
    [
        ({"n": 2}, "n"),
        ({"temperature": 3}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"extra_body": {"top_k": -1}}, "top_k"),
        ({"extra_body": {"repetition_penalty": 5}}, "repetition_penalty"),
        ({"extra_body": {"best_of": 3}}, "best_of"),  # unknown to chat: would change behaviour
        ({"logit_bias": {"5": 10}}, "logit_bias"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
    ],
)
def test_bad_parameters_are_400_with_openai_error_body(client: openai.OpenAI, changes: dict, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**{**_hello(max_tokens=4), **changes})
    assert caught.value.status_code == 400
    body = caught.value.body
    assert set(body) == {"message", "type", "param", "code"}
    assert body["type"] == "invalid_request_error" and body["param"] == param
    assert param.split(".")[0] in body["message"]


def test_harmless_openai_fields_are_accepted(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        **_hello(max_tokens=2),
        user="u1",
        logprobs=False,
        presence_penalty=0,
        metadata={"k": "v"},
        response_format={"type": "text"},
    )
    assert reply.choices[0].message.content is not None


def test_unknown_model_is_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(**{**_hello(), "model": "gpt-17"})
    assert caught.value.body["code"] == "model_not_found" and caught.value.body["param"] == "model"
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-17", prompt="hello")


def test_prompt_too_long_says_by_how_much(client: openai.OpenAI) -> None:
    prompt_tokens = client.chat.completions.create(**_hello(max_tokens=1)).usage.prompt_tokens
    context = 256  # the tiny model's max_position_embeddings
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**_hello(max_tokens=context - prompt_tokens + 3))
    body = caught.value.body
    assert body["code"] == "context_length_exceeded" and body["param"] == "messages"
    assert "3 tokens too many" in body["message"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="tiny-a", prompt="hello " * 300)
    assert caught.value.body["param"] == "prompt" and "tokens too many" in caught.value.body["message"]


def test_long_conversation_without_max_tokens_is_refused_not_truncated(client: openai.OpenAI) -> None:
    turns = [{"role": "user", "content": "hello " * 70}, {"role": "assistant", "content": "yes " * 70}] * 2
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="tiny-a", messages=[*turns, {"role": "user", "content": "hello"}])
    assert caught.value.body["code"] == "context_length_exceeded"


def test_bad_json_is_400(server: RunningServer) -> None:
    response = httpx.post(
        f"{server.v1}/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


# ---- load and cancellation ----------------------------------------------------------------------
class LongStream:
    """A streaming chat request on tiny-long, read up to its first text and then left open.
    (The line iterator is kept: dropping it would close the connection, which is a disconnect.)"""

    def __init__(self, server: RunningServer) -> None:
        body = {
            "model": "tiny-long",
            "messages": [{"role": "user", "content": "hello"}],
            "stream": True,
            "max_tokens": LONG["max_tokens"],
            **LONG["extra_body"],
        }
        self.client = httpx.Client(timeout=30)
        request = self.client.build_request("POST", f"{server.v1}/chat/completions", json=body)
        self.response = self.client.send(request, stream=True)
        assert self.response.status_code == 200
        self.lines = self.response.iter_lines()
        while '"delta":{"content":' not in next(self.lines):  # the role chunk comes first
            pass

    def close(self) -> None:
        self.response.close()
        self.client.close()


def test_client_disconnect_stops_generation(server: RunningServer, no_thread_leak: None) -> None:
    with decoding_steps(server, "tiny-long") as steps:
        stream = LongStream(server)
        next(stream.lines)
        assert alive_threads("generate:tiny-long"), "the generation should be running"
        stream.close()
        threads_end_within("generate:tiny-long", STOP_S)
    assert len(steps) < LONG["max_tokens"], "the generation ran to its end after the client left"


def test_non_streaming_client_that_gives_up_stops_generation(server: RunningServer, no_thread_leak: None) -> None:
    body = {
        "model": "tiny-long",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 3000,
        "ignore_eos": True,
    }
    with decoding_steps(server, "tiny-long") as steps:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{server.v1}/chat/completions", json=body, timeout=httpx.Timeout(30, read=1.0))
        threads_end_within("generate:tiny-long", STOP_S)
    assert len(steps) < body["max_tokens"], "the generation ran to its end after the client left"


def test_full_queue_is_429_with_retry_after(server: RunningServer, client: openai.OpenAI, no_thread_leak: None) -> None:
    stream = LongStream(server)  # holds tiny-long's only slot
    try:
        with pytest.raises(openai.RateLimitError) as caught:
            client.chat.completions.create(
                model="tiny-long", messages=[{"role": "user", "content": "hi"}], max_tokens=2
            )
        assert caught.value.status_code == 429
        assert int(caught.value.response.headers["retry-after"]) >= 1
        assert caught.value.body["code"] == "model_overloaded"
    finally:
        stream.close()
    threads_end_within("generate:tiny-long", STOP_S)


def test_model_list_does_not_reveal_which_models_are_busy(server: RunningServer, client: openai.OpenAI) -> None:
    """A battle streams two hidden models; /v1/models must look the same while they run."""
    idle = client.models.list().model_dump()
    stream = LongStream(server)
    try:
        assert client.models.list().model_dump() == idle
    finally:
        stream.close()
    threads_end_within("generate:tiny-long", STOP_S)


def test_ui_still_served_beside_the_api(server: RunningServer) -> None:
    assert httpx.get(f"{server.url}/").status_code == 200
    assert httpx.get(f"{server.url}/healthz").json()["status"] == "ok"

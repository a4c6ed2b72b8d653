"""The API on a transformers model whose paged KV cache (continuous batching) is smaller than its
context: a request that cannot fit the cache is refused with 400, and the message names the cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.apps import RunningServer, start_app
from tests.integration.test_api_shapes import checked_http_client
from tests.tiny import tiny_models
from webui.config import Settings

CACHE = "this model's paged KV cache of 256 tokens"


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("api-cache")
    entry = {"name": "tiny", "backend": "transformers", "context_length": 1024}
    models = tiny_models(root, tiny_model_dir, [{**entry, "sampling": {"temperature": 0, "max_new_tokens": 16}}])
    settings = Settings(
        models_file=models,
        log_dir=root / "logs",
        cache_dir=root / "cache",
        rate_messages=0,
        transformers_batching="on",
        transformers_kv_cache_tokens=256,
    )
    running = start_app(settings, ui=False)
    yield running
    running.stop()


@pytest.fixture
def client(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.v1, api_key="unused", max_retries=0, timeout=60, http_client=checked_http_client()
    )


def _hello(**kwargs: object) -> dict[str, object]:
    return {"model": "tiny", "messages": [{"role": "user", "content": "hello world"}], **kwargs}


def test_max_tokens_beyond_the_cache_names_it(client: openai.OpenAI) -> None:
    for max_tokens in (300, 1000):  # past the cache; the second fits the model's context of 1024
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(**_hello(max_tokens=max_tokens))
        body = caught.value.body
        assert (body["param"], body["code"]) == ("max_tokens", "invalid_value")
        assert body["message"] == (
            f"max_tokens: must be 1..256, got {max_tokens}: a prompt and its reply must fit in {CACHE} "
            "(kv_cache_tokens in the models file, --transformers-kv-cache-tokens)"
        )


def test_a_prompt_and_max_tokens_beyond_the_cache_names_it(client: openai.OpenAI) -> None:
    prompt = client.chat.completions.create(**_hello(max_tokens=1)).usage.prompt_tokens
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**_hello(max_tokens=256 - prompt + 3))
    body = caught.value.body
    assert (body["param"], body["code"]) == ("messages", "context_length_exceeded")
    assert f"but only {prompt - 3} fit in {CACHE}" in body["message"] and "3 tokens too many" in body["message"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="tiny", prompt="hello " * 300, max_tokens=4)
    assert caught.value.body["param"] == "prompt" and CACHE in caught.value.body["message"]
    reply = client.chat.completions.create(**_hello(max_tokens=256 - prompt, extra_body={"ignore_eos": True}))
    assert reply.usage.completion_tokens == 256 - prompt  # exactly full: served

"""The API's pure parts: request validation, the error mapping, SSE framing, keys. No model runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import ValidationError

from webui.api import install_api
from webui.api.errors import from_arena, from_finished, from_validation
from webui.api.responses import Reply, sse_stream
from webui.api.schemas import ChatCompletionRequest, CompletionRequest
from webui.config import Settings
from webui.engine.openai_remote import upstream_sampling
from webui.engine.registry import Registry
from webui.errors import ModelNotFound, ModelNotReady, Overloaded, ParamError, PromptTooLong
from webui.models.specs import load_specs, parse_specs
from webui.records.events import NullRecorder
from webui.services import Services
from webui.types import Finished, FinishReason, Message, SamplingParams, TextDelta

ASSETS = Path(__file__).resolve().parents[2] / "assets"


def chat(**fields: object) -> ChatCompletionRequest:
    body = ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields})
    body.check()
    return body


# ---- request bodies -----------------------------------------------------------------------------
def test_overrides_use_our_names_and_only_what_was_given() -> None:
    body = chat(max_tokens=7, temperature=0, seed=3, top_k=5, ignore_eos=True)
    assert body.overrides() == {"max_new_tokens": 7, "temperature": 0, "seed": 3, "top_k": 5, "ignore_eos": True}
    assert chat().overrides() == {}
    assert chat(stop="x").stop_list() == ("x",) and chat(stop=["a", "b"]).stop_list() == ("a", "b")


def test_message_forms() -> None:
    body = chat(messages=[{"role": "developer", "content": "be brief"},
                          {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
    assert body.to_messages() == [Message("system", "be brief"), Message("user", "ab")]


@pytest.mark.parametrize(("fields", "param"), [
    ({"frobnicate": 1}, "frobnicate"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"tools": [{"type": "function"}]}, "tools"),
    ({"logprobs": True}, "logprobs"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages.0.content"),
    ({"stream": "yes"}, "stream"),
])
def test_invalid_bodies_name_the_field(fields: dict, param: str) -> None:
    with pytest.raises(ValidationError) as caught:
        chat(**fields)
    error = from_validation(caught.value)
    assert error.status == 400 and error.param is not None and error.param.startswith(param)
    assert error.message.startswith(param)


def test_harmless_fields_pass() -> None:
    chat(user="u", logprobs=False, presence_penalty=0, frequency_penalty=0, logit_bias={}, store=False,
         stream=True, stream_options={"include_usage": True, "include_obfuscation": False}, n=1)


@pytest.mark.parametrize(("fields", "param"), [
    ({"n": 3}, "n"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
    ({"max_tokens": 5, "max_completion_tokens": 6}, "max_completion_tokens"),
])
def test_rules_beyond_types(fields: dict, param: str) -> None:
    with pytest.raises(ParamError) as caught:
        chat(**fields)
    assert caught.value.param == param


def test_max_completion_tokens_is_max_tokens() -> None:
    assert chat(max_completion_tokens=9).overrides()["max_new_tokens"] == 9


def test_completion_prompt_forms() -> None:
    body = CompletionRequest.model_validate({"model": "m", "prompt": ["one"]})
    body.check()
    assert body.prompt_text() == "one"
    for prompt in (["a", "b"], ""):
        with pytest.raises(ParamError):
            CompletionRequest.model_validate({"model": "m", "prompt": prompt}).check()
    with pytest.raises(ValidationError):
        CompletionRequest.model_validate({"model": "m", "prompt": "x", "echo": True})


# ---- error mapping ------------------------------------------------------------------------------
def test_each_error_has_its_status() -> None:
    assert from_arena(ParamError("max_new_tokens", "must be 1..256, got 0")).param == "max_tokens"
    too_long = from_arena(PromptTooLong(300, 250), max_tokens=6)
    assert (too_long.status, too_long.code) == (400, "context_length_exceeded")
    assert "50 tokens too many" in too_long.message and "max_tokens=6" in too_long.message
    assert from_arena(ModelNotFound("no model named 'x'")).status == 404
    busy = from_arena(Overloaded("m", 3.2))
    assert busy.status == 429 and busy.headers["Retry-After"] == "3"
    assert from_arena(ModelNotReady("m is not ready (loading)")).status == 503


def test_generation_errors_keep_upstream_meaning() -> None:
    def final(**extra: object) -> Finished:
        return Finished(FinishReason.ERROR, error="boom", extra=extra)

    assert from_finished(final()).status == 500
    assert from_finished(final(upstream="u")).status == 502
    assert from_finished(final(upstream="u", upstream_status=400)).status == 400
    assert from_finished(final(upstream="u", upstream_status=429)).status == 429
    assert from_finished(final(upstream="u", upstream_status=503)).status == 502


# ---- SSE ----------------------------------------------------------------------------------------
async def _events(*events):
    for event in events:
        yield event


def _frames(reply: Reply, events: tuple, include_usage: bool) -> list:
    async def run() -> list[str]:
        return [frame async for frame in sse_stream(reply, _events(*events), include_usage)]

    frames = asyncio.run(run())
    assert all(f.startswith("data: ") and f.endswith("\n\n") for f in frames)
    return [f[6:-2] if f[6:-2] == "[DONE]" else json.loads(f[6:-2]) for f in frames]


def test_sse_order_for_chat() -> None:
    done = Finished(FinishReason.STOP, prompt_tokens=3, completion_tokens=2)
    frames = _frames(Reply("chat", "m"), (TextDelta("a"), TextDelta("b"), done), include_usage=True)
    assert frames[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [f["choices"][0]["delta"].get("content") for f in frames[1:3]] == ["a", "b"]
    assert frames[3]["choices"][0]["finish_reason"] == "stop"
    assert frames[4]["choices"] == [] and frames[4]["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert frames[5] == "[DONE]"
    assert {f["object"] for f in frames[:-1]} == {"chat.completion.chunk"}


def test_sse_error_mid_stream_is_an_error_event() -> None:
    frames = _frames(Reply("text", "m"), (TextDelta("a"), Finished(FinishReason.ERROR, error="gone")), include_usage=True)
    assert frames[0]["choices"][0]["text"] == "a"
    assert frames[1] == {"error": {"message": "gone", "type": "server_error", "param": None, "code": "generation_failed"}}
    assert frames[2] == "[DONE]"


# ---- keys ---------------------------------------------------------------------------------------
def _app(tiny_models_file: Path, keys: tuple[str, ...]) -> TestClient:
    settings = Settings(models_file=tiny_models_file, api_keys=keys)
    registry = Registry(load_specs(tiny_models_file), settings)  # not loaded: listing needs no weights
    app = FastAPI()
    install_api(app, Services(settings, registry, NullRecorder()))
    return TestClient(app)


def test_keys_when_configured(tiny_models_file: Path) -> None:
    client = _app(tiny_models_file, ("k1", "k2"))
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic k1"}):
        response = client.get("/v1/models", headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "invalid_api_key"
    assert client.post("/v1/chat/completions", json={}).status_code == 401  # before the body is looked at
    response = client.get("/v1/models", headers={"Authorization": "Bearer k2"})
    assert response.status_code == 200
    assert [m["status"] for m in response.json()["data"]] == ["unloaded"] * 3


def test_no_keys_by_default(tiny_models_file: Path) -> None:
    assert _app(tiny_models_file, ()).get("/v1/models").status_code == 200


def test_keys_come_from_the_environment_and_stay_out_of_repr() -> None:
    settings = Settings.from_env({"ARENA_API_KEYS": "alpha, beta,"})
    assert settings.api_keys == ("alpha", "beta")
    assert "alpha" not in repr(settings)
    assert Settings.from_env({}).api_keys == ()


# ---- remote pieces ------------------------------------------------------------------------------
def test_upstream_body_sends_extras_only_when_set() -> None:
    assert upstream_sampling(SamplingParams(temperature=0.5, top_p=0.9, max_new_tokens=8)) == {
        "max_tokens": 8, "temperature": 0.5, "top_p": 0.9}
    body = upstream_sampling(SamplingParams(top_k=4, repetition_penalty=1.1, ignore_eos=True, seed=1,
                                            stop=("a", "b", "c", "d", "e")))
    assert body["top_k"] == 4 and body["repetition_penalty"] == 1.1 and body["ignore_eos"] is True
    assert body["seed"] == 1 and body["stop"] == ["a", "b", "c", "d"]  # the fifth is applied on our side


def test_remote_example_file_is_valid() -> None:
    specs = {s.name: s for s in load_specs(ASSETS / "models-remote.example.yaml")}
    remote = [s for s in specs.values() if s.backend == "openai"]
    assert remote and all(s.base_url.endswith("/v1") and s.remote_model for s in remote)
    assert any(s.weight > 0 for s in remote), "the example should put a remote model in the battle pool"


def test_remote_entry_needs_base_url_and_model() -> None:
    from webui.errors import ConfigError

    with pytest.raises(ConfigError, match="base_url"):
        parse_specs({"models": [{"name": "r", "backend": "openai", "remote_model": "m"}]})

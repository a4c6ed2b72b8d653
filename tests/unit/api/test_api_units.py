"""The API's pure parts: request validation, the error mapping, SSE framing, keys. No model runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import ValidationError

from webui.access.ratelimit import Limit, RateLimited
from webui.api import install_api
from webui.api.errors import from_arena, from_finished, from_validation
from webui.api.responses import Reply, sse_stream
from webui.api.schemas import MAX_DEPTH, ChatCompletionRequest, CompletionRequest, check_json
from webui.config import Settings
from webui.engine.registry import Registry
from webui.engine.remote_backend import upstream_sampling
from webui.errors import ConfigError, ModelNotFound, ModelNotReady, Overloaded, ParamError, PromptTooLong
from webui.models.specs import load_specs, parse_specs
from webui.records.events import NullRecorder
from webui.services import Services
from webui.types import RANGES, Finished, FinishReason, Message, SamplingParams, TextDelta

ASSETS = Path(__file__).resolve().parents[3] / "assets"


def chat(**fields: object) -> ChatCompletionRequest:
    body = ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}
    )
    body.check()
    return body


# ---- request bodies -----------------------------------------------------------------------------
def test_overrides_use_our_names_and_only_what_was_given() -> None:
    body = chat(max_tokens=7, temperature=0, seed=3, top_k=5, ignore_eos=True)
    assert body.overrides() == {"max_new_tokens": 7, "temperature": 0, "seed": 3, "top_k": 5, "ignore_eos": True}
    assert chat().overrides() == {}
    assert chat(stop="x").stop_list() == ("x",) and chat(stop=["a", "b"]).stop_list() == ("a", "b")


def test_message_forms() -> None:
    body = chat(
        messages=[
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        ]
    )
    assert body.to_messages() == [Message("system", "be brief"), Message("user", "ab")]


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"frobnicate": 1}, "frobnicate"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"tools": [{"type": "function"}]}, "tools"),
        ({"logprobs": True}, "logprobs"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages.0.content"),
        ({"stream": "yes"}, "stream"),
    ],
)
def test_invalid_bodies_name_the_field(fields: dict, param: str) -> None:
    with pytest.raises(ValidationError) as caught:
        chat(**fields)
    error = from_validation(caught.value)
    assert error.status == 400 and error.param is not None and error.param.startswith(param)
    assert error.message.startswith(param)


def test_harmless_fields_pass() -> None:
    chat(
        user="u",
        logprobs=False,
        presence_penalty=0,
        frequency_penalty=0,
        logit_bias={},
        store=False,
        stream=True,
        stream_options={"include_usage": True, "include_obfuscation": False},
        n=1,
    )


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"n": 3}, "n"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),
        ({"max_tokens": 5, "max_completion_tokens": 6}, "max_completion_tokens"),
    ],
)
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


def test_a_request_whose_own_engine_died_is_503_with_retry_after() -> None:
    """Our vLLM engine gone under the request (it is being restarted): not ready, not a 500."""
    down = from_finished(
        Finished(
            FinishReason.ERROR,
            error="cannot reach http://127.0.0.1:4321/v1/completions",
            extra={"engine": "vllm", "engine_down": True},
        )
    )
    assert (down.status, down.code, down.headers.get("Retry-After")) == (503, "model_not_ready", "5")
    assert "4321" not in down.message


LEAKY = "RuntimeError: probability tensor contains inf at http://10.0.0.7:8000/v1/chat/completions (/srv/x.py)"


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"upstream": "http://10.0.0.7:8000/v1"},
        {"upstream": "http://10.0.0.7:8000/v1", "upstream_status": 503},
        {"upstream": "http://10.0.0.7:8000/v1", "upstream_status": 429},
    ],
)
def test_failures_never_carry_exception_text_or_addresses(extra: dict) -> None:
    error = from_finished(Finished(FinishReason.ERROR, error=LEAKY, extra=extra))
    for leak in ("RuntimeError", "10.0.0.7", "/srv/x.py", "probability"):
        assert leak not in error.message
    assert "10.0.0.7" not in from_arena(ModelNotReady(f"m is not ready (failed: cannot reach {LEAKY})")).message
    assert from_arena(ConfigError("/etc/secret/models.yaml: bad")).message.startswith("The server failed")


def test_an_upstream_refusal_passes_its_own_message_on() -> None:
    refused = from_finished(
        Finished(
            FinishReason.ERROR,
            error=f"http://10.0.0.7/v1 answered HTTP 400: {LEAKY}",
            extra={
                "upstream": "u",
                "upstream_status": 400,
                "upstream_message": "max_tokens is too large (see http://10.0.0.7/docs)",
            },
        )
    )
    assert (refused.status, refused.code) == (400, "upstream_rejected")
    assert "max_tokens is too large" in refused.message and "10.0.0.7" not in refused.message


def test_rate_limited_is_429_with_retry_after() -> None:
    error = from_arena(RateLimited("message", Limit(20, 60.0, "messages"), 12.2))
    assert (error.status, error.type, error.code) == (429, "rate_limit_error", "rate_limit_exceeded")
    assert error.headers["Retry-After"] == "13" and error.message.startswith("Too many messages: at most 20")


# ---- the shared table of ranges -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("temperature", "0.5"),
        ("temperature", True),
        ("temperature", float("nan")),
        ("temperature", float("inf")),
        ("top_p", 0),
        ("top_k", 2**70),
        ("top_k", 1.0),
        ("top_k", True),
        ("repetition_penalty", 0.0),
        ("repetition_penalty", 2.5),
        ("seed", -1),
        ("seed", 2**63),
        ("max_new_tokens", 0),
    ],
)
def test_the_table_refuses(name: str, value: object) -> None:
    with pytest.raises(ParamError) as caught:
        SamplingParams(**{name: value}).validate()  # type: ignore[arg-type]
    assert caught.value.param == name


def test_the_table_names_every_number_and_its_ends_are_safe() -> None:
    assert set(RANGES) == {"temperature", "top_p", "top_k", "max_new_tokens", "repetition_penalty", "seed"}
    tiny = SamplingParams(temperature=1e-45, repetition_penalty=1e-300, top_p=5e-324).validate().effective()
    assert tiny.greedy and tiny.temperature == 0.0 and tiny.repetition_penalty == 0.01 and tiny.top_p == 5e-324
    assert SamplingParams(temperature=0.5, repetition_penalty=1.2).effective() == SamplingParams(
        temperature=0.5, repetition_penalty=1.2
    )
    assert upstream_sampling(SamplingParams(temperature=1e-45))["temperature"] == 0.0
    assert upstream_sampling(SamplingParams(repetition_penalty=1e-300))["repetition_penalty"] == 0.01


# ---- what pydantic would let through -----------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "param"),
    [
        ({"messages": [{"role": "user", "content": "a\ud800"}]}, "messages.0.content"),
        ({"prompt": ["ok", "\udfff"]}, "prompt.1"),
        ({"metadata": {"k\ud800": "v"}}, "metadata"),
        ({"\ud800": 1}, "body"),
        ({"metadata": [[[[[[[[[[[[[[[[[["x"]]]]]]]]]]]]]]]]]]}, "metadata"),
    ],
)
def test_check_json_names_the_field(data: dict, param: str) -> None:
    with pytest.raises(ParamError) as caught:
        check_json(data)
    assert caught.value.param == param
    assert "\ud800" not in str(caught.value) and "\udfff" not in str(caught.value)  # never echoed


def test_check_json_lets_real_bodies_through() -> None:
    check_json(
        {
            "model": "m",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "héllo 🙂"}]}],
            "stop": ["a"],
            "metadata": {"k": "v"},
        }
    )
    deep: list = ["x"]
    for _ in range(MAX_DEPTH - 2):
        deep = [deep]
    check_json({"tools": deep})  # "x" is MAX_DEPTH keys deep: tools.0.0...0
    with pytest.raises(ParamError):
        check_json({"tools": [deep]})


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
    assert frames[4]["choices"] == [] and frames[4]["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "total_tokens": 5,
    }
    assert frames[5] == "[DONE]"
    assert {f["object"] for f in frames[:-1]} == {"chat.completion.chunk"}


def test_sse_error_mid_stream_is_an_error_event() -> None:
    frames = _frames(
        Reply("text", "m"), (TextDelta("a"), Finished(FinishReason.ERROR, error="KeyError: gone")), include_usage=True
    )
    assert frames[0]["choices"][0]["text"] == "a"
    assert set(frames[1]["error"]) == {"message", "type", "param", "code"}
    assert (frames[1]["error"]["type"], frames[1]["error"]["code"]) == ("server_error", "generation_failed")
    assert "gone" not in frames[1]["error"]["message"] and "KeyError" not in frames[1]["error"]["message"]
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
        "max_tokens": 8,
        "temperature": 0.5,
        "top_p": 0.9,
    }
    body = upstream_sampling(
        SamplingParams(top_k=4, repetition_penalty=1.1, ignore_eos=True, seed=1, stop=("a", "b", "c", "d", "e"))
    )
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


# ---- the /v1 guard ------------------------------------------------------------------------------
def _guarded_app() -> TestClient:
    """Our guard around a bare app whose routes fail the ways that escaped the API's own errors."""
    from fastapi.responses import JSONResponse as Json

    from webui.api.guard import OpenAIErrors

    app = FastAPI()

    @app.post("/v1/boom")
    def boom() -> None:
        raise KeyError("/srv/secret.py")

    @app.post("/v1/too-large")
    def too_large() -> Json:  # the shape the size limit in front answers with
        return Json({"error": "Request too large: at most 2 MB."}, status_code=413)

    @app.get("/elsewhere")
    def elsewhere() -> Json:
        return Json({"detail": "not ours"}, status_code=418)

    app.add_middleware(OpenAIErrors, prefix="/v1")
    return TestClient(app, raise_server_exceptions=False)


def test_guard_answers_an_uncaught_exception_with_a_fixed_sentence() -> None:
    response = _guarded_app().post("/v1/boom")
    assert response.status_code == 500
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "server_error"
    assert "secret" not in response.text and "KeyError" not in response.text


def test_guard_reshapes_foreign_errors_on_v1_only() -> None:
    client = _guarded_app()
    too_large = client.post("/v1/too-large")
    assert too_large.status_code == 413
    assert too_large.json()["error"] == {
        "message": "Request too large: at most 2 MB.",
        "type": "invalid_request_error",
        "param": None,
        "code": "request_too_large",
    }
    assert int(too_large.headers["content-length"]) == len(too_large.content)
    missing = client.get("/v1/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert client.get("/elsewhere").json() == {"detail": "not ours"}  # the UI's paths are left alone

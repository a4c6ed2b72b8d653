"""Requests that once crashed the API or leaked its insides, against the real app (UI mounted, size
limit in front) on the tiny model and a stand-in upstream server whose failures name internal paths.

Every answer here goes through `checked_http_client`, which validates it against the openai
package's types: every bad request must be a 4xx OpenAI error object naming the parameter.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from tests.integration.apiserver import RunningServer, serve_app, start_app
from tests.integration.test_api_shapes import checked_http_client
from tests.tiny import tiny_models
from webui.config import Settings

SECRET = "/srv/internal/engine.py"  # what the stand-in upstream puts in its failures


def _upstream_app() -> FastAPI:
    app = FastAPI()

    @app.get("/v1/models")
    def models() -> JSONResponse:
        return JSONResponse(
            {"object": "list", "data": [{"id": "broken", "object": "model"}, {"id": "picky", "object": "model"}]}
        )

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> object:
        body = await request.json()
        if body["model"] == "picky":
            return JSONResponse(
                {
                    "error": {
                        "message": "max_tokens is too large for this server",
                        "type": "x",
                        "param": None,
                        "code": None,
                    }
                },
                status_code=400,
            )
        return PlainTextResponse(f'Traceback (most recent call last):\n  File "{SECRET}"\nKeyError: 7', status_code=500)

    return app


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningServer]:
    running = serve_app(_upstream_app(), name="upstream")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def server(
    tiny_model_dir: Path, upstream: RunningServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("api-errors")
    entries = [
        {"name": "tiny-a", "sampling": {"temperature": 0.8, "max_new_tokens": 8}},
        {"name": "remote-broken", "backend": "openai", "base_url": upstream.v1, "remote_model": "broken"},
        {"name": "remote-picky", "backend": "openai", "base_url": upstream.v1, "remote_model": "picky"},
    ]
    settings = Settings(
        models_file=tiny_models(root, tiny_model_dir, entries),
        log_dir=root / "logs",
        cache_dir=root / "cache",
        queue_timeout_s=5.0,
        rate_messages=0,
        max_request_mb=0.5,
    )
    running = start_app(settings)
    yield running
    running.stop()


@pytest.fixture
def http(server: RunningServer) -> Iterator[httpx.Client]:
    with checked_http_client(base_url=server.v1, timeout=30) as client:
        yield client


def _chat(**fields: object) -> dict:
    return {"model": "tiny-a", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4, **fields}


def _post_raw(http: httpx.Client, path: str, raw: str) -> httpx.Response:
    return http.post(path, content=raw.encode(), headers={"content-type": "application/json"})


def _local_port(response: httpx.Response) -> int:
    return response.extensions["network_stream"].get_extra_info("client_addr")[1]


def assert_refused(response: httpx.Response, status: int, param: str | None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param
    if param:
        assert param in error["message"]
    return error


# ---- item 4: bodies that crashed the server ----------------------------------------------------
LONE = "\\ud800"  # a lone surrogate as JSON writes it: valid JSON, not encodable text


@pytest.mark.parametrize(
    ("path", "raw", "param"),
    [
        (
            "/chat/completions",
            f'{{"model": "tiny-a", "messages": [{{"role": "user", "content": "a{LONE}b"}}]}}',
            "messages.0.content",
        ),
        (
            "/chat/completions",
            f'{{"model": "tiny-a", "messages": [{{"role": "user", "content": '
            f'[{{"type": "text", "text": "{LONE}"}}]}}]}}',
            "messages.0.content.0.text",
        ),
        ("/completions", f'{{"model": "tiny-a", "prompt": "x{LONE}"}}', "prompt"),
        ("/completions", f'{{"model": "tiny-a", "prompt": ["{LONE}"]}}', "prompt.0"),
        (
            "/chat/completions",
            f'{{"model": "tiny-a{LONE}", "messages": [{{"role": "user", "content": "hi"}}]}}',
            "model",
        ),
        (
            "/chat/completions",
            f'{{"model": "tiny-a", "stop": "{LONE}", "messages": [{{"role": "user", "content": "hi"}}]}}',
            "stop",
        ),
    ],
)
def test_lone_surrogate_is_400_naming_the_field_and_keeps_the_connection(
    http: httpx.Client, path: str, raw: str, param: str
) -> None:
    refused = _post_raw(http, path, raw)
    assert_refused(refused, 400, param)
    assert "surrogate" in refused.json()["error"]["message"]
    after = http.post("/chat/completions", json=_chat(max_tokens=1))
    assert after.status_code == 200
    assert _local_port(after) == _local_port(refused), "the keep-alive connection was dropped"


def test_deeply_nested_json_is_400(http: httpx.Client) -> None:
    for depth in (100_000, 5_000, 40):
        nested = "[" * depth + "]" * depth
        refused = _post_raw(
            http,
            "/chat/completions",
            f'{{"model": "tiny-a", "metadata": {nested}, "messages": [{{"role": "user", "content": "hi"}}]}}',
        )
        assert refused.status_code == 400, (depth, refused.text)
    assert http.post("/chat/completions", json=_chat(max_tokens=1)).status_code == 200


def test_too_large_body_is_413_with_an_openai_error(http: httpx.Client) -> None:
    big = _chat(messages=[{"role": "user", "content": "hello " * 200_000}])  # ~1.2 MB over a 0.5 MB limit
    error = assert_refused(http.post("/chat/completions", json=big), 413, None)
    assert error["code"] == "request_too_large" and "0.5 MB" in error["message"]

    def chunks() -> Iterator[bytes]:  # chunked: no Content-Length to refuse on
        yield json.dumps(big).encode()

    assert_refused(
        http.post("/chat/completions", content=chunks(), headers={"content-type": "application/json"}), 413, None
    )


def test_unknown_routes_and_methods_answer_openai_errors(http: httpx.Client) -> None:
    """Starlette's own answers here were `{"detail": "Not Found"}`; the hook checks the shape."""
    assert http.get("/chat/completions").status_code in (404, 405)  # the UI's mount at "/" may answer a GET
    missing = http.post("/embeddings", json={"model": "tiny-a", "input": "x"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"temperature": "0.5"}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"top_p": "1"}, "top_p"),
        ({"top_p": False}, "top_p"),
        ({"repetition_penalty": True}, "repetition_penalty"),
        ({"max_tokens": "5"}, "max_tokens"),
        ({"max_tokens": 5.0}, "max_tokens"),
        ({"seed": True}, "seed"),
        ({"top_k": 2**70}, "top_k"),
        ({"top_k": True}, "top_k"),
        ({"ignore_eos": 1}, "ignore_eos"),
    ],
)
def test_numbers_must_be_numbers_and_in_range(http: httpx.Client, fields: dict, param: str) -> None:
    assert_refused(http.post("/chat/completions", json=_chat(**fields)), 400, param)
    assert_refused(http.post("/completions", json={"model": "tiny-a", "prompt": "hello", **fields}), 400, param)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_400(http: httpx.Client, value: str) -> None:
    raw = f'{{"model": "tiny-a", "temperature": {value}, "messages": [{{"role": "user", "content": "hi"}}]}}'
    assert_refused(_post_raw(http, "/chat/completions", raw), 400, "temperature")


# ---- item 3: no exception text or internal addresses in answers --------------------------------
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_failure_is_502_without_its_address_or_exception(
    http: httpx.Client, upstream: RunningServer, stream: bool
) -> None:
    response = http.post("/chat/completions", json=_chat(model="remote-broken", stream=stream))
    if stream:
        assert response.status_code == 200  # the failure comes as the stream's error event
        events = [line[6:] for line in response.text.split("\n") if line.startswith("data: ")]
        error = json.loads(events[-2])["error"]
    else:
        assert response.status_code == 502
        error = response.json()["error"]
    assert error["code"] == "upstream_failed"
    for leak in (upstream.url.split("//")[1], SECRET, "RemoteError", "Traceback", "KeyError", "HTTP 500"):
        assert leak not in json.dumps(error)


def test_upstream_refusal_passes_its_message_on_without_its_address(
    server: RunningServer, upstream: RunningServer
) -> None:
    client = openai.OpenAI(base_url=server.v1, api_key="unused", max_retries=0, http_client=checked_http_client())
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**_chat(model="remote-picky"))
    assert "max_tokens is too large for this server" in caught.value.body["message"]
    assert upstream.url.split("//")[1] not in caught.value.body["message"]


# ---- hardening item 4: a client's string is never echoed whole ---------------------------------
HUGE = "m" * 300_000  # under the 0.5 MB body limit of this server


@pytest.mark.parametrize(
    "body",
    [
        {"model": HUGE, "messages": [{"role": "user", "content": "hi"}]},  # an unknown model
        _chat(**{HUGE: 1}),  # an unknown field
        {"model": "tiny-a", "messages": [{"role": "user", "content": "hi", HUGE: 1}]},  # one inside a message
    ],
)
def test_an_error_echoes_at_most_the_start_of_what_the_client_sent(http: httpx.Client, body: dict) -> None:
    response = http.post("/chat/completions", json=body)
    assert response.status_code in (400, 404), response.text[:300]
    error = response.json()["error"]
    assert len(response.content) < 2000, response.text[:300]
    assert "m" * 101 not in json.dumps(error) and "…" in error["message"]  # the start, and a sign of the cut

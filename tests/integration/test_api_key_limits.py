"""With API keys configured, the API's rate limit counts per key: several keys behind one address
(one proxy, one office) each have their own budget, and one key spread over many addresses has one.
Without keys it counts per address (tests/integration/test_api_limits.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.apiserver import RunningServer, start_app
from tests.integration.test_api_shapes import checked_http_client
from tests.tiny import tiny_models
from webui.config import Settings

RATE = 3
KEYS = ("key-one-0123456789", "key-two-0123456789", "key-three-0123456789")  # the tests use their own


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("api-key-limits")
    settings = Settings(
        models_file=tiny_models(root, tiny_model_dir, ["tiny-a"], max_new_tokens=1),
        log_dir=root / "logs",
        cache_dir=root / "cache",
        rate_messages=RATE,
        rate_votes=0,
        trusted_proxies=1,
        api_keys=KEYS,
    )
    running = start_app(settings)
    yield running
    running.stop()


def _statuses(server: RunningServer, key: str, address: str, count: int) -> list[int]:
    headers = {"Authorization": f"Bearer {key}", "X-Forwarded-For": address}
    body = {"model": "tiny-a", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 1}
    with checked_http_client(base_url=server.v1, headers=headers) as client:
        return [client.post("/chat/completions", json=body).status_code for _ in range(count)]


def test_two_keys_behind_one_address_each_have_their_own_budget(server: RunningServer) -> None:
    assert _statuses(server, KEYS[0], "198.51.100.7", RATE) == [200] * RATE
    assert _statuses(server, KEYS[1], "198.51.100.7", RATE) == [200] * RATE  # not the first key's budget
    assert _statuses(server, KEYS[0], "198.51.100.7", 1) == [429]


def test_one_key_on_many_addresses_has_one_budget(server: RunningServer) -> None:
    spread = [_statuses(server, KEYS[2], f"203.0.113.{i}", 1)[0] for i in range(RATE + 1)]
    assert spread == [200] * RATE + [429]

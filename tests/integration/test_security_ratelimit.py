"""Rate limits through the real UI, as a script would hit them: the clear message, per action, and
keyed on the client address behind a trusted proxy (another address has its own budget)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from tests.apps import start_app
from tests.servers import RunningServer
from webui.config import Settings


@pytest.fixture(scope="module")
def arena(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> RunningServer:
    from tests.tiny import THREE, tiny_models

    tmp = tmp_path_factory.mktemp("ratelimit")
    settings = Settings(
        models_file=tiny_models(tmp, tiny_model_dir, THREE),
        log_dir=tmp / "logs",
        cache_dir=tmp / "cache",
        rate_messages=2,
        rate_votes=1,
        trusted_proxies=1,
    )
    running = start_app(settings)
    yield running
    running.stop()


def client_from(arena: RunningServer, address: str) -> Client:
    # One trusted proxy: the app believes the last X-Forwarded-For entry, as it would behind a Space's proxy.
    return Client(arena.url, verbose=False, download_files=False, headers={"X-Forwarded-For": address})


def refusal(client: Client, api_name: str, *args: object) -> str:
    with pytest.raises(AppError) as caught:
        client.predict(*args, api_name=api_name)
    return str(caught.value)


def test_messages_and_votes_are_limited_per_client_with_a_clear_message(arena: RunningServer) -> None:
    client = client_from(arena, "203.0.113.5")
    try:
        client.predict("hello", api_name="/battle_send")
        client.predict(api_name="/battle_vote_a")  # vote 1 of 1
        client.predict(api_name="/battle_new_round")
        client.predict("again", api_name="/battle_send")  # message 2 of 2
        assert re.fullmatch(
            r"Too many votes: at most 1 vote per minute\. Please wait (\d+) s and try again\.",
            refusal(client, "/battle_vote_a"),
        )
        client.predict(api_name="/battle_new_round")
        message = refusal(client, "/battle_send", "third")
        assert message.startswith("Too many messages: at most 2 messages per minute. Please wait ")
    finally:
        client.close()

    other = client_from(arena, "198.51.100.7")  # another visitor behind the same proxy
    try:
        assert other.predict("hello", api_name="/battle_send")[0]["label"] == "Model A"
    finally:
        other.close()

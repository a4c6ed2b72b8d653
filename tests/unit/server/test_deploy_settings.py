"""Deploy settings: platform defaults, validation, queue sizing, blocked paths, start-up warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.records import battle, vote
from webui.config import Settings, settings_from_cli
from webui.engine.registry import build_registry
from webui.errors import ConfigError
from webui.models.specs import parse_specs
from webui.records.storage import JsonlRecorder, log_files
from webui.server import security
from webui.server.deploy import public_warnings
from webui.services import Services


def test_host_and_port_follow_the_platform_unless_set(monkeypatch) -> None:
    for name in ("GRADIO_SERVER_NAME", "GRADIO_SERVER_PORT", "SPACE_ID"):
        monkeypatch.delenv(name, raising=False)
    assert (Settings().host, Settings().port) == ("127.0.0.1", 7860)
    monkeypatch.setenv("SPACE_ID", "me/arena")
    assert Settings().host == "0.0.0.0"
    monkeypatch.setenv("GRADIO_SERVER_NAME", "10.0.0.2")
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7861")
    assert (Settings().host, Settings().port) == ("10.0.0.2", 7861)
    explicit = settings_from_cli(["--host", "127.0.0.1"], {"ARENA_PORT": "8000"})
    assert (explicit.host, explicit.port) == ("127.0.0.1", 8000)


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"rate_messages": -1}, "rate_messages: must be 0"),
        ({"rate_votes": -5}, "rate_votes: must be 0"),
        ({"queue_size": -1}, "queue_size: must be 0"),
        ({"max_request_mb": 0}, "max_request_mb: must be > 0"),
        ({"hub_every_min": 0}, "hub_every_min: must be > 0"),
        ({"database": "postgresql://arena@db/arena"}, "server_name: --database needs --server-name"),
        ({"database": "postgresql://arena@db/arena", "server_name": "web1"}, "secret: --database needs a secret"),
        (
            {"secret": "s" * 32, "secret_file": "/etc/arena-secret"},
            "secret: set ARENA_SECRET or --secret-file, not both",
        ),
        ({"database": "mysql://arena@db/arena", "server_name": "web1"}, "database: must be a PostgreSQL URL"),
        ({"server_name": "../web1"}, "server_name: letters, digits"),
        ({"shutdown_grace_s": -1}, "shutdown_grace_s: must be 0 to 3600 seconds"),
        ({"shutdown_grace_s": float("nan")}, "shutdown_grace_s: must be 0 to 3600 seconds"),
    ],
)
def test_bad_deploy_settings_name_the_field(tmp_path: Path, changes: dict, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        Settings(log_dir=tmp_path, **changes)


def test_deploy_flags_and_environment() -> None:
    s = settings_from_cli(
        [
            "--rate-messages",
            "5",
            "--rate-votes",
            "0",
            "--queue-size",
            "12",
            "--max-request-mb",
            "0.5",
            "--hub-dataset",
            "me/logs",
            "--hub-every",
            "3",
        ],
        {"ARENA_HF_OAUTH": "0"},
    )
    assert (s.rate_messages, s.rate_votes, s.queue_size, s.max_request_mb, s.hub_dataset, s.hub_every_min) == (
        5,
        0,
        12,
        0.5,
        "me/logs",
        3.0,
    )
    assert Services(s, None, None).rate_limiter.limits["vote"].enabled is False  # type: ignore[arg-type]


def test_the_shutdown_grace_from_the_flag_or_the_environment_and_a_bad_one_refused(capsys) -> None:
    from webui.__main__ import main

    assert Settings().shutdown_grace_s == 5.0
    assert settings_from_cli(["--shutdown-grace-s", "2.5"], {"ARENA_SHUTDOWN_GRACE_S": "9"}).shutdown_grace_s == 2.5
    assert settings_from_cli([], {"ARENA_SHUTDOWN_GRACE_S": "0"}).shutdown_grace_s == 0.0
    assert main(["--shutdown-grace-s", "-1"]) == 2  # the exit status of a bad setting, before anything starts
    assert "error: shutdown_grace_s: must be 0 to 3600 seconds" in capsys.readouterr().err


def test_a_named_server_writes_log_files_named_for_it(tmp_path: Path) -> None:
    s = settings_from_cli(
        ["--log-dir", str(tmp_path), "--server-name", "web1"],
        {"ARENA_DATABASE": "postgresql://arena@db/arena", "ARENA_SECRET": "s" * 32},
    )
    recorder = JsonlRecorder.from_settings(s)
    recorder.vote(vote("leftvote", battle("alpha", "beta")))
    recorder.close()
    assert [p.name.endswith("-web1-conv.json") for p in log_files(tmp_path)] == [True]
    assert "postgresql" not in repr(s)  # the URL may carry a password


def _registry(yaml: str, settings: Settings):
    return build_registry(settings, parse_specs(__import__("yaml").safe_load(yaml)))


def test_queue_is_sized_to_the_generation_slots(tmp_path: Path) -> None:
    settings = Settings(log_dir=tmp_path, max_concurrency=2, transformers_batching="off")
    registry = _registry(
        """
models:
  - {name: a, source: /m/one}
  - {name: a-pirate, source: /m/one, system_prompt: Arr}   # a variant: shares a's weights and slots
  - {name: b, source: /m/two, max_concurrency: 3}
""",
        settings,
    )
    assert security.generation_slots(registry, settings) == 5
    assert security.queue_size(registry, settings) == 20
    assert security.queue_size(registry, settings.replace(queue_size=3)) == 3
    one = _registry("models:\n  - {name: a, source: /m/one, max_concurrency: 1}\n", settings)
    assert security.queue_size(one, settings) == 8  # never below 8


def test_the_queue_and_the_engine_agree_on_the_slots_of_variants(tmp_path: Path) -> None:
    """Variants share one set of slots, the smallest limit wins: the UI queue must run as many
    generations at once as the engine will, not the first variant's (unset -> the default 2)."""
    settings = Settings(log_dir=tmp_path, max_concurrency=2)
    registry = _registry(
        """
models:
  - {name: a, source: /m/one}
  - {name: a-strict, source: /m/one, max_concurrency: 1}
""",
        settings,
    )
    assert registry.concurrency(registry.spec("a").weights_key) == 1
    assert security.generation_slots(registry, settings) == 1


def test_blocked_paths_cover_logs_caches_and_secrets(tmp_path: Path) -> None:
    auth_file = tmp_path / "users.txt"
    settings = Settings(log_dir=tmp_path / "logs", cache_dir=tmp_path / "cache", auth_file=str(auth_file))
    blocked = security.blocked_paths(
        settings, {"HF_HOME": str(tmp_path / "hf"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    )
    for path in (
        tmp_path / "logs",
        tmp_path / "cache",
        auth_file,
        tmp_path / "hf",
        tmp_path / "hf" / "hub",
        tmp_path / "xdg",
    ):
        assert str(path.resolve()) in blocked
    assert all(Path(p).is_absolute() for p in blocked)
    kwargs = security.mount_kwargs(settings)
    assert kwargs["show_error"] is False and kwargs["enable_monitoring"] is False
    assert kwargs["max_file_size"] == 2 * 1024 * 1024 and kwargs["allowed_paths"] == []


@pytest.mark.parametrize(
    ("path", "remote"),
    [
        ("/gradio_api/file=http://example.com/a.png", True),
        ("/gradio_api/file=HTTPS://example.com/a.png", True),
        ("/gradio_api/file=//example.com/a.png", True),
        ("/file=ftp://example.com/a", True),
        ("/gradio_api/file=/tmp/gradio/abc/a.png", False),
        ("/gradio_api/upload", False),
        ("/v1/chat/completions", False),
    ],
)
def test_remote_file_requests_are_recognised(path: str, remote: bool) -> None:
    assert security._is_remote_file_request(path) is remote


def test_public_warnings(tmp_path: Path) -> None:
    def warnings(space: bool, **kw) -> str:
        return " ".join(public_warnings(Services(Settings(log_dir=tmp_path, **kw), None, None), space))  # type: ignore[arg-type]

    assert warnings(False) == ""
    assert "ARENA_TRUSTED_PROXIES=1" in warnings(True)
    assert warnings(True, trusted_proxies=1) == ""
    assert "without a login" in warnings(False, share=True)
    assert "without a login" not in warnings(False, share=True, auth="a:b")
    assert "--trusted-proxies 1" in warnings(False, share=True)

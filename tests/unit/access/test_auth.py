"""Login settings: parsing credentials, the constant-time check, OAuth preconditions, and a real
server that refuses the UI until a user logs in."""

from __future__ import annotations

import os
import types
from pathlib import Path

import httpx
import pytest

from webui.access import auth
from webui.config import Settings, settings_from_cli
from webui.errors import ConfigError


def _settings(tmp_path: Path, **kw) -> Settings:
    return Settings(log_dir=tmp_path / "logs", cache_dir=tmp_path / "cache", **kw)


def test_credentials_from_file_and_environment_are_merged(tmp_path: Path) -> None:
    file = tmp_path / "users.txt"
    file.write_text("# who may vote\nalice:pa:ss:word\n\n  bob : secret\n")
    file.chmod(0o600)
    settings = settings_from_cli(["--auth-file", str(file), "--log-dir", str(tmp_path)], {"ARENA_AUTH": "carol:pw3"})
    assert auth.load_credentials(settings) == {"alice": "pa:ss:word", "bob": " secret", "carol": "pw3"}
    assert "pw3" not in repr(settings)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("alice\n", "line 1: expected 'username:password'"),
        ("alice:\n", "line 1: expected 'username:password'"),
        (":pw\n", "line 1: expected 'username:password'"),
        ("alice:a\nalice:b\n", "line 2: user 'alice' is listed twice"),
        ("# nothing\n", "has no 'username:password' lines"),
    ],
)
def test_bad_auth_files_name_the_line(tmp_path: Path, text: str, error: str) -> None:
    file = tmp_path / "users.txt"
    file.write_text(text)
    with pytest.raises(ConfigError, match=error):
        auth.load_credentials(_settings(tmp_path, auth_file=str(file)))


def test_missing_auth_file_and_conflicts_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="auth_file: cannot read"):
        auth.load_credentials(_settings(tmp_path, auth_file=str(tmp_path / "nope")))
    with pytest.raises(ConfigError, match="ARENA_AUTH, entry 2"):
        auth.load_credentials(_settings(tmp_path, auth="a:1,broken"))
    with pytest.raises(ConfigError, match="not both"):
        _settings(tmp_path, auth="a:1", hf_oauth=True)


def test_world_readable_auth_file_is_warned_about(tmp_path: Path, caplog) -> None:
    file = tmp_path / "users.txt"
    file.write_text("alice:pw\n")
    file.chmod(0o644)
    auth.load_credentials(_settings(tmp_path, auth_file=str(file)))
    assert "readable by other users; chmod 600" in caplog.text


def test_password_check() -> None:
    check = auth.password_checker({"alice": "s3cret"})
    assert check("alice", "s3cret")
    assert not check("alice", "s3cret ")
    assert not check("alice", "")
    assert not check("mallory", "s3cret")


def test_no_login_by_default(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert not auth.login_enabled(settings)
    assert auth.gradio_auth_kwargs(settings) == {}


def test_oauth_needs_a_space_and_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="only works on a Space"):
        auth.check_oauth_available({})
    with pytest.raises(ConfigError, match="hf_oauth: true"):
        auth.check_oauth_available({"SPACE_ID": "me/arena"})


def test_oauth_username_reads_gradios_session() -> None:
    import time

    def request(info):
        return types.SimpleNamespace(session={"oauth_info": info} if info is not None else {})

    assert auth.oauth_username(request({"userinfo": {"preferred_username": "dana"}})) == "dana"
    assert (
        auth.oauth_username(request({"userinfo": {"preferred_username": "dana"}, "expires_at": time.time() - 1}))
        is None
    )
    assert auth.oauth_username(request(None)) is None
    assert auth.oauth_username(object()) is None  # no session middleware


def test_login_guards_the_ui_but_not_healthz(tmp_path: Path, tiny_models_file: Path) -> None:
    from tests.apps import start_app

    file = tmp_path / "users.txt"
    file.write_text("alice:s3cret\n")
    os.chmod(file, 0o600)
    running = start_app(_settings(tmp_path, models_file=tiny_models_file, auth_file=str(file)), load=False)
    try:
        with httpx.Client(base_url=running.url) as client:
            assert client.get("/config").status_code == 401
            assert client.get("/healthz").status_code == 200
            assert client.get("/gradio_api/file=/etc/passwd").status_code in (401, 403)
            wrong = client.post("/login", data={"username": "alice", "password": "nope"})
            assert wrong.status_code == 400 and "Incorrect credentials" in wrong.text
            right = client.post("/login", data={"username": "alice", "password": "s3cret"})
            assert right.status_code == 200
            assert client.get("/config").status_code == 200
            assert client.get("/gradio_api/user").json() == "alice"
    finally:
        running.stop()

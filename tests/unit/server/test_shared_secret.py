"""The secret several servers share: any of them accepts a session cookie another signed and hashes
an address alike, whatever its log folder; a missing, short or unreadable secret stops the start."""

from __future__ import annotations

from pathlib import Path

import pytest

from webui.config import Settings
from webui.errors import ConfigError
from webui.records.privacy import address_secret, build_policy, load_shared_secret
from webui.server.sessions import SecretIssuer, session_key

SECRET = "a-shared-secret-of-enough-characters-0123"


def test_servers_with_one_secret_accept_each_others_sessions_and_hash_alike(tmp_path: Path) -> None:
    web1 = Settings(log_dir=tmp_path / "web1", secret=SECRET)
    web2 = Settings(log_dir=tmp_path / "web2", secret=SECRET)
    stranger = Settings(log_dir=tmp_path / "web3", secret=SECRET.upper())
    cookie = SecretIssuer(session_key(web1)).issue()
    assert SecretIssuer(session_key(web2)).verify(cookie) == cookie
    assert SecretIssuer(session_key(stranger)).verify(cookie) is None
    assert SecretIssuer().verify(cookie) is None  # no secret: a key of its own
    hashes = [build_policy("hash", s.log_dir, address_secret(s)).apply("203.0.113.7") for s in (web1, web2, stranger)]
    assert hashes[0] == hashes[1] != hashes[2]
    assert session_key(web1) != bytes.fromhex(address_secret(web1))  # one key per use


def test_an_ip_hash_secret_keeps_its_hashes(tmp_path: Path) -> None:
    s = Settings(log_dir=tmp_path, secret=SECRET, ip_hash_secret="older-key")
    assert address_secret(s) == "older-key"


def test_the_secret_file_holds_one_line(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    path.chmod(0o600)
    assert load_shared_secret("", str(path)) == SECRET
    path.write_text("short\n")
    with pytest.raises(ConfigError, match="at least 32 characters"):
        load_shared_secret("", str(path))
    with pytest.raises(ConfigError, match="cannot read"):
        load_shared_secret("", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="ARENA_SECRET: the secret must be at least"):
        load_shared_secret("short", "")

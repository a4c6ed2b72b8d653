"""How client addresses and user names are kept in the logs: a keyed hash (default), raw, or not at all.

A keyed hash (HMAC-SHA256) still lets the leaderboard tell voters apart (e.g. to find one address
casting hundreds of votes) without the log holding the address. An unkeyed hash would not do: the
IPv4 space is small enough to hash completely. The key comes from Settings.ip_hash_secret
(ARENA_IP_HASH_SECRET) or, failing that, from a file beside the logs that is generated once with
mode 0600, so that hashes stay comparable across restarts and across processes sharing the logs.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from webui.errors import ConfigError

if TYPE_CHECKING:
    from webui.config import Settings

log = logging.getLogger(__name__)

SECRET_FILE = ".ip-hash-secret"
MIN_SHARED_SECRET_CHARS = 32
HASH_PREFIX = "h:"  # marks a hashed identifier so that nobody mistakes it for an address
HASH_HEX_CHARS = 32  # 128 bits of the HMAC: plenty to tell voters apart


@dataclass(frozen=True)
class IdentityPolicy:
    """Turns an address or user name into what the log keeps. `mode` is hash, raw or none."""

    mode: str
    key: bytes = b""

    def __post_init__(self) -> None:
        if self.mode not in ("hash", "raw", "none"):
            raise ValueError(f"ip_logging: must be hash, raw or none, got {self.mode!r}")
        if self.mode == "hash" and not self.key:
            raise ValueError("a hash policy needs a key")

    def apply(self, value: str | None) -> str:
        """The logged form; "" when there is nothing to log (FastChat expects the key to exist)."""
        if not value or self.mode == "none":
            return ""
        if self.mode == "raw":
            return value
        digest = hmac.new(self.key, value.encode("utf-8"), hashlib.sha256).hexdigest()
        return HASH_PREFIX + digest[:HASH_HEX_CHARS]


def build_policy(mode: str, log_dir: Path, secret: str = "") -> IdentityPolicy:
    """The policy for Settings.ip_logging; reads or creates the key file only in hash mode."""
    if mode != "hash":
        return IdentityPolicy(mode)
    key = secret.encode("utf-8") if secret else load_or_create_key(log_dir)
    return IdentityPolicy("hash", key)


def load_or_create_key(log_dir: Path) -> bytes:
    """The key kept in `log_dir/.ip-hash-secret`, created on first use.

    Several processes may start at once: the key is written to a private temporary file and then
    hard-linked into place, which fails if another process got there first, in which case its key
    is read instead. If the directory is not writable the key lives only in memory (hashes then
    change on restart) and the server log says so; the app keeps serving.
    """
    path = log_dir / SECRET_FILE
    try:
        existing = _read_key(path)
        if existing:
            return existing
        log_dir.mkdir(parents=True, exist_ok=True)
        return _create_key(path)
    except OSError as exc:
        log.error("cannot keep the IP hash key in %s (%s); using a temporary key for this process", path, exc)
        return secrets.token_hex(32).encode("ascii")


def _read_key(path: Path) -> bytes | None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    if stat.S_IMODE(info.st_mode) & 0o077:
        log.warning("%s was readable by others; restricting it to mode 0600", path)
        path.chmod(0o600)
    key = path.read_bytes().strip()
    return key or None


def _create_key(path: Path) -> bytes:
    key = secrets.token_hex(32).encode("ascii")
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        key = _read_key(path) or key
    finally:
        tmp.unlink(missing_ok=True)
    return key


# ---- the secret several servers share ----------------------------------------------------------
def load_shared_secret(secret: str, secret_file: str) -> str:
    """Settings.secret (ARENA_SECRET) or the one line of the file Settings.secret_file names; ""
    for none. A short one stops the start: it signs every session and keys every address hash."""
    origin = "ARENA_SECRET"
    if secret_file:
        origin = f"secret_file ({secret_file})"
        try:
            lines = [
                line.strip() for line in Path(secret_file).read_text(encoding="utf-8").splitlines() if line.strip()
            ]
            mode = Path(secret_file).stat().st_mode
        except OSError as exc:
            raise ConfigError(f"secret_file: cannot read {secret_file}: {exc.strerror or exc}") from None
        if len(lines) != 1:
            raise ConfigError(f"secret_file: {secret_file} must hold the secret alone, on one line")
        if stat.S_IMODE(mode) & 0o077:
            log.warning("secret file %s is readable by other users; chmod 600 it", secret_file)
        secret = lines[0]
    if secret and (len(secret) < MIN_SHARED_SECRET_CHARS or secret != secret.strip()):
        raise ConfigError(
            f"{origin}: the secret must be at least {MIN_SHARED_SECRET_CHARS} characters without "
            'surrounding spaces; make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
    return secret


def derived_key(secret: str, purpose: str) -> bytes:
    """One key per use of the shared secret, so that a session signature is never also an address hash."""
    return hmac.new(secret.encode("utf-8"), f"pairwise-arena {purpose}".encode(), hashlib.sha256).digest()


def address_secret(settings: Settings) -> str:
    """The key for address and session hashes: ARENA_IP_HASH_SECRET if set (hashes already logged
    with it stay comparable), else one derived from the shared secret, else "" (the key file beside
    the logs, which only servers sharing a log folder share)."""
    if settings.ip_hash_secret:
        return settings.ip_hash_secret
    shared = load_shared_secret(settings.secret, settings.secret_file)
    return derived_key(shared, "address hash").hex() if shared else ""

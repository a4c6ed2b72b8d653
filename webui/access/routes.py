"""What a request to a remote model says about who it is for (`types.Route`): an id per
conversation, so that a router in front of a fleet keeps its turns on one replica, and a user key,
so that the upstream can tell its users apart (OpenAI's `user` field).

Guarantees:
- Both are keyed hashes (HMAC-SHA256, a key of their own derived from the address-hash secret),
  never a name, an address or a session's secret: the upstream cannot reverse them, nor match them
  against the hashes in our logs (another key).
- The conversation id is stable over a conversation's turns (a pane's conversation id, kept until
  its pane is cleared) and differs between conversations, battle panes included.
- The user key is the client's identity as the rate limits count it (a signed-in user, else the
  address); "" when the server cannot tell.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from webui.access.ratelimit import client_key
from webui.config import Settings
from webui.records.events import ClientInfo
from webui.types import Route

HEX_CHARS = 32  # 128 bits: no two conversations share an id


@dataclass(frozen=True)
class RouteKeys:
    key: bytes

    @classmethod
    def from_settings(cls, settings: Settings) -> RouteKeys:
        """From the address-hash secret (ARENA_IP_HASH_SECRET, or derived from the shared secret), so
        that servers sharing it give one person one user key; else from the key file beside the logs
        where the recorder made one; else a key of this process (user keys then change on restart)."""
        from webui.records.privacy import SECRET_FILE, address_secret, derived_key, load_or_create_key

        secret = address_secret(settings)
        if not secret and (settings.log_dir / SECRET_FILE).is_file():
            secret = load_or_create_key(settings.log_dir).decode("ascii", "replace")
        return cls(derived_key(secret, "upstream route")) if secret else cls.temporary()

    @classmethod
    def temporary(cls) -> RouteKeys:
        """A key for this process alone (tests, tools that log nothing)."""
        return cls(secrets.token_bytes(32))

    def route(self, conversation: str, client: ClientInfo | None = None) -> Route:
        """The route of one request of `conversation` (any stable id of it; "" for none) from `client`."""
        who = client_key(client) if client is not None else None
        return Route(
            session=self._hash("conversation", conversation) if conversation else "",
            user=self._hash("user", who) if who else "",
        )

    def _hash(self, kind: str, value: str) -> str:
        return hmac.new(self.key, f"{kind}\0{value}".encode(), hashlib.sha256).hexdigest()[:HEX_CHARS]

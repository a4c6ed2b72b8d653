"""The server's own access log (uvicorn's, on stdout) keeps what the JSON Lines logs keep
(docs/logging.md):

* the client address as `--ip-logging` says: `h:` + the keyed hash under the same key as the
  records (hash, the default), the address itself (raw), or `-` (none); the port goes in every
  mode but raw (it only tells one connection from the next);
* session hashes (in `?session_hash=`, `/gradio_api/heartbeat/…`, `/gradio_api/stream/…`, and the
  event id in `/gradio_api/call/<api>/<event id>`, a REST call's result stream) as the
  records keep a vote's session: the same keyed hash as a vote's `extra.session` (hash and raw),
  or `-` (none). A session is bound to its browser's secret (webui/server/sessions.py), so its
  hash alone no longer opens it, but a log is still no place to publish it;
* the hash folder of a file Gradio serves from its cache (`/gradio_api/file=.../<sha-256>/name`), the
  same way: that URL alone downloads the file, an operator's export of every conversation included.

uvicorn logs each request as `'%s - "%s %s HTTP/%s" %d'` with (client, method, path and query,
HTTP version, status); the filter rewrites those arguments and leaves every other record alone.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

from webui.config import Settings
from webui.records.privacy import IdentityPolicy, address_secret, build_policy
from webui.records.storage import session_key

ACCESS_LOGGER = "uvicorn.access"
# /heartbeat/<session>, /stream/<session>/..., and /call/<api>/<event id> (a REST call's result stream,
# which anyone holding the id may read: the call is a session of its own)
_SESSION_IN_PATH = re.compile(r"^(/gradio_api/(?:heartbeat/|stream/|call/(?:v2/)?[^/]+/))([^/?]+)")
# /file=<Gradio's cache>/<sha-256>/<name>: that hash is what makes a served file's URL unguessable (an
# operator's export of every conversation among them, docs/leaderboard.md), so it is hashed like a session
_FILE_HASH_IN_PATH = re.compile(r"^(/gradio_api/file(?:=|%3[dD]).*/)([0-9a-f]{64})(?=/)")  # uvicorn quotes "="


class AccessLogPrivacy(logging.Filter):
    def __init__(self, addresses: IdentityPolicy, sessions: IdentityPolicy) -> None:
        super().__init__()
        self.addresses = addresses
        self.sessions = sessions

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:
            client, method, full_path, version, status = args
            record.args = (self.client(str(client)), method, self.path(str(full_path)), version, status)
        return True

    def client(self, client: str) -> str:
        if self.addresses.mode == "raw":
            return client
        host = client.rsplit(":", 1)[0] if client.count(":") == 1 or client.startswith("[") else client
        return self.addresses.apply(host.strip("[]")) or "-"

    def session(self, session_hash: str) -> str:
        return session_key(session_hash, self.sessions) or "-"

    def path(self, full_path: str) -> str:
        path, sep, query = full_path.partition("?")
        path = _SESSION_IN_PATH.sub(lambda m: m.group(1) + self.session(m.group(2)), path)
        path = _FILE_HASH_IN_PATH.sub(lambda m: m.group(1) + self.session(m.group(2)), path)
        if sep and "session_hash=" in query:
            pairs = [
                (k, self.session(v) if k == "session_hash" else v) for k, v in parse_qsl(query, keep_blank_values=True)
            ]
            query = urlencode(pairs, safe=":", quote_via=quote)
        return path + sep + query


def access_log_filter(settings: Settings) -> AccessLogPrivacy:
    """The filter for these settings, with the records' own key (so that an access-log line and a
    vote from the same address or session carry the same hash)."""
    key = address_secret(settings)
    addresses = build_policy(settings.ip_logging, Path(settings.log_dir), key)
    sessions = addresses if settings.ip_logging != "raw" else build_policy("hash", Path(settings.log_dir), key)
    return AccessLogPrivacy(addresses, sessions)


def install(settings: Settings, logger: logging.Logger | None = None) -> AccessLogPrivacy:
    """Put the filter on uvicorn's access logger (after uvicorn configured its logging), replacing
    one a previous server in this process installed."""
    logger = logger or logging.getLogger(ACCESS_LOGGER)
    for old in [f for f in logger.filters if isinstance(f, AccessLogPrivacy)]:
        logger.removeFilter(old)
    privacy = access_log_filter(settings)
    logger.addFilter(privacy)
    return privacy

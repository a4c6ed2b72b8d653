"""The pieces of the session binding on their own (webui/server/sessions.py): the signed secret,
the book of owners, and where a request names a session."""

from __future__ import annotations

from webui.server.sessions import SecretIssuer, SessionBook, _hashes_in_body, _hashes_in_url


def test_only_secrets_this_server_issued_count() -> None:
    issuer, other = SecretIssuer(), SecretIssuer()
    secret = issuer.issue()
    assert issuer.verify(secret) == secret
    assert issuer.issue() != secret
    for forged in (other.issue(), secret.split(".")[0], secret + "x", "", None, "a.b"):
        assert issuer.verify(forged) is None, forged


def test_first_claim_binds_and_others_are_refused() -> None:
    book = SessionBook()
    assert book.claim("h1", "alice") and book.claim("h1", "alice")
    assert not book.claim("h1", "mallory")
    assert book.claim("h2", "mallory") and len(book) == 2


def test_the_oldest_binding_goes_first_and_is_reported() -> None:
    now = [0.0]
    book = SessionBook(capacity=2, clock=lambda: now[0])
    evicted: list[str] = []
    book.on_evict = evicted.append
    for i, h in enumerate(("a", "b", "c")):
        now[0] = i
        book.claim(h, "s")
    assert evicted == ["a"] and "a" not in book and "c" in book
    now[0] = 10
    book.claim("c", "s")
    assert book.idle(5) == ["b"]


def test_where_a_request_names_a_session() -> None:
    def scope(method: str, path: str, query: bytes = b"") -> dict:
        return {"type": "http", "method": method, "path": path, "query_string": query}

    assert list(_hashes_in_url(scope("GET", "/gradio_api/queue/data", b"session_hash=abc"))) == ["abc"]
    assert list(_hashes_in_url(scope("GET", "/gradio_api/heartbeat/abc"))) == ["abc"]
    assert list(_hashes_in_url(scope("GET", "/gradio_api/stream/abc/run/1/playlist.m3u8"))) == ["abc"]
    assert list(_hashes_in_url(scope("POST", "/gradio_api/stream/event-id"))) == []  # an event id, body checked
    assert list(_hashes_in_url(scope("GET", "/healthz"))) == []
    assert _hashes_in_body(b'{"data": [], "fn_index": 1, "session_hash": "abc"}') == ["abc"]
    assert _hashes_in_body(b'{"session_hash": null}') == [] and _hashes_in_body(b"not json") == []

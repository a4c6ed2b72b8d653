"""A stand-in for oauth2-proxy, for the tests of sign-in through nginx (deploy/signin/nginx.conf).

It answers what nginx's auth_request asks, as oauth2-proxy does with --set-xauthrequest: 202 with
X-Auth-Request-User and X-Auth-Request-Email for a request carrying its session cookie, 401 without
one. The "session" is the person's name in the cookie (`SESSION_COOKIE=alice`): no identity provider,
no signature; what is tested is everything after the proxy. Its other pages (/oauth2/sign_in) say
"sign in". A real HTTP server on 127.0.0.1, in a thread; `asked` counts the auth subrequests.
"""

from __future__ import annotations

import threading
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SESSION_COOKIE = "_oauth2_proxy"
SIGN_IN_PAGE = b"Sign in with the company's identity provider"


class IdentityProxy:
    def __init__(self) -> None:
        self.asked = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/oauth2/auth"):
                    proxy.asked += 1
                    user = _signed_in(self.headers.get("Cookie", ""))
                    self.send_response(202 if user else 401)
                    if user:
                        self.send_header("X-Auth-Request-User", user)
                        self.send_header("X-Auth-Request-Email", f"{user}@example.com")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(SIGN_IN_PAGE)))
                self.end_headers()
                self.wfile.write(SIGN_IN_PAGE)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="identity-proxy", daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _signed_in(cookie_header: str) -> str | None:
    cookies: SimpleCookie = SimpleCookie()
    cookies.load(cookie_header)
    morsel = cookies.get(SESSION_COOKIE)
    return morsel.value if morsel is not None and morsel.value else None


def session_cookie(user: str) -> dict[str, str]:
    """The cookies of a person signed in to the stand-in."""
    return {SESSION_COOKIE: user}

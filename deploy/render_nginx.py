"""Render deploy/nginx.conf.template for a listening address and the app servers behind it:

    python -m deploy.render_nginx --listen 8080 --server 127.0.0.1:7861 --server 127.0.0.1:7862 > nginx.conf

The tests' proxy fixture (tests/proxy.py) renders the same file the same way."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent / "nginx.conf.template"
ADDRESS = re.compile(r"[A-Za-z0-9.\-\[\]:]+")  # host:port, [v6]:port, or a port


def render(listen: str, servers: list[str], max_fails: int = 1, fail_timeout_s: int = 10) -> str:
    """The configuration text; each server is left out for `fail_timeout_s` after `max_fails` failures."""
    if not servers:
        raise ValueError("at least one --server HOST:PORT is needed")
    for address in (listen, *servers):
        if not ADDRESS.fullmatch(address):
            raise ValueError(f"not an address: {address!r} (give HOST:PORT)")
    lines = "\n".join(f"        server {s} max_fails={max_fails} fail_timeout={fail_timeout_s}s;" for s in servers)
    return TEMPLATE.read_text().replace("@LISTEN@", listen).replace("@SERVERS@", lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.render_nginx", description=__doc__.splitlines()[0])
    parser.add_argument("--listen", required=True, help="where nginx listens: PORT or HOST:PORT")
    parser.add_argument("--server", action="append", default=[], help="an app server, HOST:PORT (repeat)")
    parser.add_argument("--max-fails", type=int, default=1)
    parser.add_argument("--fail-timeout", type=int, default=10, help="seconds a failed server is left out")
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(render(args.listen, args.server, args.max_fails, args.fail_timeout))
    except ValueError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

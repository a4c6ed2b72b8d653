"""Docker HEALTHCHECK: exits 0 when /healthz answers and at least one model has not failed.

Models still loading count as healthy (the server is up and will serve them); a container whose
every model failed is reported unhealthy so that an orchestrator can restart or alert.
Standard library only: it runs every 30 s.

    python scripts/healthcheck.py [URL]     default http://127.0.0.1:$ARENA_PORT/healthz
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request


def check(url: str, timeout_s: float = 5.0) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - our own URL
            body = json.load(response)
    except Exception as exc:  # noqa: BLE001 - any failure is "unhealthy", with the reason
        return False, f"{url}: {exc}"
    models = body.get("models") or {}
    states = {name: info.get("state") for name, info in models.items()}
    if models and all(state == "failed" for state in states.values()):
        return False, f"every model failed: {', '.join(states)}"
    return body.get("status") == "ok", ", ".join(f"{n}={s}" for n, s in states.items()) or "no models"


def main(argv: list[str]) -> int:
    port = os.environ.get("ARENA_PORT") or "7860"
    url = argv[1] if len(argv) > 1 else f"http://127.0.0.1:{port}/healthz"
    healthy, detail = check(url)
    print(("healthy: " if healthy else "unhealthy: ") + detail)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""A real server for the deploy tests: this app's `create_app`, uvicorn on a free loopback port in a
thread, readiness polled (never a fixed sleep). The one app runner is tests/apps.py's."""

from __future__ import annotations

from tests.apps import start_app as start
from tests.servers import RunningServer as Running
from tests.servers import wait_for

__all__ = ["Running", "start", "wait_for"]

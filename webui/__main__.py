"""Start the server: `pairwise-arena [options]`, `python -m webui [options]` or `python app.py`.

Reads the settings (command line and ARENA_* variables), builds the app and serves it until
Ctrl-C or SIGTERM. `--help` lists the options.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from webui.config import settings_from_cli
from webui.errors import ConfigError


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request to a model server is noise
    try:
        settings = settings_from_cli(argv)  # --help and a usage error exit here, as argparse does
        from webui.engine.zerogpu import import_spaces_early

        import_spaces_early()  # ZeroGPU Spaces: `spaces` must patch torch before CUDA starts
        from webui.server.app import serve
    except ConfigError as exc:
        return _refused(exc)
    status = 0
    try:
        serve(settings)
    except ConfigError as exc:
        return _refused(exc)
    except KeyboardInterrupt:
        # uvicorn re-raises Ctrl-C after its graceful shutdown. Ctrl-C is how a person stops the
        # server, and the stop went well: status 0 (130 made `make run` end with "Error 130").
        pass
    except SystemExit as exc:  # SIGTERM, after the same graceful stop (webui.server.app)
        status = exc.code if isinstance(exc.code, int) else 1
    return leave_after_stop(status)


def _refused(exc: ConfigError) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 2


def leave_after_stop(status: int) -> NoReturn:
    """End the process once the server has stopped, without the interpreter's teardown.

    Python 3.11 ends a daemon thread that wakes during teardown with pthread_exit, and one inside
    torch's C++ then aborts the whole process ("terminate called without an active exception",
    status -6) after a clean stop. Guarantees: the non-daemon threads are waited for and the atexit
    functions run, as at a normal exit; the logs and the standard streams are flushed; every vote
    and log record was written and synced before the stop returned."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())

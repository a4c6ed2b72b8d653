"""Start the server: `pairwise-arena [options]`, `python -m webui [options]` or `python app.py`.

Reads the settings (command line and ARENA_* variables), builds the app and serves it until
Ctrl-C or SIGTERM. `--help` lists the options.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from webui.config import settings_from_cli
from webui.errors import ConfigError


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request to a model server is noise
    try:
        settings = settings_from_cli(argv)
        from webui.engine.zerogpu import import_spaces_early

        import_spaces_early()  # ZeroGPU Spaces: `spaces` must patch torch before CUDA starts
        from webui.server.app import serve

        serve(settings)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # uvicorn re-raises Ctrl-C after its graceful shutdown. Ctrl-C is how a person stops the
        # server, and the stop went well: status 0 (130 made `make run` end with "Error 130").
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

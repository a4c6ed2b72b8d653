"""Pairwise Arena entry point: read settings, build the app, serve it.  `python app.py --help`"""

from __future__ import annotations

import logging
import sys

from webui.config import settings_from_cli
from webui.errors import ConfigError


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = settings_from_cli()
        from webui.engine.zerogpu import import_spaces_early

        import_spaces_early()  # ZeroGPU Spaces: `spaces` must patch torch before CUDA starts
        from webui.server.app import serve

        serve(settings)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

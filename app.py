"""Pairwise Arena entry point: read settings, build the app, serve it.  `python app.py --help`

The same as `pairwise-arena` (the console script) and `python -m webui`; Hugging Face Spaces run
this file.
"""

from __future__ import annotations

import sys

from webui.__main__ import main

if __name__ == "__main__":
    sys.exit(main())

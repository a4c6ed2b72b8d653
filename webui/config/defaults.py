"""Where a setting's default comes from when it depends on the machine or the platform.

Each function is a dataclass default factory: it runs when a `Settings` is made without that
setting, never at import, so that a test's or a platform's environment is read when it matters.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # webui/
DEFAULT_MODELS_FILE = PACKAGE_DIR.parent / "assets" / "models.yaml"


def default_log_dir() -> Path:
    # Hugging Face Spaces mounts persistent storage at /data; anywhere else, ./logs.
    data = Path("/data")
    if data.is_dir() and os.access(data, os.W_OK):
        return data / "logs"
    return Path("logs")


def default_host() -> str:
    # Hugging Face Spaces (and anything else that starts Gradio apps) set GRADIO_SERVER_NAME/PORT,
    # so that `python app.py` with no arguments listens where the platform expects.
    if os.environ.get("GRADIO_SERVER_NAME"):
        return os.environ["GRADIO_SERVER_NAME"]
    return "0.0.0.0" if os.environ.get("SPACE_ID") else "127.0.0.1"


def default_port() -> int:
    raw = os.environ.get("GRADIO_SERVER_PORT", "")
    return int(raw) if raw.isdigit() else 7860


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pairwise-arena"


def from_environment(variable: str) -> Callable[[], str]:
    """A default read from `variable` even by `Settings()` made without `from_env` (the engines'
    own tests make them so, and an installer's setting must still reach them); "" when unset."""

    def read() -> str:
        return os.environ.get(variable, "")

    return read

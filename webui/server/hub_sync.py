"""Pushing the logs to a Hugging Face Hub dataset (`--hub-dataset`), for Spaces whose disk is not
persistent or for sharing the records."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LOG_PATTERNS = ["*-conv.json"]  # only the record files go to the Hub, never the IP-hash secret beside them


def start_hub_sync(
    repo_id: str, log_dir: Path, every_min: float, *, token: str | None = None, hf_api: Any = None
) -> Any | None:
    """Push new log lines to the dataset `repo_id` every `every_min` minutes (and at exit), with
    huggingface_hub's CommitScheduler. Fails soft: the logs on disk are the record, the Hub is a
    copy, so an unreachable Hub costs a warning, never the server."""
    if not repo_id:
        return None
    try:
        from huggingface_hub import CommitScheduler
    except ImportError:
        log.error("Hub sync is off: huggingface_hub is not installed")
        return None

    class SoftScheduler(CommitScheduler):
        def push_to_hub(self) -> Any:
            try:
                return super().push_to_hub()
            except Exception as exc:  # the next round retries
                log.warning(
                    "could not push the logs to the Hub dataset %s (%s); they stay in %s and the next push retries",
                    repo_id,
                    _one_line(exc),
                    log_dir,
                )
                return None

    try:
        scheduler = SoftScheduler(
            repo_id=repo_id,
            repo_type="dataset",
            folder_path=log_dir,
            path_in_repo="logs",
            every=every_min,
            private=True,
            token=token,
            allow_patterns=LOG_PATTERNS,
            hf_api=hf_api,
        )
    except Exception as exc:  # offline, bad token, no such namespace ...
        log.error(
            "Hub sync is off: could not reach the dataset %s on the Hugging Face Hub (%s). The logs are "
            "still written to %s. Check internet access and HF_TOKEN (it needs write access).",
            repo_id,
            _one_line(exc),
            log_dir,
        )
        return None
    log.info("pushing the logs in %s to the Hub dataset %s every %g min", log_dir, repo_id, every_min)
    return scheduler


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

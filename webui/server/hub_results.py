"""Pushing the arena's results to its Hub dataset (`--hub-dataset` / ARENA_HUB_DATASET) at each
scheduled snapshot (webui.server.schedule), beside the logs webui.server.hub_sync pushes there.

One commit per snapshot holds:

- `snapshots/board-<UTC time>.json`: every snapshot in LOG_DIR/snapshots (unchanged ones are
  skipped by the client: the Hub already has them);
- `exports/battles.parquet` (`.jsonl` without pyarrow): every battle vote with its drop reason,
  and `exports/preference_pairs.jsonl`: prompt, chosen, rejected, the exports the Leaderboard tab
  offers its operator (webui.leaderboard.board.export), of the board the snapshot was taken of;
- `README.md`: the dataset card (webui.leaderboard.snapshots.card): method, counts, filters,
  date range, the leaderboard.

Guarantees: it runs on the schedule's thread, never a request's; it fails soft, as the log sync
does (the files on disk are the record, the Hub a copy): a failure costs a warning and the next
snapshot pushes everything again; the repository is created private when missing. The client is
huggingface_hub's `HfApi`, so `HF_ENDPOINT` (or `endpoint`) points it at another Hub, as the tests
do at a local stand-in.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from webui.leaderboard.board.build import Board
from webui.leaderboard.board.export import parquet_available
from webui.leaderboard.snapshots.card import dataset_card
from webui.leaderboard.snapshots.snapshot import NAME
from webui.server.hub_sync import _one_line
from webui.server.schedule import Taken

log = logging.getLogger(__name__)

# One export of a board into a folder, its path: LeaderboardView.export (kind, board, folder).
Export = Callable[[str, Board, Path], str]


def export_files(board: Board, export: Export, folder: Path) -> tuple[dict[str, Path], int]:
    """The exports of `board` written into `folder` (path in the repository -> file), and the
    number of preference pairs."""
    battles = Path(export("battles_parquet" if parquet_available() else "battles_jsonl", board, folder))
    pairs = Path(export("pairs_jsonl", board, folder))
    with pairs.open("rb") as lines:
        count = sum(1 for _ in lines)
    return {f"exports/battles{battles.suffix}": battles, "exports/preference_pairs.jsonl": pairs}, count


class HubResults:
    """The schedule's hook that pushes one commit of results per snapshot."""

    def __init__(
        self,
        repo_id: str,
        export: Export,
        *,
        token: str | None = None,
        endpoint: str | None = None,
        hf_api: Any = None,
    ) -> None:
        self.repo_id, self.export = repo_id, export
        if hf_api is None:
            from huggingface_hub import HfApi

            hf_api = HfApi(endpoint=endpoint, token=token)
        self.api = hf_api
        self._created = False
        self.pushed = 0  # commits made, for tests and the log

    def __call__(self, taken: Taken) -> None:
        folder = Path(tempfile.mkdtemp(prefix="arena-hub-"))
        try:
            self._push(taken, folder)
        except Exception as exc:  # offline, a bad token, a refused commit: the next snapshot tries again
            log.warning(
                "could not push the results of %s to the Hub dataset %s (%s); they stay on disk and the next "
                "snapshot pushes again",
                taken.path.name,
                self.repo_id,
                _one_line(exc),
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _push(self, taken: Taken, folder: Path) -> None:
        from huggingface_hub import CommitOperationAdd

        if not self._created:
            self.api.create_repo(self.repo_id, repo_type="dataset", private=True, exist_ok=True)
            self._created = True
        files = {
            f"snapshots/{p.name}": p for p in sorted(taken.path.parent.iterdir()) if NAME.match(p.name) and p.is_file()
        }
        exports, pairs = export_files(taken.board, self.export, folder)
        files.update(exports)
        what = {
            **{path: "every battle vote read, with its drop reason" for path in exports if "/battles." in path},
            "exports/preference_pairs.jsonl": "prompt, chosen, rejected (DPO-style) from the counted battles",
            "snapshots/": "the board at each scheduled snapshot (`python -m webui.leaderboard --diff` reads them)",
            "logs/": "the vote logs, one JSON record per line (FastChat's arena format)",
        }
        card = dataset_card(taken.board, taken.snapshot, what, pairs=pairs)
        operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(file)) for path, file in files.items()]
        operations.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card.encode("utf-8")))
        self.api.create_commit(
            self.repo_id,
            operations,
            commit_message=f"Results at the snapshot of {taken.snapshot.created}",
            repo_type="dataset",
        )
        self.pushed += 1
        log.info("pushed the results of %s to the Hub dataset %s", taken.path.name, self.repo_id)

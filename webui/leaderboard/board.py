"""Everything the Leaderboard tab and the command line show, computed from a log directory.

This is the one place where reading (webui.records.storage), hygiene (webui.leaderboard.battles) and the pure
statistics (webui.leaderboard.ratings) meet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from webui.leaderboard import ratings
from webui.leaderboard.battles import Hygiene, battles_frame, counted
from webui.records.identity import identity_words
from webui.records.storage import ReadReport, log_files, read_logs


@dataclass(frozen=True)
class BoardOptions:
    rounds: int = 200
    seed: int = 0
    include_named: bool = False
    drop_stopped: bool = True
    extra_identity_words: str = ""
    model_names: Sequence[str] = ()  # the registry's names; names seen in the logs are added

    @classmethod
    def from_settings(cls, settings: Any, model_names: Iterable[str] = ()) -> BoardOptions:
        return cls(
            rounds=settings.leaderboard_rounds,
            include_named=settings.leaderboard_include_named,
            drop_stopped=settings.leaderboard_drop_stopped,
            extra_identity_words=settings.identity_words,
            model_names=tuple(model_names),
        )


@dataclass
class Board:
    battles: pd.DataFrame  # every battle vote read, with drop_reason
    counted: pd.DataFrame  # the ones the ratings use
    table: pd.DataFrame
    win_fraction: pd.DataFrame
    pair_counts: pd.DataFrame
    votes_read: int = 0
    skipped_lines: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        """One sentence saying what the table is based on."""
        if self.counted.empty:
            return f"No battles count yet ({self.votes_read} battle votes read)." + self._dropped_text()
        models = len(self.table)
        return (f"Based on {len(self.counted)} battles between {models} models "
                f"({self.votes_read} battle votes read).") + self._dropped_text()

    def _dropped_text(self) -> str:
        parts = [f"{n} {reason.replace('_', ' ')}" for reason, n in sorted(self.dropped.items()) if n]
        return f" Left out: {', '.join(parts)}." if parts else ""


def hygiene_for(records: list[dict[str, Any]], options: BoardOptions) -> Hygiene:
    """Identity words: defaults, the registry's names, every model named in the logs, extras."""
    seen = {s.get("model_name") for r in records for s in r.get("states", []) if isinstance(s, dict)}
    seen |= {m for r in records for m in r.get("models", []) if isinstance(m, str)}
    names = [*options.model_names, *sorted(n for n in seen if isinstance(n, str) and n)]
    return Hygiene(identity_words(names, options.extra_identity_words), drop_stopped=options.drop_stopped)


def build_board(records: list[dict[str, Any]], options: BoardOptions, skipped_lines: int = 0) -> Board:
    all_battles = battles_frame(records, hygiene_for(records, options))
    used = counted(all_battles, include_named=options.include_named)
    table = ratings.leaderboard(used, rounds=options.rounds, seed=options.seed)
    order = list(table["model"])
    dropped = all_battles["drop_reason"].value_counts().to_dict()
    if not options.include_named:
        dropped["named (not anonymous)"] = int((all_battles["drop_reason"].isna() & ~all_battles["anony"].astype(bool)).sum())
    return Board(
        battles=all_battles,
        counted=used,
        table=table,
        win_fraction=ratings.win_fraction(used, order) if order else pd.DataFrame(),
        pair_counts=ratings.pair_counts(used, order) if order else pd.DataFrame(),
        votes_read=len(all_battles),
        skipped_lines=skipped_lines,
        dropped={str(k): int(v) for k, v in dropped.items()},
    )


def board_from_logs(log_dir: Path, options: BoardOptions) -> Board:
    report: ReadReport = read_logs(Path(log_dir))
    return build_board(report.records, options, report.torn_last_lines + report.bad_lines)


def logs_signature(log_dir: Path) -> tuple[tuple[str, int, int], ...]:
    """Cheap fingerprint of the log files (name, size, mtime): recompute only when it changes."""
    out = []
    for path in log_files(Path(log_dir)):
        try:
            info = path.stat()
        except OSError:
            continue
        out.append((path.name, info.st_size, info.st_mtime_ns))
    return tuple(out)

"""Identity checks follow the word list: whether a reply names a model depends on the words (every
model name seen, the registry's, extras), which grow as models are added. Each row records which
word list checked it; when the list changes, the rows checked with another one are checked again
by re-reading only their own lines (by offset, `ingest.recheck`), and only for the added words
where the list just grew. Only this server's rows: only it has their lines.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from webui.leaderboard.votes import cold_copy
from webui.leaderboard.votes.ingest import recheck
from webui.leaderboard.votes.tables import IndexTables
from webui.leaderboard.votes.workers import Workers, pool_for

RECHECK_BATCH = 20_000  # rows a worker checks again at a time


def recheck_rows(
    tables: IndexTables,
    log_dir: Path,
    words: Sequence[str],
    pool: Workers | None = None,
    copy: cold_copy.ColdCopy | None = None,
) -> int:
    """Check again, against `words`, every row of this server's files checked with another word
    list (another server's rows are its own to check: only it has their lines). Which lists
    are in use comes from meta, so that with nothing to check no row is read. How many rows were
    checked; those whose check changed go into `copy` too (a cold catch-up's)."""
    db, server = tables.db, tables.server
    current = tables.word_set_id(words)
    mine = "file IN (SELECT name FROM files WHERE server = ?)"
    stale = sorted(tables.in_use() - {current})
    found = [db.execute("SELECT id, words FROM word_sets WHERE id = ?", (i,)).fetchone() for i in stale]
    others = [row for row in found if row is not None]  # None: rebuilt by another process meanwhile
    rechecked = 0
    for old_id, old_words in others:
        old, new = set(json.loads(old_words)), set(words)
        if old <= new:  # only added words: a row that leaked still leaks; the rest, for those
            check, where = sorted(new - old), "word_set = ? AND leak = 0"
        elif old >= new:  # only words taken away: a row that did not leak still does not
            check, where = list(words), "word_set = ? AND leak = 1"
        else:
            check, where = list(words), "word_set = ?"
        newest = int(db.execute("SELECT coalesce(max(id), 0) FROM votes").fetchone()[0])
        targets = db.execute(
            f'SELECT id, file, "offset", length, leak FROM votes WHERE {where} AND {mine} '
            'AND id <= ? ORDER BY file, "offset"',
            (old_id, server, newest),
        ).fetchall()
        before = {row_id: bool(leak) for row_id, _, _, _, leak in targets}
        found = _leaks(log_dir, targets, check, pool)
        changed = [(int(leak), row_id) for row_id, leak in found if leak != before[row_id]]
        if copy is not None:
            copy.leaks.extend(changed)
        with tables.transaction():
            db.executemany("UPDATE votes SET leak = ? WHERE id = ?", changed)
            db.execute(
                f"UPDATE votes SET word_set = ? WHERE word_set = ? AND {mine} AND id <= ?",
                (current, old_id, server, newest),
            )
            # Rows another process added meanwhile with the old list keep it in use.
            later = db.execute(
                "SELECT DISTINCT file FROM votes WHERE id > ? AND word_set = ?", (newest, old_id)
            ).fetchall()
            tables.note_in_use(add={current}, remove=set() if {f for (f,) in later} & tables.my_files() else {old_id})
            if changed:
                cold_copy.bump_generation(tables, copy)
        rechecked += len(targets)
    return rechecked


def _leaks(
    log_dir: Path, targets: list[tuple[int, str, int, int, int]], words: Sequence[str], pool: Workers | None
) -> list[tuple[int, bool]]:
    """(row id, leaks?) for rows re-read from their lines (`ingest.recheck`), in the processes
    of `pool`, or in a pool of their own when they are many, else here."""
    batches = [
        (log_dir / name, rows[start : start + RECHECK_BATCH])
        for name, rows in _by_file(targets)
        for start in range(0, len(rows), RECHECK_BATCH)
    ]
    size = sum(length for _, _, _, length, _ in targets)
    with contextlib.nullcontext(pool) if pool is not None and pool.parallel else pool_for(size) as workers:
        tasks = [workers.submit(recheck, path, rows, tuple(words)) for path, rows in batches]
        return [found for task in tasks for found in task.result()]


def _by_file(targets: list[tuple[int, str, int, int, int]]) -> Iterator[tuple[str, list[tuple[int, int, int]]]]:
    groups: dict[str, list[tuple[int, int, int]]] = {}
    for row_id, name, offset, length, _ in targets:
        groups.setdefault(name, []).append((row_id, offset, length))
    yield from groups.items()

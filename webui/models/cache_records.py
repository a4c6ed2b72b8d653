"""Which dequantised-weights folders are still wanted: each one records the file it was made from.

A cache folder is keyed by its GGUF file's path, size and modification time, so reinstalling the
app (a new virtualenv, a package upgraded) writes a new folder of the same weights and the old
one, hundreds of megabytes, would stay forever. Guarantees:

- a folder is removed only when the file it records is gone, or is no longer the file it was made
  from (another size or modification time): no running checkout can be using its source any more;
- a folder without a record (written before records existed, or by hand) is never removed;
- half-written folders (`.tmp-*`, being renamed into place by another process) are never touched.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

log = logging.getLogger(__name__)
COMPLETE_MARK = ".complete"  # written last: a folder without it is not a cache entry yet


def is_stale(folder: Path) -> bool:
    """True when `folder`'s recorded source file is gone or has changed since the folder was made."""
    try:
        record = json.loads((folder / COMPLETE_MARK).read_text(encoding="utf-8"))
        source = Path(record["source"])
        size, mtime_ns = int(record["size"]), int(record["mtime_ns"])
    except (OSError, ValueError, KeyError, TypeError):
        return False  # no mark, an empty one (older caches) or one we cannot read: keep the folder
    try:
        stat = source.stat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns)


def prune_stale(root: Path, keep: Path) -> list[Path]:
    """Remove the folders under `root` (but `keep`) whose source is gone or changed; the removed."""
    removed = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if folder == keep or folder.name.startswith(".") or not folder.is_dir() or not is_stale(folder):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
        log.info("removed %s: the file it was dequantised from is gone or changed", folder.name)
    return removed

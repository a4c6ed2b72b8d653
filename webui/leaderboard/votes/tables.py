"""The vote index's store: its two connections and the bookkeeping in its tables (meta: the
index's identity, its generation and the word lists this server's rows carry; the word lists).

Writing (catching up, rebuilding) holds `db` and `lock`; reading has `reader` and `read_lock` of
its own, so that a reader never waits for a long catch-up (it sees what was committed).
webui.db.schema holds the tables, as numbered migrations.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import uuid
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from webui.db.schema import DEFERRED_INDEXES, migrate
from webui.db.store import Store, open_store
from webui.records.identity import identity_words

SET_META = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
# The meta key (one per server) of the word lists this server's rows may carry, so that a catch-up
# learns whether any row needs checking again without reading every row. Absent: not known (an
# index written before it was kept), and found once by reading them.
_IN_USE = "word_sets_in_use:"


class IndexTables:
    """The store at `target` (an SQLite file or a postgresql:// URL) as `server` uses it. `open`
    connects; until then there are no connections."""

    def __init__(self, target: str | Path, server: str) -> None:
        self.target = target
        self.server = server
        self.lock = threading.Lock()
        self.read_lock = threading.Lock()

    def open(self) -> None:
        """Both connections, the tables brought up to date (by the constructor, or under both locks)."""
        self.db: Store = open_store(self.target)
        try:
            with self.db.transaction():
                self.migrate()
            self.reader: Store = open_store(self.target)
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        """Both connections (the caller holds both locks)."""
        self.db.close()
        self.reader.close()

    @contextlib.contextmanager
    def read(self) -> Iterator[Store]:
        with self.read_lock:
            yield self.reader

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return self.db.transaction()  # one writer at a time, across processes and servers too

    def generation(self, db: Store | None = None) -> int:
        return int(self.meta("generation", db) or 0)

    def meta(self, key: str, db: Store | None = None) -> str | None:
        row = (db or self.db).execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def bump_generation(self) -> None:
        self.db.execute(SET_META, ("generation", str(self.generation() + 1)))

    def migrate(self) -> None:
        """Inside a write transaction: the newest tables, and this store's identity."""
        migrate(self.db)
        for statement in DEFERRED_INDEXES:
            self.db.execute(statement)
        # Names this index among others at the same place (a rebuild, a deleted file): the columnar
        # copy of its rows is only valid for the index that wrote it.
        self.db.execute(
            "INSERT INTO meta (key, value) VALUES ('identity', ?) ON CONFLICT (key) DO NOTHING", (uuid.uuid4().hex,)
        )
        # No file of this server yet: none of its rows carries a word list.
        self.db.execute(
            "INSERT INTO meta (key, value) SELECT ?, '[]' WHERE NOT EXISTS (SELECT 1 FROM files WHERE server = ?) "
            "ON CONFLICT (key) DO NOTHING",
            (_IN_USE + self.server, self.server),
        )

    def words(self, model_names: Sequence[str], extra: str) -> tuple[str, ...]:
        seen = sorted(n for (n,) in self.db.execute("SELECT name FROM names"))
        return identity_words([*model_names, *seen], extra)

    def word_set_id(self, words: Sequence[str]) -> int:
        text = json.dumps(sorted(set(words)))
        key = hashlib.sha256(text.encode()).hexdigest()
        self.db.execute("INSERT INTO word_sets (key, words) VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (key, text))
        return int(self.db.execute("SELECT id FROM word_sets WHERE key = ?", (key,)).fetchone()[0])

    def my_files(self) -> set[str]:
        return {n for (n,) in self.db.execute("SELECT name FROM files WHERE server = ?", (self.server,))}

    def in_use(self) -> set[int]:
        """The word lists this server's rows may carry (a few more after rows went: never fewer)."""
        stored = self.meta(_IN_USE + self.server)
        if stored is not None:
            return set(json.loads(stored))
        with self.transaction():  # once for an index from before the list was kept: read every row
            found = {
                int(w)
                for (w,) in self.db.execute(
                    "SELECT DISTINCT word_set FROM votes WHERE word_set IS NOT NULL "
                    "AND file IN (SELECT name FROM files WHERE server = ?)",
                    (self.server,),
                )
            }
            self.db.execute(SET_META, (_IN_USE + self.server, json.dumps(sorted(found))))
        return found

    def note_in_use(self, add: AbstractSet[int], remove: AbstractSet[int] = frozenset()) -> None:
        """Inside a write transaction: keep meta's word lists in use up to date (if it is kept)."""
        stored = self.meta(_IN_USE + self.server)
        if stored is None:
            return  # not known yet: the next recheck reads every row
        before = set(json.loads(stored))
        after = (before | add) - remove
        if after != before:
            self.db.execute(SET_META, (_IN_USE + self.server, json.dumps(sorted(after))))

"""The sqlite provider: persistent long-term memory with SQLite FTS5 full-text search.

Items live in ``memory_items``; ``memory_fts`` is an external-content FTS5 index over their
``terms`` column, kept in step by triggers, so an add or a delete is one autocommitted statement:
nothing half-written if the caller is cancelled, and no lock of our own. ``terms`` holds the
item's words as :func:`runtime_core.memory.provider.terms` folds them, separated by spaces; the
``ascii`` tokenizer splits on those spaces only (letters and digits outside ASCII are token
characters to it), so FTS5 indexes exactly the words Python defines and a query built from the
same function matches whatever the text's script, accents or case.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import aiosqlite

from runtime_core import aio_sqlite
from runtime_core.journal.sqlite.lock import make_private
from runtime_core.memory.provider import MemoryItem, MemoryUnavailable, query_terms, rank, terms

SCHEMA_VERSION = 1
SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memory_items (
    rid INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    process TEXT NOT NULL,
    text TEXT NOT NULL,
    terms TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_items_by_process ON memory_items (process, rid);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
    terms, content='memory_items', content_rowid='rid', tokenize='ascii');
CREATE VIRTUAL TABLE IF NOT EXISTS memory_vocab USING fts5vocab(memory_fts, 'row');
CREATE TRIGGER IF NOT EXISTS memory_items_added AFTER INSERT ON memory_items BEGIN
    INSERT INTO memory_fts (rowid, terms) VALUES (new.rid, new.terms);
END;
CREATE TRIGGER IF NOT EXISTS memory_items_deleted AFTER DELETE ON memory_items BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, terms) VALUES ('delete', old.rid, old.terms);
END;
INSERT OR IGNORE INTO memory_meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}');
COMMIT;
"""
#: How many FTS5 matches (best bm25 first) are ranked for one search: all of them at the
#: sizes agent memory usually has; a cap that keeps a query for "the" cheap at any size.
CANDIDATES = 200
OVERFETCH = 4  # a larger limit still gets this many candidates per result


def fts_query(words: list[str]) -> str:
    """An FTS5 query matching any of ``words``. Each is a quoted string (quotes doubled), so
    operators such as AND, NEAR, ``*`` or parentheses in user text are only ever words."""
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in words)


class SQLiteMemory:
    kind = "sqlite"

    def __init__(self, process: str, path: str | Path, *, busy_timeout_ms: int = 10_000) -> None:
        self.process = process
        self.path = Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._conn: aiosqlite.Connection | None = None
        self._count = 0

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    @property
    def item_count(self) -> int:
        return self._count

    def _connection(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise MemoryUnavailable(f"the long-term memory of process {self.process!r} "
                                    f"({self.path}) is closed; start the process first")
        return self._conn

    async def open(self) -> None:
        if self._conn is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            make_private(self.path, "long-term memory")  # 0600, as the journal: what it holds
            conn = await aio_sqlite.connect(self.path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise MemoryUnavailable(f"long-term memory {self.path} cannot be created: {exc}; "
                                    "set memory.path to a writable place") from exc
        try:
            await conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
            await conn.execute("PRAGMA journal_mode=WAL")  # as the journal: readers never wait
            await conn.execute("PRAGMA synchronous=FULL")  # an item remembered stays remembered
            await conn.executescript(SCHEMA)
            rows = await conn.execute_fetchall(
                "SELECT value FROM memory_meta WHERE key = 'schema_version'")
            version = int(next(iter(rows))[0])
            if version > SCHEMA_VERSION:
                raise MemoryUnavailable(
                    f"long-term memory {self.path} was written by a newer promptui (schema "
                    f"{version}, this one knows {SCHEMA_VERSION}); upgrade or set memory.path")
            rows = await conn.execute_fetchall(
                "SELECT COUNT(*) FROM memory_items WHERE process = ?", (self.process,))
            self._count = int(next(iter(rows))[0])
        except sqlite3.Error as exc:
            await conn.close()
            raise MemoryUnavailable(
                f"long-term memory {self.path} cannot be opened: {exc}; move the file aside or "
                "set memory.path to another file") from exc
        except BaseException:
            await conn.close()
            raise
        self._conn = conn

    async def add(self, text: str, metadata: dict[str, Any] | None = None) -> str:
        conn = self._connection()
        item_id = uuid.uuid4().hex[:16]
        async with conn.execute(
            "INSERT INTO memory_items (id, process, text, terms, metadata, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (item_id, self.process, text, " ".join(terms(text)),
             json.dumps(metadata or {}, default=str), time.time())):
            self._count += 1
        return item_id

    async def search(self, query: str, limit: int = 5, *, min_score: float = 0.0
                     ) -> list[MemoryItem]:
        conn = self._connection()
        wanted = query_terms(query)
        if not wanted or limit <= 0:
            return []
        # FTS5 finds the candidates (bm25 picks the best ones when there are very many),
        # then the shared rule ranks them, as the in_memory provider does.
        rows = await conn.execute_fetchall(
            "SELECT i.rid, i.id, i.text, i.metadata, i.created_at FROM memory_fts "
            "JOIN memory_items i ON i.rid = memory_fts.rowid "
            "WHERE memory_fts MATCH ? AND i.process = ? "
            "ORDER BY bm25(memory_fts), i.rid DESC LIMIT ?",
            (fts_query(wanted), self.process, max(CANDIDATES, limit * OVERFETCH)))
        if not rows:
            return []
        marks = ", ".join("?" * len(wanted))
        freq = await conn.execute_fetchall(
            f"SELECT term, doc FROM memory_vocab WHERE term IN ({marks})", wanted)
        totals = await conn.execute_fetchall("SELECT COUNT(*) FROM memory_items")
        items = [MemoryItem(item_id, text, json.loads(metadata), created_at)
                 for _, item_id, text, metadata, created_at in sorted(rows)]  # oldest first
        return rank(wanted, items, {str(term): int(doc) for term, doc in freq},
                    int(next(iter(totals))[0]), limit, min_score)

    async def delete(self, item_id: str) -> bool:
        conn = self._connection()
        async with conn.execute("DELETE FROM memory_items WHERE id = ? AND process = ?",
                                (item_id, self.process)) as cursor:
            deleted = cursor.rowcount > 0
        if deleted:
            self._count -= 1
        return deleted

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

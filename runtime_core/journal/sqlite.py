"""SQLite journal: WAL, synchronous=FULL, one writer task that group-commits.

Every ``append`` goes onto one queue. The writer takes everything queued, writes it in one
``BEGIN IMMEDIATE ... COMMIT`` on the writer connection's thread, and only then releases the
callers, so an acknowledged entry is on disk and throughput grows with the number of producers
instead of paying one fsync each. Reads use a second connection and never wait for the writer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiosqlite

from runtime_core import crashpoints
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.provider import (
    IndexRules,
    JournalError,
    OpenRun,
    ReadFilter,
    StoredDeadLetter,
    to_json,
)

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
SQLITE_HEADER = b"SQLite format 3\x00"

MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE entries (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            process TEXT NOT NULL,
            pid INTEGER NOT NULL REFERENCES incarnations (pid),
            seq INTEGER NOT NULL,
            ts REAL NOT NULL,
            entry_type TEXT NOT NULL,
            run_id TEXT,
            data TEXT NOT NULL,
            crc INTEGER NOT NULL,
            UNIQUE (process, seq)
        )""",
        "CREATE INDEX entries_by_type ON entries (process, entry_type, seq)",
        "CREATE INDEX entries_by_run ON entries (run_id) WHERE run_id IS NOT NULL",
        "CREATE TABLE incarnations (pid INTEGER PRIMARY KEY, process_id TEXT NOT NULL UNIQUE)",
        "CREATE TABLE heads (process TEXT PRIMARY KEY, last_seq INTEGER NOT NULL)",
        """CREATE TABLE pending (
            process TEXT NOT NULL, event_id TEXT NOT NULL, ord INTEGER NOT NULL,
            event TEXT NOT NULL, PRIMARY KEY (process, event_id))""",
        "CREATE INDEX pending_order ON pending (process, ord)",
        """CREATE TABLE dead_letters (
            process TEXT NOT NULL, event_id TEXT NOT NULL, ord INTEGER NOT NULL,
            event TEXT NOT NULL, reason TEXT NOT NULL, error TEXT NOT NULL,
            attempts INTEGER NOT NULL, at REAL NOT NULL, PRIMARY KEY (process, event_id))""",
        "CREATE INDEX dead_order ON dead_letters (process, ord)",
        """CREATE TABLE open_runs (
            process TEXT NOT NULL, run_id TEXT NOT NULL, event_id TEXT NOT NULL,
            attempt INTEGER NOT NULL, state TEXT NOT NULL, started_seq INTEGER NOT NULL,
            PRIMARY KEY (process, run_id))""",
    ],
}


def checksum(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


class DamagedJournal(JournalError):
    def __init__(self, path: Path, reason: str, moved_to: Path | None = None) -> None:
        self.path = path
        self.reason = reason
        self.moved_to = moved_to
        where = f"; moved aside to {moved_to}" if moved_to else ""
        super().__init__(f"journal {path} cannot be read: {reason}{where}")


def _check_readable(path: Path) -> str | None:
    """Return why an existing journal file cannot be used, or None when it looks sound."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    with path.open("rb") as fh:
        if fh.read(16) != SQLITE_HEADER:
            return "not an SQLite database (bad file header)"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return f"database error: {exc}"
    if row is None:
        return "no schema version recorded"
    if int(row[0]) > SCHEMA_VERSION:
        return f"written by a newer promptui (schema {row[0]}, this one knows {SCHEMA_VERSION})"
    return None


def move_aside(path: Path) -> Path:
    """Rename a damaged journal (and its -wal/-shm files) out of the way; never delete it."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    path.rename(target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    return target


_Pending = tuple[JournalEntry, str, Any, "asyncio.Future[None]", list[tuple[str, Any]]]


_FLUSH = JournalEntry("(flush marker)", "")


class SQLiteJournal:
    def __init__(
        self,
        path: str | Path = ".promptui/journal.db",
        *,
        strict: bool = False,
        busy_timeout_ms: int = 10_000,
        max_batch: int = 5_000,
        on_damage: Callable[[DamagedJournal], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.strict = strict
        self.busy_timeout_ms = busy_timeout_ms
        self.max_batch = max_batch
        self.on_damage = on_damage
        self.damage: DamagedJournal | None = None
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._queue: asyncio.Queue[_Pending | None] = asyncio.Queue()
        self._writer_task: asyncio.Task[None] | None = None
        self._heads: dict[str, int] = {}
        self._pids: dict[str, int] = {}  # process_id (a uuid) -> small integer stored per row
        self._error: BaseException | None = None
        self._closed = False
        self.batches = 0
        self.committed = 0

    # -- opening ----------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._writer_task is not None and not self._closed

    async def open(self) -> None:
        """Open (or reopen after close); a no-op when already open."""
        if self.is_open:
            return
        self._closed = False
        self._error = None
        self._queue = asyncio.Queue()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        problem = await asyncio.to_thread(_check_readable, self.path)
        if problem is not None:
            if self.strict:
                raise DamagedJournal(self.path, problem)
            moved = await asyncio.to_thread(move_aside, self.path)
            self.damage = DamagedJournal(self.path, problem, moved)
            log.critical("%s; starting a fresh journal", self.damage)
            if self.on_damage is not None:
                self.on_damage(self.damage)
        self._writer = await aiosqlite.connect(self.path, isolation_level=None)
        await self._writer.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
        await self._writer.execute("PRAGMA journal_mode=WAL")
        await self._writer.execute("PRAGMA synchronous=FULL")
        await self._migrate()
        async with self._writer.execute("SELECT process, last_seq FROM heads") as cursor:
            self._heads = {row[0]: int(row[1]) async for row in cursor}
        async with self._writer.execute("SELECT process_id, pid FROM incarnations") as cursor:
            self._pids = {row[0]: int(row[1]) async for row in cursor}
        self._reader = await aiosqlite.connect(self.path, isolation_level=None)
        await self._reader.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
        self._writer_task = asyncio.create_task(self._write_loop(), name="journal-writer")

    async def _migrate(self) -> None:
        assert self._writer is not None
        await self._writer.execute(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        async with self._writer.execute(
            "SELECT value FROM meta WHERE key='schema_version'"
        ) as cursor:
            row = await cursor.fetchone()
        version = int(row[0]) if row else 0
        for target in sorted(v for v in MIGRATIONS if v > version):
            await self._writer.execute("BEGIN IMMEDIATE")
            try:
                for statement in MIGRATIONS[target]:
                    await self._writer.execute(statement)
                await self._writer.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(target),),
                )
                await self._writer.execute("COMMIT")
            except BaseException:
                await self._writer.execute("ROLLBACK")
                raise

    # -- writing ---------------------------------------------------------------------------------
    def submit(self, entry: JournalEntry, *, attachment: Any = None) -> asyncio.Future[None]:
        """Queue ``entry`` (its seq is assigned now) and return a future that resolves once it is
        committed. Entries commit in the order they were submitted."""
        if self._closed or self._writer_task is None:
            raise JournalError(f"journal {self.path} is not open")
        if self._error is not None:
            raise JournalError(f"journal {self.path} failed earlier: {self._error}")
        data = to_json(entry.data, f"{entry.entry_type} entry data")
        attached = None if attachment is None else to_json(attachment, "entry attachment")
        effects = IndexRules.effects(entry, attachment)  # refuses a bad entry before its seq
        seq = self._heads.get(entry.process, 0) + 1
        self._heads[entry.process] = seq
        entry.seq = seq
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((entry, data, attached, future, effects))
        return future

    async def append(self, entry: JournalEntry, *, attachment: Any = None) -> JournalEntry:
        """Append ``entry`` and return once it is durable."""
        await self.submit(entry, attachment=attachment)
        return entry

    async def flush(self) -> None:
        if self._writer_task is None or self._closed:
            return
        if self._error is not None:
            raise JournalError(f"journal {self.path} failed earlier: {self._error}")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((_FLUSH, "", None, future, []))  # a marker, never written
        await future

    async def _write_loop(self) -> None:
        queue = self._queue
        while True:
            item = await queue.get()
            if item is None:
                return
            batch = [item]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    nxt = queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            rows = [b for b in batch if b[0] is not _FLUSH]
            try:
                if rows:
                    await self._commit(rows)
            except BaseException as exc:  # keep serving callers; every later append fails loudly
                self._error = exc
                log.critical("journal %s: write failed: %s", self.path, exc)
                for _, _, _, fut, _ in batch:
                    if not fut.done():
                        fut.set_exception(JournalError(f"journal write failed: {exc}"))
                        fut.exception()  # mark retrieved: fire-and-forget callers may not look
                if isinstance(exc, asyncio.CancelledError):
                    raise
            else:
                self.batches += 1
                self.committed += len(rows)
                for _, _, _, fut, _ in batch:
                    if not fut.done():
                        fut.set_result(None)
            if stop:
                return

    async def _commit(self, rows: list[_Pending]) -> None:
        assert self._writer is not None
        entry_rows = []
        ops: list[tuple[str, tuple[Any, ...]]] = []
        heads: dict[str, int] = {}
        for entry, data, attached, _, effects in rows:
            entry_rows.append((entry.process, entry.process_id, entry.seq, entry.timestamp,
                               entry.entry_type, entry.run_id, data, checksum(data)))
            heads[entry.process] = entry.seq
            for op, arg in effects:
                ops.extend(_index_sql(entry, op, arg, attached))
        # One hop to the connection's thread for the whole transaction (aiosqlite runs each
        # call on its own thread; several awaits would hold the write lock across loop turns).
        await self._writer._execute(  # type: ignore[no-untyped-call]
            _write_batch, self._writer._conn, entry_rows, ops, list(heads.items()), self._pids
        )

    # -- reading ---------------------------------------------------------------------------------
    async def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if self._reader is None:
            raise JournalError(f"journal {self.path} is not open")
        try:
            return list(await self._reader.execute_fetchall(sql, params))
        except sqlite3.DatabaseError as exc:
            raise JournalError(f"journal {self.path}: read failed: {exc}") from exc

    async def read(self, query: ReadFilter) -> list[JournalEntry]:
        where: list[str] = []
        params: list[Any] = []
        if query.process is not None:
            where.append("e.process = ?")
            params.append(query.process)
        if query.entry_type is not None:
            where.append("e.entry_type = ?")
            params.append(query.entry_type)
        if query.run_id is not None:
            where.append("e.run_id = ?")
            params.append(query.run_id)
        if query.since_seq is not None:
            where.append("e.seq > ?")
            params.append(query.since_seq)
        if query.since_time is not None:
            where.append("e.ts >= ?")
            params.append(query.since_time)
        if query.until_seq is not None:
            where.append("e.seq < ?")
            params.append(query.until_seq)
        if query.until_time is not None:
            where.append("e.ts <= ?")
            params.append(query.until_time)
        if query.contains:
            where.append("(e.data LIKE ? ESCAPE '\\' OR e.entry_type LIKE ? ESCAPE '\\')")
            pattern = "%" + query.contains.replace("\\", "\\\\").replace(
                "%", "\\%").replace("_", "\\_") + "%"
            params.extend([pattern, pattern])
        sql = _SELECT
        if where:
            sql += " WHERE " + " AND ".join(where)
        order = "e.seq" if query.process is not None else "e.id"
        sql += f" ORDER BY {order} {'DESC' if query.newest_first else 'ASC'}"
        if query.limit is not None:
            sql += " LIMIT ?"
            params.append(int(query.limit))
        return [_row_to_entry(row) for row in await self._fetch(sql, tuple(params))]

    async def count_types(self, process: str, *, since_seq: int = 0) -> dict[str, int]:
        rows = await self._fetch(
            "SELECT entry_type, COUNT(*) FROM entries WHERE process = ? AND seq > ? "
            "GROUP BY entry_type", (process, since_seq))
        return {str(t): int(n) for t, n in rows}

    async def checkpoint(self, process: str, state: dict[str, Any], *, process_id: str = ""
                         ) -> JournalEntry:
        """Append a checkpoint entry holding ``state`` and return once it is durable."""
        return await self.append(JournalEntry(process, EntryType.CHECKPOINT, dict(state),
                                              process_id=process_id))

    async def last_checkpoint(self, process: str) -> JournalEntry | None:
        rows = await self._fetch(
            _SELECT + " WHERE e.process = ? AND e.entry_type = ? ORDER BY e.seq DESC LIMIT 1",
            (process, EntryType.CHECKPOINT),
        )
        return _row_to_entry(rows[0]) if rows else None

    async def pending_events(self, process: str) -> list[dict[str, Any]]:
        rows = await self._fetch(
            "SELECT event FROM pending WHERE process = ? ORDER BY ord", (process,)
        )
        return [json.loads(row[0]) for row in rows]

    async def dead_letters(self, process: str) -> list[StoredDeadLetter]:
        rows = await self._fetch(
            "SELECT event, reason, error, attempts, at FROM dead_letters WHERE process = ? "
            "ORDER BY ord", (process,)
        )
        return [StoredDeadLetter(json.loads(r[0]), r[1], r[2], int(r[3]), float(r[4]))
                for r in rows]

    async def open_runs(self, process: str) -> list[OpenRun]:
        rows = await self._fetch(
            "SELECT run_id, event_id, attempt, state, started_seq FROM open_runs "
            "WHERE process = ? ORDER BY started_seq", (process,)
        )
        return [OpenRun(r[0], r[1], int(r[2]), r[3], int(r[4])) for r in rows]

    async def processes(self) -> list[str]:
        rows = await self._fetch("SELECT process FROM heads ORDER BY process")
        return [row[0] for row in rows]

    # -- closing ---------------------------------------------------------------------------------
    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._writer_task is not None:
            self._queue.put_nowait(None)
            await asyncio.gather(self._writer_task, return_exceptions=True)
        for conn in (self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._reader = self._writer = None
        self._writer_task = None


_SELECT = ("SELECT e.process, i.process_id, e.seq, e.ts, e.entry_type, e.run_id, e.data, e.crc "
           "FROM entries e JOIN incarnations i ON i.pid = e.pid")


def _row_to_entry(row: Any) -> JournalEntry:
    process, process_id, seq, ts, entry_type, run_id, data, crc = row
    if checksum(data) != crc:
        raise JournalError(
            f"journal entry {process}:{seq} is corrupt: "
            "its checksum does not match; run 'promptui journal verify'"
        )
    return JournalEntry(process=process, entry_type=entry_type, data=json.loads(data),
                        process_id=process_id, run_id=run_id, timestamp=float(ts),
                        seq=int(seq))


_SCALE = IndexRules.ORD_SCALE


def _index_sql(entry: JournalEntry, op: str, arg: Any, attached: str | None
               ) -> list[tuple[str, tuple[Any, ...]]]:
    p = entry.process
    if op == "pending_add":
        return [("INSERT OR REPLACE INTO pending (process, event_id, ord, event) "
                 "VALUES (?, ?, ?, ?)", (p, arg["event_id"], entry.seq * _SCALE, attached))]
    if op == "pending_remove":
        return [("DELETE FROM pending WHERE process = ? AND event_id = ?", (p, arg))]
    if op == "run_open":
        run_id, event_id, attempt = arg
        return [("INSERT OR REPLACE INTO open_runs (process, run_id, event_id, attempt, state, "
                 "started_seq) VALUES (?, ?, ?, ?, 'running', ?)",
                 (p, run_id, event_id, attempt, entry.seq))]
    if op in ("run_wait", "run_resume"):
        state = "waiting" if op == "run_wait" else "running"
        return [("UPDATE open_runs SET state = ? WHERE process = ? AND run_id = ?",
                 (state, p, arg))]
    if op == "run_close":
        return [("DELETE FROM open_runs WHERE process = ? AND run_id = ?", (p, arg))]
    if op == "dead_add":
        _, data = arg
        return [("INSERT OR REPLACE INTO dead_letters (process, event_id, ord, event, reason, "
                 "error, attempts, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (p, data["event_id"], entry.seq * _SCALE, attached, data.get("reason", ""),
                  data.get("error", ""), int(data.get("attempts", 0)), entry.timestamp))]
    if op == "dead_trim":
        return [("DELETE FROM dead_letters WHERE process = ? AND ord NOT IN (SELECT ord FROM "
                 "dead_letters WHERE process = ? ORDER BY ord DESC LIMIT ?)", (p, p, arg))]
    if op == "dead_redeliver":
        out: list[tuple[str, tuple[Any, ...]]] = []
        for position, event_id in enumerate(arg):
            out.append(("INSERT OR REPLACE INTO pending (process, event_id, ord, event) SELECT "
                        "process, event_id, ?, event FROM dead_letters WHERE process = ? AND "
                        "event_id = ?", (entry.seq * _SCALE + position, p, event_id)))
            out.append(("DELETE FROM dead_letters WHERE process = ? AND event_id = ?",
                        (p, event_id)))
        return out
    if op == "dead_clear":
        if arg is None:
            return [("DELETE FROM dead_letters WHERE process = ?", (p,))]
        return [("DELETE FROM dead_letters WHERE process = ? AND event_id = ?", (p, e))
                for e in arg]
    raise JournalError(f"unknown index operation {op!r}")


def _write_batch(
    conn: sqlite3.Connection,
    entry_rows: list[tuple[Any, ...]],
    ops: list[tuple[str, tuple[Any, ...]]],
    heads: list[tuple[str, int]],
    pids: dict[str, int],
) -> None:
    """Runs on the writer connection's thread (the only user of ``pids``)."""
    conn.execute("BEGIN IMMEDIATE")
    added: list[str] = []
    try:
        rows = []
        for process, process_id, *rest in entry_rows:
            pid = pids.get(process_id)
            if pid is None:  # resolved in the transaction: another writer may have added it
                conn.execute("INSERT OR IGNORE INTO incarnations (process_id) VALUES (?)",
                             (process_id,))
                pid = int(conn.execute("SELECT pid FROM incarnations WHERE process_id = ?",
                                       (process_id,)).fetchone()[0])
                pids[process_id] = pid
                added.append(process_id)
            rows.append((process, pid, *rest))
        conn.executemany(
            "INSERT INTO entries (process, pid, seq, ts, entry_type, run_id, data, crc) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        for sql, params in ops:
            conn.execute(sql, params)
        conn.executemany(
            "INSERT INTO heads (process, last_seq) VALUES (?, ?) "
            "ON CONFLICT (process) DO UPDATE SET last_seq = excluded.last_seq",
            heads,
        )
        crashpoints.reached("group_commit")  # rows written, transaction not committed
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        for process_id in added:  # not committed: forget them
            pids.pop(process_id, None)
        raise

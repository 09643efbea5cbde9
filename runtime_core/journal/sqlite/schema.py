"""The SQLite journal's file: its tables and migrations, entry checksums, and telling a usable
file from a damaged one (refused, or moved aside on request: never deleted).
"""

from __future__ import annotations

import sqlite3
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from runtime_core import aio_sqlite
from runtime_core.journal.entry import TYPE_INDEXED as _TYPE_INDEXED
from runtime_core.journal.entry import TYPES_INDEXED as _TYPES_INDEXED
from runtime_core.journal.provider import JournalError
from runtime_core.journal.run_key import key_expression
from runtime_core.journal.sqlite.lock import ELSEWHERE, make_private
from runtime_core.journal.sqlite.vacuum import (
    SWITCH_AT_OPEN_BYTES,
    set_incremental,
    switch_to_incremental,
)

if TYPE_CHECKING:  # only a type here: reading a journal file read-only needs no aiosqlite
    import aiosqlite

    from runtime_core.journal.sqlite.left_behind import LeftBehind

SCHEMA_VERSION = 9
#: How check_readable's reason for a journal of a newer promptui starts (never damage).
NEWER = "written by a newer promptui"
SQLITE_HEADER = b"SQLite format 3\x00"
#: The entry types the entry type index holds (schema 3 on; entry.TYPES_INDEXED).
TYPE_INDEXED = _TYPE_INDEXED
TYPES_INDEXED = _TYPES_INDEXED

#: The run index as schema 8 makes it (journal.run_key).
RUN_INDEX = (f"CREATE INDEX entries_by_run ON entries ({key_expression('run_id')}) "
             "WHERE run_id IS NOT NULL")

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
    # 2: the delivery index (provider.py); a version 1 file gains the empty table on open
    2: [
        """CREATE TABLE deliveries (
            process TEXT NOT NULL, delivery_key TEXT NOT NULL, event_id TEXT NOT NULL,
            at REAL NOT NULL, PRIMARY KEY (process, delivery_key))""",
        "CREATE INDEX deliveries_by_age ON deliveries (process, at)",
    ],
    # 3: fewer pages per commit (each one a WAL frame in the fsync). Entries lose AUTOINCREMENT
    # (its counter page; ids stay increasing: nothing is ever deleted); the entry type index
    # keeps only the rare types a start or a rewind looks up the last of (every event's
    # acceptance and run end no longer add two index rows); the queue is one B-tree keyed by
    # event, read in its order by a sort (it holds only what is queued) instead of a second
    # index. Rebuilt in place, rows and ids as they were.
    3: [
        """CREATE TABLE entries_v3 (
            id INTEGER PRIMARY KEY,
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
        "INSERT INTO entries_v3 (id, process, pid, seq, ts, entry_type, run_id, data, crc) "
        "SELECT id, process, pid, seq, ts, entry_type, run_id, data, crc FROM entries ORDER BY id",
        "DROP TABLE entries",
        "ALTER TABLE entries_v3 RENAME TO entries",
        "CREATE INDEX entries_by_type ON entries (process, entry_type, seq) WHERE "
        + TYPE_INDEXED,
        "CREATE INDEX entries_by_run ON entries (run_id) WHERE run_id IS NOT NULL",
        """CREATE TABLE pending_v3 (
            process TEXT NOT NULL, event_id TEXT NOT NULL, ord INTEGER NOT NULL,
            event TEXT NOT NULL, PRIMARY KEY (process, event_id)) WITHOUT ROWID""",
        "INSERT INTO pending_v3 (process, event_id, ord, event) "
        "SELECT process, event_id, ord, event FROM pending",
        "DROP TABLE pending",
        "ALTER TABLE pending_v3 RENAME TO pending",
    ],
    # 4: retention's low-water marks (``marks``): entries below a process's before_seq may
    # have been removed by retention, and a gap there is not damage. (The switch to
    # incremental vacuuming is not a migration: see ``vacuum``.)
    4: [
        """CREATE TABLE IF NOT EXISTS retained (
            process TEXT PRIMARY KEY, before_seq INTEGER NOT NULL, removed INTEGER NOT NULL,
            at REAL NOT NULL)""",
    ],
    # 5: the entries' data of a run is smaller, no table changes: a run's end whose messages
    # are its goal and its reply leaves them out (rebuilt from its run_started), and zero
    # counts, empty lists and maps are left out of model usage, tool results and artifacts.
    # The version says so to an older promptui, which would read such an end as no messages
    # (it refuses the file as "written by a newer promptui"). Older entries read as they were.
    5: [],
    # 6: a run's entries leave out more of what a reader rebuilds exactly (journal.left_out):
    # a standard goal (its parts kept), an intent's idempotency key run_id:step, a result's
    # automatic action artifact. No table changes; an older promptui refuses the file.
    6: [],
    # 7: a run's model turns ride in its next tool intent or its end (``usage``), instead of
    # an entry each (journal.left_out.turns_of), and a first attempt is left out of its
    # run_started. No table changes; an older promptui, which would not see those turns (nor
    # so the calls a crash left open), refuses the file.
    7: [],
    # 8: the run index holds a run id's first characters (journal.run_key), not all of them:
    # a sixth of a run's bytes was that index. Rebuilt in place. And a run end leaves out its
    # event_done when its state says it (journal.left_out.event_done). An older promptui,
    # whose queries would no longer find a run by the index, refuses the file.
    8: ["DROP INDEX IF EXISTS entries_by_run", RUN_INDEX],
    # 9: a run's start rides in its first tool intent when that intent carries the model
    # turns before it (journal.left_out.STARTED): one row a run fewer. No table changes; an
    # older promptui, which would see such a run as never started, refuses the file.
    9: [],
}


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema up to SCHEMA_VERSION, one transaction per migration."""
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    version = int(row[0]) if row else 0
    for target in sorted(v for v in MIGRATIONS if v > version):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in MIGRATIONS[target]:
                conn.execute(statement)
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                         (str(target),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def connect_writer(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """The writing connection to the journal at ``path``: WAL, synchronous=FULL, the schema
    migrated, the file private to this user (``make_private``). Opened on any thread, then used
    only by the writer thread. A failure names the path and what to check."""
    conn: sqlite3.Connection | None = None
    try:
        make_private(path)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                               timeout=busy_timeout_ms / 1000)  # the busy timeout
        if not int(conn.execute("PRAGMA page_count").fetchone()[0]):  # a new file:
            set_incremental(conn)  # before its first table (and WAL) or never; on an
            # existing file setting it again is a write transaction (an fsync) each open
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        migrate(conn)
        switch_to_incremental(conn, path, limit=SWITCH_AT_OPEN_BYTES)
        return conn
    except (sqlite3.Error, OSError) as exc:  # e.g. a read-only file or folder
        if conn is not None:
            conn.close()
        raise _cannot_write(path, exc) from exc


def _cannot_write(path: Path, exc: BaseException) -> JournalError:
    return JournalError(f"cannot open journal {path} for writing: {exc}; check that this "
                        "user can write the file and its folder and that the disk has "
                        f"room, {ELSEWHERE}")


async def connect_reader(path: Path, busy_timeout_ms: int, *,
                         read_only: bool = False) -> aiosqlite.Connection:
    """A reading connection (reads never wait for the writer in WAL mode); ``read_only``: one
    that cannot write either, for a journal another writer holds."""
    timeout = busy_timeout_ms / 1000  # sqlite3's busy timeout: no PRAGMA round trip
    try:
        if read_only:
            return await aio_sqlite.connect(f"file:{path}?mode=ro", uri=True,
                                            isolation_level=None, timeout=timeout)
        return await aio_sqlite.connect(path, isolation_level=None, timeout=timeout)
    except sqlite3.Error as exc:
        raise _cannot_write(path, exc) from exc


def checksum(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


class DamagedJournal(JournalError):
    """A journal file that cannot be used as it is: unreadable (not a journal at all), or
    ``readable`` but damaged where a start reads it. ``moved_to`` is where it was moved aside
    (``on_damage: start_fresh``) and ``left_behind`` what it held; ``advice`` says how to
    proceed when nothing was moved (the salvage command)."""

    def __init__(self, path: Path, reason: str, moved_to: Path | None = None, *,
                 readable: bool = False, advice: str = "",
                 left_behind: LeftBehind | None = None) -> None:
        self.path = path
        self.reason = reason
        self.moved_to = moved_to
        self.readable = readable
        self.left_behind = left_behind
        what = "is damaged where a start reads it" if readable else "cannot be read"
        where = f"; moved aside to {moved_to}" if moved_to else ""
        super().__init__(f"journal {path} {what}: {reason}{where}"
                         + (f"; {advice}" if advice else ""))


def readonly_uri(path: Path) -> str:
    """The URI that opens ``path`` read-only for a check. Without a -wal file no writer has it
    open (a WAL writer keeps one while it does), so it is opened ``immutable``: SQLite then
    makes no -wal or -shm beside it, and a file that is refused stays exactly as it was."""
    wal = path.with_name(path.name + "-wal")
    return f"file:{path}?mode=ro" + ("" if wal.exists() else "&immutable=1")


def check_readable(path: Path) -> str | None:
    """Return why an existing journal file cannot be used, or None when it looks sound."""
    reason, conn = open_checked(path)
    if conn is not None:
        conn.close()
    return reason


def open_checked(path: Path) -> tuple[str | None, sqlite3.Connection | None]:
    """``check_readable``, and the read-only connection (``readonly_uri``) it read the file
    by, still open for the checks after it (one connection for all of a start's checks);
    None when there is no file or it cannot be used. The caller closes it."""
    if not path.exists() or path.stat().st_size == 0:
        return None, None
    with path.open("rb") as fh:
        if fh.read(16) != SQLITE_HEADER:
            return "not an SQLite database (bad file header)", None
    try:
        conn = sqlite3.connect(readonly_uri(path), uri=True, timeout=5)
    except sqlite3.DatabaseError as exc:
        return f"database error: {exc}", None
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        reason = _unusable(row)
    except sqlite3.DatabaseError as exc:
        reason = f"database error: {exc}"
    except ValueError as exc:  # text that is not UTF-8 any more
        reason = f"its meta table cannot be decoded: {exc}"
    if reason is not None:
        conn.close()
        return reason, None
    return None, conn


def _unusable(row: tuple[object, ...] | None) -> str | None:
    if row is None:
        return "no schema version recorded"
    if not str(row[0]).isdigit():
        return f"its schema version {row[0]!r} is not a number"
    if int(str(row[0])) > SCHEMA_VERSION:
        return f"{NEWER} (schema {row[0]}, this one knows {SCHEMA_VERSION})"
    return None


def free_name(path: Path, tag: str, suffix: str = "") -> Path:
    """``PATH.<tag>-<time><suffix>`` beside ``path``, numbered when that name is taken."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.{tag}-{stamp}{suffix}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{tag}-{stamp}-{n}{suffix}")
    return target


def move_aside(path: Path) -> Path:
    """Rename a damaged journal (and its -wal/-shm files) out of the way; never delete it."""
    target = free_name(path, "damaged")
    path.rename(target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    return target

"""SQLite journal: WAL, synchronous=FULL, one writer thread that group-commits.

Every ``submit`` goes onto one queue. The writer thread (``writer``) takes everything queued,
writes it in one ``BEGIN IMMEDIATE ... COMMIT``, and only then releases the callers, so an
acknowledged entry is on disk and throughput grows with the number of producers instead of
paying one fsync each. Reads use a second connection and never wait for the writer.

This module is the provider: connections, seqs and the reads. The file format (tables,
migrations, damage) is in ``schema``, one commit's SQL in ``commit``, the writer thread in
``writer`` and the read SQL in ``queries``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from runtime_core.journal.commit_times import CommitTimes
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.faults import FaultState
from runtime_core.journal.provider import (
    IndexRules,
    JournalError,
    to_json,
)
from runtime_core.journal.sql_reads import SqlReads
from runtime_core.journal.sqlite.check import take_file
from runtime_core.journal.sqlite.commit import PendingAppend
from runtime_core.journal.sqlite.left_behind import LeftBehind, found_beside
from runtime_core.journal.sqlite.lock import JournalLock, JournalLocked, check_path
from runtime_core.journal.sqlite.queries import SELECT_ENTRIES, read_sql, row_to_entry
from runtime_core.journal.sqlite.retainer import BackgroundRetention, Job
from runtime_core.journal.sqlite.retention import RetentionPolicy
from runtime_core.journal.sqlite.schema import (
    DamagedJournal,
    connect_reader,
    connect_writer,
)
from runtime_core.journal.sqlite.writer import FLUSH, JOB, WriterThread

log = logging.getLogger(__name__)
T = TypeVar("T")


def _acceptance_first(item: PendingAppend) -> int:
    # Waking an event's sender before the rest lets it submit its next event before the
    # writer takes its next batch (the tasks a settle wakes run in the order woken).
    return 0 if getattr(item[0], "entry_type", None) == EntryType.EVENT_ACCEPTED else 1


@dataclass(slots=True)
class _Opened:
    """What opening the file found and made: the damage moved aside (None: sound), the
    damaged files earlier starts left beside it, the writing connection, heads and pids."""

    damage: DamagedJournal | None
    earlier: list[LeftBehind]
    conn: sqlite3.Connection
    heads: dict[str, int]
    pids: dict[str, int]


class SQLiteJournal(SqlReads):
    """The embedded journal, the default: one SQLite file (WAL, ``synchronous=FULL``) that any
    number of processes may share, written by one thread that group-commits, so an
    acknowledged entry is on disk and many appends cost one fsync. Reads use a second
    connection and never wait for the writer. A damaged file is refused at open (or moved
    aside with ``start_fresh``), never glued onto; ``promptui journal salvage`` rescues it."""

    SELECT_ENTRIES = SELECT_ENTRIES
    BY_RUN_PROCESS = "+e.process"  # the run index finds a read by run ids, not (process, seq)
    read_sql = staticmethod(read_sql)
    row_to_entry = staticmethod(row_to_entry)

    def __init__(
        self,
        path: str | Path = ".promptui/journal.db",
        *,
        start_fresh: bool = False,
        strict: bool = False,
        busy_timeout_ms: int = 10_000,
        max_batch: int = 5_000,
        on_damage: Callable[[DamagedJournal], None] | None = None,
    ) -> None:
        self.path = Path(path)
        #: Damage moves the file aside and a fresh journal starts (on_damage: start_fresh);
        #: otherwise (the default) damage refuses the start, the file untouched.
        self.start_fresh = start_fresh
        self.strict = strict  # recover_on_start: strict: refuse even with start_fresh
        self.busy_timeout_ms = busy_timeout_ms
        self.max_batch = max_batch
        self.on_damage = on_damage
        self.damage: DamagedJournal | None = None
        #: Damaged journals moved aside from this path (by this open, or an earlier start) and
        #: still beside it: what they held is shown until they are salvaged or moved away.
        self.left_behind: list[LeftBehind] = []
        self._writer: WriterThread | None = None
        self._reader: aiosqlite.Connection | None = None
        self._lock = JournalLock(self.path)  # held while open: one writer per file
        self._heads: dict[str, int] = {}
        self._error: BaseException | None = None
        self.faults = FaultState(str(self.path))  # degraded while a commit cannot be made
        self._closed = False
        #: Set when another writer holds the file: this object reads what that one committed,
        #: and a write raises this (the writer's JournalLocked, naming who holds the file).
        self.read_only: JournalLocked | None = None
        self.batches = 0
        self.committed = 0
        self.commit_times = CommitTimes()  # each commit's duration, for /metrics
        #: Retention of the processes that set one (``retain``), in the background while open.
        self.retention = BackgroundRetention(self.path, self.run_job,
                                             lambda: self.faults.reason is not None)

    # -- opening ----------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        """Open for writing, or for reading what another writer commits (``read_only``)."""
        return (self._writer is not None or self.read_only is not None) and not self._closed

    async def open(self) -> None:
        """Open (or reopen after close); a no-op when already open. Refuses (a JournalError
        naming the path and what to do) a path that cannot hold a journal and a damaged one,
        unless ``start_fresh`` (see ``check``). When another writer (another runtime, or
        another journal object in this program) holds the file, it opens read-only: reads see
        what that writer committed, and a write raises the JournalLocked naming the holder."""
        if self.is_open:
            return
        self._closed = False
        self._error = None
        self.read_only = None
        try:  # one thread hop for the whole file side of an open (each hop is a wait)
            opened = await asyncio.to_thread(self._open_file)
        except JournalLocked as held:
            await self._open_read_only(held)
            return
        try:
            self._left_behind(opened.damage, opened.earlier)
            self._connect(opened)
            self._reader = await connect_reader(self.path, self.busy_timeout_ms)
            self.retention.start()
        except BaseException:
            if self._writer is None:  # else the writer thread has it
                opened.conn.close()
            await self._disconnect()
            self._lock.release()
            raise

    def _left_behind(self, damage: DamagedJournal | None, earlier: list[LeftBehind]) -> None:
        """Say (in the log, ``left_behind`` and to ``on_damage``) what a start that moved a
        damaged file aside left behind, and what earlier ones left beside it."""
        moved = damage.moved_to if damage is not None else None
        kept = damage.left_behind if damage is not None else None
        if damage is not None:
            self.damage = damage
            log.critical("%s; starting a fresh journal (on_damage: start_fresh)%s", damage,
                         f": {kept.held()}; rescue it with 'promptui journal salvage "
                         f"{kept.path}'" if kept is not None else "")
            if self.on_damage is not None:
                self.on_damage(damage)
        older = [old for old in earlier if old.path != moved]
        for old in older:
            log.warning("%s", old.describe())
        self.left_behind = [kept, *older] if kept is not None else older

    def preflight(self) -> None:
        """Raise now what open() would refuse, opening nothing (a command fails before it
        starts anything); a file open() would move aside is left for it to move and report."""
        if self.read_only is not None and not self._closed:
            raise self.read_only
        if not self.is_open:
            self._take(False)
            self._lock.release()

    def _take(self, act: bool) -> DamagedJournal | None:
        check_path(self.path)
        self._lock.acquire()
        try:
            return take_file(self.path, start_fresh=self.start_fresh and not self.strict,
                             act=act)
        except BaseException:
            self._lock.release()
            raise

    async def _open_read_only(self, held: JournalLocked) -> None:
        self._reader = await connect_reader(self.path, self.busy_timeout_ms, read_only=True)
        self.read_only = held

    def _open_file(self) -> _Opened:
        """On a worker thread: the lock, the file's checks (``check``), what earlier starts
        left beside it, the writing connection (``connect_writer``) and the seq heads."""
        damage = self._take(True)
        try:
            earlier = found_beside(self.path)
            conn = connect_writer(self.path, self.busy_timeout_ms)
        except BaseException:
            self._lock.release()
            raise
        try:
            heads = {row[0]: int(row[1]) for row in conn.execute(
                "SELECT process, last_seq FROM heads")}
            pids = {row[0]: int(row[1]) for row in conn.execute(
                "SELECT process_id, pid FROM incarnations")}
        except BaseException:
            conn.close()
            self._lock.release()
            raise
        return _Opened(damage, earlier, conn, heads, pids)

    def _connect(self, opened: _Opened) -> None:
        self._heads = opened.heads
        self._writer = WriterThread(opened.conn, opened.pids, path=self.path,
                                    loop=asyncio.get_running_loop(), settle=self._settle,
                                    on_fault=self._on_fault, max_batch=self.max_batch,
                                    times=self.commit_times)

    # -- writing ---------------------------------------------------------------------------------
    def submit(self, entry: JournalEntry, *, attachment: Any = None) -> asyncio.Future[None]:
        """Queue ``entry`` (its seq is assigned now) and return a future that resolves once it is
        committed. Entries commit in the order they were submitted."""
        writer = self._writer
        if self.read_only is not None and not self._closed:
            raise self.read_only
        if self._closed or writer is None:
            raise JournalError(f"journal {self.path} is not open")
        if self._error is not None:
            raise JournalError(f"journal {self.path} failed earlier: {self._error}")
        data = to_json(entry.data, f"{entry.entry_type} entry data")
        attached = None if attachment is None else to_json(attachment, "entry attachment")
        effects = IndexRules.effects(entry, attachment)  # refuses a bad entry before its seq
        seq = self._heads.get(entry.process, 0) + 1
        self._heads[entry.process] = seq
        entry.seq = seq
        future: asyncio.Future[None] = writer.loop.create_future()
        writer.put((entry, data, attached, future, effects))
        return self._submitted(future)

    async def append(self, entry: JournalEntry, *, attachment: Any = None) -> JournalEntry:
        """Append ``entry`` and return once it is durable."""
        await self.submit(entry, attachment=attachment)
        return entry

    async def flush(self) -> None:
        writer = self._writer
        if writer is None or self._closed:
            return
        if self._error is not None:
            raise JournalError(f"journal {self.path} failed earlier: {self._error}")
        future: asyncio.Future[None] = writer.loop.create_future()
        writer.put((FLUSH, "", None, future, []))
        await future

    def retain(self, process: str, policy: RetentionPolicy | None) -> None:
        """Remove what ``policy`` lets go of ``process``'s entries, in the background while
        the journal is open for writing (None: keep everything, the default)."""
        self.retention.retain(process, policy)
        if self._writer is not None and not self._closed:
            self.retention.start()

    async def run_job(self, job: Job[T]) -> T:
        """``job(conn)`` on the writer thread, between two group commits (one writer)."""
        writer = self._writer
        if self.read_only is not None and not self._closed:
            raise self.read_only
        if self._closed or writer is None:
            raise JournalError(f"journal {self.path} is not open")
        future: asyncio.Future[T] = writer.loop.create_future()
        writer.put((JOB, job, None, future, []))
        return await future

    def _settle(self, batch: list[PendingAppend], error: BaseException | None) -> None:
        """On the loop: release a committed batch's callers, or fail them (never acknowledged);
        after a failure every later append fails loudly too."""
        if error is None:
            self.batches += 1
            self.committed += sum(1 for item in batch if item[0] is not FLUSH)
            for item in sorted(batch, key=_acceptance_first):
                if not item[3].done():
                    item[3].set_result(None)
            return
        if self._error is None:
            self._error = error
            log.critical("journal %s: write failed: %s", self.path, error)
        for item in batch:
            future = item[3]
            if not future.done():
                future.set_exception(JournalError(f"journal write failed: {error}"))
                future.exception()  # mark retrieved: fire-and-forget callers may not look

    def _on_fault(self, error: BaseException | None) -> None:
        if error is None:
            self.faults.written()
        else:
            self.faults.failed(error)

    @property
    def fault(self) -> str | None:
        """Why the journal cannot be written now (degraded), or None."""
        return self.faults.reason

    # -- reading ---------------------------------------------------------------------------------
    async def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if self._reader is None:
            raise JournalError(f"journal {self.path} is not open")
        await self._caught_up()
        try:
            return list(await self._reader.execute_fetchall(sql, params))
        except sqlite3.DatabaseError as exc:
            raise JournalError(f"journal {self.path}: read failed: {exc}") from exc

    # -- closing ---------------------------------------------------------------------------------
    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.retention.stop()
        writer = self._writer
        if writer is not None:
            writer.stop()  # commits what is queued, then closes its connection
            await asyncio.shield(writer.done)
        await self._disconnect()
        self._writer = None
        if self.read_only is None:  # a read-only object never held the lock
            self._lock.release()  # last: the next writer finds the file closed (WAL folded in)

    async def _disconnect(self) -> None:
        if self._reader is not None:
            await self._reader.close()
        self._reader = None

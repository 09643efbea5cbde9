"""PostgreSQL journal: the scale-out backend, with the SQLite journal's semantics.

``submit`` assigns the seq at once and queues the append; one writer task takes everything
queued, writes it in one transaction (one message: one round trip) and only then releases the
callers, so an acknowledged entry is committed (fsync'd by the server's WAL flush) and a busy
journal pays one commit for many entries. Reads go through a small connection pool
(``reading``: a burst of quick reads takes turns on one connection) and never wait for the
writer.

Several nodes may write one database: each reads the heads (last seq per process) when it
opens, and UNIQUE (process, seq) makes a seq taken twice fail the second commit loudly
(the journal stops writing) instead of overwriting. A lost connection or a server that is down
is a passing fault: the journal says it is degraded, the writer reconnects and retries the
same batch with backoff (after checking whether the lost attempt had committed after all), and
nobody is acknowledged for what is not committed.

Fenced (``fence=(process, epoch)``, a scale-out node's journal for a process it owns; see
fencing.py): every batch of that process proves the epoch is still current in its own
transaction, and once it is not (or ``refuse`` is called) the journal is fenced for good: every
later append fails with JournalFenced, ``flush`` has nothing left to wait for, and the
``on_fenced`` listeners hear of it once.

The DSN's password is never shown: ``path`` (where, in faults and errors) is the DSN redacted
(``dsn``). The schema and the read SQL are in ``schema``, one commit's SQL in ``commit``,
the writer task in ``writer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from runtime_core.journal.commit_times import CommitTimes
from runtime_core.journal.entry import JournalEntry
from runtime_core.journal.faults import FaultState
from runtime_core.journal.postgres.commit import PendingAppend, prepare, storable
from runtime_core.journal.postgres.dsn import Scrubber, scrubbed_error
from runtime_core.journal.postgres.fencing import JournalFenced
from runtime_core.journal.postgres.reading import ReadConnections, plan_reads
from runtime_core.journal.postgres.schema import (
    CARRIES_START_SQL,
    CARRIES_TURNS_SQL,
    SELECT_ENTRIES,
    migrate,
    read_sql,
    row_to_entry,
)
from runtime_core.journal.postgres.writer import WriterTask
from runtime_core.journal.provider import (
    IndexRules,
    JournalError,
    to_json,
)
from runtime_core.journal.sql_reads import SqlReads

__all__ = ["PostgresJournal"]

log = logging.getLogger(__name__)
#: How long a read waits for a connection while the journal is degraded (seconds).
DEGRADED_READ_TIMEOUT = 0.5
#: How long the read pool keeps retrying a connection before it stops (seconds). Short: its
#: retries back off (1 s, 2 s, 4 s...), so a long chain begun during an outage would keep
#: reads waiting well after the server is back; stopped, the next read connects at once.
POOL_RECONNECT = 1.0
AsyncConn = psycopg.AsyncConnection[Any]


class PostgresJournal(SqlReads):
    """The scale-out journal: the SQLite journal's semantics on PostgreSQL, for nodes of a
    cluster sharing one database. Appends are batched into one transaction per commit and
    acknowledged only once committed; a lost connection is a degraded state the writer
    heals by reconnecting and retrying the same batch. With ``fence=(process, epoch)`` every
    batch proves its node still owns the process, else the journal refuses to write
    (JournalFenced). The DSN's password is never shown: ``path`` is the DSN redacted."""

    MARK = "%s"
    NO_LIMIT = None  # LIMIT NULL: no limit
    PROCESS_ORDER = 'process COLLATE "C"'  # code point order, as the other backends sort
    TEXTS_AS_JSON = True
    SELECT_ENTRIES = SELECT_ENTRIES
    RUN_PLUS = ""  # PostgreSQL has no unary-plus trap; substr needs its parameter's type
    RUN_KEY_MARK = "?::text"  # "?" is this backend's %s (_q)
    CARRIES_TURNS = CARRIES_TURNS_SQL
    CARRIES_START = CARRIES_START_SQL
    read_sql = staticmethod(read_sql)
    row_to_entry = staticmethod(row_to_entry)

    def __init__(self, dsn: str, *, max_batch: int = 5_000, pool_size: int = 4,
                 connect_timeout: float = 10.0, read_timeout: float = 10.0,
                 application_name: str = "promptui-journal",
                 fence: tuple[str, int] | None = None,
                 idle_in_transaction_timeout: float | None = None) -> None:
        if not dsn:
            raise JournalError("a PostgreSQL journal needs a DSN (journal.dsn or PROMPTUI_DSN)")
        self._dsn = dsn
        self._scrub = Scrubber(dsn)
        self.path = self._scrub.shown  # where it writes, as shown: the DSN without password
        self.max_batch = max_batch
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.application_name = application_name
        self.fence = fence  # (process, epoch) its batches of that process prove, or None
        #: seconds a writer's transaction may stay open while its client does nothing (a node
        #: paused mid-commit must not hold the lease row's share lock forever); None: server's
        self.idle_in_transaction_timeout = idle_in_transaction_timeout
        self._fenced: JournalFenced | None = None
        self.fence_refusals = 0  # 1 once PostgreSQL refused a batch under a stale epoch
        self._on_fenced: list[Callable[[JournalFenced], None]] = []
        self.faults = FaultState(self.path)  # degraded while a commit cannot be made
        self._writer: WriterTask | None = None
        self._reads: ReadConnections | None = None
        self._heads: dict[str, int] = {}
        self._error: BaseException | None = None
        self._closed = False
        self.batches = 0
        self.committed = 0
        self.commit_times = CommitTimes()  # each commit's duration, for /metrics

    # -- opening ----------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._writer is not None and not self._closed

    def preflight(self) -> None:
        """Raise now what a malformed DSN would make open() raise, connecting to nothing."""
        try:
            conninfo_to_dict(self._dsn)
        except psycopg.Error as exc:  # libpq may quote the DSN: raised below, out of context
            error = self._failure(f"journal {self.path}: the DSN cannot be read", exc)
        else:
            return
        raise error

    async def open(self) -> None:
        """Connect, migrate the schema, read the heads and start the writer; a no-op when
        already open. A server that cannot be reached is a JournalError saying where."""
        if self.is_open:
            return
        self.preflight()
        self._closed = False
        self._error = None
        conn: AsyncConn | None = None
        pool: AsyncConnectionPool[AsyncConn] | None = None
        opening: asyncio.Future[None] | None = None
        error: JournalError | None = None
        try:
            try:
                pool = AsyncConnectionPool(
                    self._dsn, min_size=1, max_size=max(1, self.pool_size), open=False,
                    kwargs=self._connect_options(), timeout=self.read_timeout,
                    name="promptui-journal-reads",  # no check per checkout: see reading.py
                    configure=plan_reads,
                    reconnect_timeout=POOL_RECONNECT)
                # The read pool connects while the writer connects and migrates (a start is
                # ready sooner: these were one round trip after the other).
                opening = asyncio.ensure_future(
                    pool.open(wait=True, timeout=self.connect_timeout))
                conn = await self._connect()
                await migrate(conn, self.path)
                cur = await conn.execute("SELECT process, last_seq FROM heads")
                self._heads = {str(row[0]): int(row[1]) for row in await cur.fetchall()}
                await opening
            except (psycopg.Error, PoolTimeout) as exc:
                error = self._failure(
                    f"cannot open journal {self.path}: check that PostgreSQL is running and "
                    "that journal.dsn (or PROMPTUI_DSN) names it", exc)
            if error is not None:
                raise error  # not in the except block: the original is its cause only if clean
        except BaseException:
            if opening is not None and not opening.done():
                opening.cancel()
                with contextlib.suppress(BaseException):
                    await opening
            if pool is not None:
                await pool.close()
            if conn is not None:
                await conn.close()
            raise
        assert pool is not None  # made, or open raised
        self._reads = ReadConnections(pool)
        self._writer = WriterTask(conn, connect=self._connect, settle=self._settle,
                                  faults=self.faults, scrub=self._scrub,
                                  max_batch=self.max_batch, name=f"journal-writer {self.path}",
                                  fence=lambda: self.fence, times=self.commit_times)

    def _connect_options(self) -> dict[str, Any]:
        return {"autocommit": True, "connect_timeout": max(1, round(self.connect_timeout)),
                "application_name": self.application_name}

    async def _connect(self) -> AsyncConn:
        conn = await psycopg.AsyncConnection.connect(self._dsn, **self._connect_options())
        try:
            # an acknowledged entry must survive a server crash: never a weaker commit than on
            cur = await conn.execute("SELECT current_setting('synchronous_commit')")
            row = await cur.fetchone()
            if row is not None and row[0] in ("off", "local"):
                await conn.execute("SET synchronous_commit TO on")
            if self.idle_in_transaction_timeout is not None:
                await conn.execute(
                    "SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
                    (f"{max(1, round(self.idle_in_transaction_timeout * 1000))}ms",))
        except BaseException:
            await conn.close()
            raise
        return conn

    def _failure(self, message: str, exc: BaseException) -> JournalError:
        return scrubbed_error(message, exc, self._scrub)

    # -- writing ---------------------------------------------------------------------------------
    def submit(self, entry: JournalEntry, *, attachment: Any = None) -> asyncio.Future[None]:
        """Queue ``entry`` (its seq is assigned now) and return a future that resolves once it is
        committed. Entries commit in the order they were submitted. Fenced: the future has
        failed already (JournalFenced), and nothing is queued."""
        if self._fenced is not None:
            refused: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            refused.set_exception(self._fenced)
            refused.exception()  # retrieved: a fire-and-forget entry is simply not written
            return refused
        writer = self._writer
        if self._closed or writer is None:
            raise JournalError(f"journal {self.path} is not open")
        if self._error is not None:
            raise JournalError(f"journal {self.path} failed earlier: {self._error}")
        data = to_json(entry.data, f"{entry.entry_type} entry data")
        attached = None if attachment is None else to_json(attachment, "entry attachment")
        effects = IndexRules.effects(entry, attachment)  # refuses a bad entry before its seq
        seq = self._heads.get(entry.process, 0) + 1
        row, statements = prepare(entry, seq, data, attached, effects)
        self._heads[entry.process] = seq
        entry.seq = seq
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        writer.put(PendingAppend(entry, future, row, statements))
        return self._submitted(future)

    async def append(self, entry: JournalEntry, *, attachment: Any = None) -> JournalEntry:
        """Append ``entry`` and return once it is durable."""
        await self.submit(entry, attachment=attachment)
        return entry

    async def flush(self) -> None:
        writer = self._writer
        if writer is None or self._closed or self._fenced is not None:
            return  # fenced: nothing more will be written, so nothing to wait for
        if self._error is not None:
            raise JournalError(f"journal {self.path} failed earlier: {self._error}")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        writer.put(PendingAppend(None, future))  # a flush marker: resolves after what precedes
        await future

    def _settle(self, batch: list[PendingAppend], error: BaseException | None) -> None:
        """Release a committed batch's callers, or fail them (never acknowledged); after a
        failure every later append fails loudly too."""
        if isinstance(error, JournalFenced):
            self._fence_off(error)
        if error is None:
            self.batches += 1
            self.committed += sum(1 for item in batch if item.entry is not None)
            for item in batch:
                if not item.future.done():
                    item.future.set_result(None)
            return
        if self._error is None and self._fenced is None:
            self._error = error
            log.critical("journal %s: write failed: %s", self.path, error)
        for item in batch:
            if not item.future.done():
                item.future.set_exception(error if isinstance(error, JournalFenced) else
                                          JournalError(f"journal write failed: {error}"))
                item.future.exception()  # mark retrieved: fire-and-forget callers may not look

    # -- fencing (fencing.py) ----------------------------------------------------------------------
    @property
    def fenced(self) -> JournalFenced | None:
        """Why nothing more is written (the lease moved on, or ``refuse``), or None."""
        return self._fenced

    def on_fenced(self, callback: Callable[[JournalFenced], None]) -> None:
        """``callback(error)`` once, when a batch is refused by the fence (not after refuse)."""
        self._on_fenced.append(callback)

    def refuse(self, reason: str) -> None:
        """Write nothing more (this node gave the process up): every later append fails with
        JournalFenced; what is queued already still commits, or is refused by the fence."""
        if self._fenced is None:
            process, epoch = self.fence or ("*", 0)
            self._fenced = JournalFenced(process, epoch, reason=reason)

    def _fence_off(self, error: JournalFenced) -> None:
        if self.fence_refusals:
            return  # said once: the batches queued behind it fail the same way
        self.fence_refusals += 1
        log.warning("journal %s: the fence refused a write: %s", self.path, error)
        if self._fenced is not None:
            return  # refused here already: the listeners know
        self._fenced = error
        for callback in list(self._on_fenced):
            try:
                callback(error)
            except Exception:  # a listener must never stop the writer
                log.exception("journal %s: an on_fenced listener failed", self.path)

    @property
    def fault(self) -> str | None:
        """Why the journal cannot be written now (degraded), or None."""
        return self.faults.reason

    # -- reading ---------------------------------------------------------------------------------
    async def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        reads = self._reads
        if reads is None:
            raise JournalError(f"journal {self.path} is not open")
        if not all(storable(p) for p in params if isinstance(p, str)):
            return []  # a name with a NUL was never stored (refused), and JSON escapes one
        await self._caught_up()
        # Degraded (the writer cannot reach the server either): a read fails fast rather
        # than holding a screen or a command for the whole timeout.
        timeout = self.read_timeout if self.faults.reason is None else min(
            self.read_timeout, DEGRADED_READ_TIMEOUT)
        try:
            return await reads.fetch(sql, params, timeout)
        except (psycopg.Error, PoolTimeout) as exc:
            error = self._failure(f"journal {self.path}: read failed", exc)
        raise error

    # -- closing ---------------------------------------------------------------------------------
    async def close(self) -> None:
        """Commit what is queued (a server that is down fails it instead: never acknowledged),
        then close the connections."""
        if self._closed:
            return
        self._closed = True
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.stop()
            with contextlib.suppress(Exception):  # already reported to the callers
                await asyncio.shield(writer.task)
        reads, self._reads = self._reads, None
        if reads is not None:
            await reads.pool.close()

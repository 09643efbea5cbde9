"""The PostgreSQL journal's writer: one asyncio task that owns the writing connection and
group-commits.

Submitting appends to a queue and wakes the task; it lets the loop's ready tasks run one step
(what they submit joins the batch), takes everything queued (up to ``max_batch``), writes it in
one transaction and settles the callers. While a commit is on the wire the next appends pile up
and become the next batch, so a busy journal pays one commit for many entries.

A passing fault (the server down, a lost connection, a read-only standby after a failover)
keeps the batch: the connection is dropped, the journal is degraded (``faults``), and the same
batch is tried again with backoff on a new connection, after ``written_before`` has checked
whether the lost attempt committed after all. Anything else (a bug, another writer's seqs)
fails that batch and every later one. Closing commits what is queued; a server that is down
then fails it instead (never acknowledged). A fenced batch (fencing.py: another node owns the
process now) fails as JournalFenced, and so does every later one.

Every ``VACUUM_EVERY`` run ends the writer vacuums the queue's tables (``pending``,
``open_runs``) between two batches: a run's rows there are deleted when it ends, and only a
VACUUM frees their index entries. Autovacuum comes by about once a minute, so a burst of runs
would grow those indexes by an entry a run each (about 150 bytes a run in
``bench/durable_runs.py``); vacuumed as it goes, they stay a few pages. It takes a few
milliseconds, skips a table another session has locked, and does nothing (PostgreSQL warns)
for a role that does not own the tables.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from runtime_core.journal.commit_times import CommitTimes
from runtime_core.journal.entry import EntryType
from runtime_core.journal.faults import FIRST_RETRY, LAST_RETRY, FaultState, is_passing
from runtime_core.journal.postgres.commit import (
    PendingAppend,
    describe_integrity,
    write_batch,
    written_before,
)
from runtime_core.journal.postgres.dsn import Scrubber, scrubbed_error
from runtime_core.journal.postgres.fencing import FENCE_SQL, fenced_error
from runtime_core.journal.provider import JournalError

AsyncConn = psycopg.AsyncConnection[Any]
#: Run ends between two vacuums of the queue's tables (see the module's docstring).
VACUUM_EVERY = 100
VACUUM_SQL = "VACUUM (SKIP_LOCKED) pending, open_runs"
Settle = Callable[[list[PendingAppend], BaseException | None], None]
Fence = Callable[[], "tuple[str, int] | None"]


def is_passing_here(exc: BaseException) -> bool:
    """A fault to wait out: the server down, a lost connection (faults.is_passing), or a
    server that became a read-only standby (a failover: the DSN reaches the new primary)."""
    return is_passing(exc) or isinstance(exc, psycopg.errors.ReadOnlySqlTransaction)


class WriterTask:
    """Owns ``conn`` (and the ones ``connect`` makes after a fault) from now on."""

    def __init__(self, conn: AsyncConn | None, *, connect: Callable[[], Awaitable[AsyncConn]],
                 settle: Settle, faults: FaultState, scrub: Scrubber, max_batch: int,
                 name: str, fence: Fence = lambda: None,
                 times: CommitTimes | None = None) -> None:
        self.conn: AsyncConn | None = conn
        self.connect = connect
        self.settle = settle  # (batch, None) once committed, or (batch, error)
        self.faults = faults
        self.scrub = scrub
        self.max_batch = max_batch
        self.times = times if times is not None else CommitTimes()  # for /metrics
        self.fence = fence  # (process, epoch) its batches prove before they write, or None
        self.queue: collections.deque[PendingAppend] = collections.deque()
        self.failed: BaseException | None = None
        self._ends = 0  # run ends committed since the queue's tables were last vacuumed
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=name)

    def put(self, item: PendingAppend) -> None:
        self.queue.append(item)
        self._wake.set()

    def stop(self) -> None:
        """Commit what is queued, then close the connection and end the task."""
        self._stopping.set()
        self._wake.set()

    async def _run(self) -> None:
        try:
            while True:
                if not self.queue:
                    if self._stopping.is_set():
                        return
                    self._wake.clear()
                    await self._wake.wait()
                    # let the tasks that are ready now run a step: what they submit joins
                    # this batch instead of paying a commit of its own
                    await asyncio.sleep(0)
                    continue
                batch = [self.queue.popleft()
                         for _ in range(min(len(self.queue), self.max_batch))]
                rows = [item for item in batch if item.entry is not None]
                error = self.failed
                if error is None and rows:
                    error = self.failed = await self._commit_until_written(rows)
                self.settle(batch, error)
                if error is None:
                    await self._vacuum_now_and_then(rows)
        except BaseException as exc:  # a bug or a cancelled loop: nobody waits forever
            self.failed = self.failed or exc
            self.settle(list(self.queue), self.failed)
            self.queue.clear()
            raise
        finally:
            await self._drop_connection()

    async def _commit_until_written(self, rows: list[PendingAppend]) -> BaseException | None:
        failures = 0
        while True:
            try:
                began = time.perf_counter()
                await self._commit(rows, unsure=failures > 0)
            except JournalError as exc:
                return exc
            except Exception as exc:
                fence = self.fence()
                fenced = None if fence is None else fenced_error(exc, *fence)
                if fenced is not None:
                    return fenced
                if not is_passing_here(exc) or self._stopping.is_set():
                    return scrubbed_error("PostgreSQL refused it", exc, self.scrub)
                failures += 1
                await self._drop_connection()  # a new one next time: this one may be broken
                self.faults.failed(psycopg.OperationalError(self.scrub(str(exc))))
                delay = min(LAST_RETRY, FIRST_RETRY * 2.0 ** (failures - 1))
                with contextlib.suppress(TimeoutError):  # close() cuts the wait short
                    async with asyncio.timeout(delay):
                        await self._stopping.wait()
                continue
            self.times.observe(time.perf_counter() - began)
            if failures:
                self.faults.written()
            return None

    async def _commit(self, rows: list[PendingAppend], *, unsure: bool) -> None:
        """Write ``rows`` once; ``unsure``: an earlier attempt may have committed them."""
        if self.conn is None or self.conn.closed:
            self.conn = await self.connect()
        conn = self.conn
        try:
            if unsure and await written_before(conn, rows):
                return
            try:
                fence = self.fence()
                await (write_batch(conn, rows) if fence is None else
                       write_batch(conn, rows, fence))
            except psycopg.IntegrityError as exc:
                # A lost attempt's COMMIT may have landed while this one waited on its keys.
                if unsure and await written_before(conn, rows):
                    return
                raise JournalError(describe_integrity(exc)) from exc
        except JournalError:
            await self._fence_check(conn)  # another owner's seqs: the fence's error, if so
            raise

    async def _vacuum_now_and_then(self, rows: list[PendingAppend]) -> None:
        """Vacuum the queue's tables once ``VACUUM_EVERY`` run ends have committed since the
        last time (after the batch is settled: nobody waits for it)."""
        self._ends += sum(1 for r in rows
                          if r.entry is not None and r.entry.entry_type == EntryType.RUN_FINISHED)
        if self._ends < VACUUM_EVERY or self.conn is None or self.conn.closed:
            return
        self._ends = 0
        with contextlib.suppress(psycopg.Error):  # upkeep: a failure here costs only bytes
            await self.conn.execute(VACUUM_SQL)

    async def _fence_check(self, conn: AsyncConn) -> None:
        """Raise the fence's error (SQLSTATE PU409) when the epoch moved on: seqs another
        writer holds are then the new owner's, and this journal was fenced out."""
        fence = self.fence()
        if fence is not None:
            await conn.execute(FENCE_SQL, fence)  # autocommit: its share lock ends at once

    async def _drop_connection(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

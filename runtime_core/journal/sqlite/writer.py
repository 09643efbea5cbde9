"""The SQLite journal's writer: one thread that owns the writing connection and group-commits.

Submitting puts an append on a thread-safe queue; the thread wakes at once, takes everything
queued (up to ``max_batch``), writes it in one ``BEGIN IMMEDIATE ... COMMIT`` and hands the
batch back to the event loop with one ``call_soon_threadsafe``, which resolves the callers'
futures. While a commit's fsync runs, the next appends pile up and become the next batch, so a
busy journal pays one fsync for many entries and an idle one answers a single append in one
fsync plus one hop back to the loop (no writer task, no per-statement hops).

Batches follow the event loop's rhythm: before it takes a batch, the thread lets the loop
finish what it is doing (the tasks a commit released run one step and submit what they
submit), so the entries one round of work produces commit together: an event's run end and the
next event's acceptance share one fsync instead of paying one each. Having let the thread go,
the loop waits (at most ``HANDOFF_WAIT``) until the thread has written its statements and
entered the commit's fsync: the statements run without waiting for the GIL, and the loop's
Python then overlaps the fsync.

A passing fault (the write lock held elsewhere, a full disk, an I/O error) keeps the batch: the
thread waits with backoff and tries the same batch again, and the loop hears "degraded" and
"writing again" through ``on_fault``. Anything else fails that batch and every later append.

A job (``JOB``: retention's deletions, a vacuum step) is a function of the connection queued
like an append. It runs after the batch it was taken with is committed and its callers are
released, in a transaction of its own; its failure fails only that job.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime_core.journal.commit_times import CommitTimes
from runtime_core.journal.faults import FIRST_RETRY, LAST_RETRY, is_passing
from runtime_core.journal.sqlite.commit import PendingAppend, batch_rows, write_batch

#: A flush marker: never written; its future resolves once everything before it is committed.
FLUSH = object()
#: A job marker: ``(JOB, fn, None, future, [])`` runs ``fn(conn)`` on the writer thread and
#: resolves ``future`` with what it returns (or its exception).
JOB = object()
_STOP = object()
#: How long the thread waits for the loop to catch up before it commits anyway (seconds).
LOOP_WAIT = 0.005
#: How long the loop, having let the thread go, waits for it to reach its commit (seconds).
HANDOFF_WAIT = 0.002

Settle = Callable[[list[PendingAppend], BaseException | None], None]


class Signal:
    """A one-slot signal between two threads on a bare lock (an Event runs Python on both sides
    for its Condition, on the path every commit waits on): ``give`` sets it, ``take`` waits
    for it (at most ``timeout`` seconds) and clears it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def give(self) -> None:
        with contextlib.suppress(RuntimeError):  # given already, not taken yet
            self._lock.release()

    def take(self, timeout: float) -> bool:
        return self._lock.acquire(True, timeout)

    def clear(self) -> None:
        self._lock.acquire(False)


class WriterThread:
    """Owns ``conn`` (opened by the caller on any thread, used only here from now on)."""

    def __init__(self, conn: sqlite3.Connection, pids: dict[str, int], *, path: Path,
                 loop: asyncio.AbstractEventLoop, settle: Settle,
                 on_fault: Callable[[BaseException | None], None], max_batch: int,
                 times: CommitTimes | None = None) -> None:
        self.conn = conn
        self.pids = pids  # process_id -> small integer; touched only by this thread
        self.path = path
        self.loop = loop
        self.settle = settle  # called on the loop: (batch, None) once committed, or (batch, exc)
        self.on_fault = on_fault  # called on the loop: (exc) when degraded, (None) when healed
        self.max_batch = max_batch
        self.times = times if times is not None else CommitTimes()  # for /metrics
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.closing = threading.Event()
        self.caught_up = Signal()  # given by the loop once its ready work has run
        self.handed_off = Signal()  # given by the thread once it needs no GIL for long
        self.failed: BaseException | None = None
        self.done: asyncio.Future[None] = loop.create_future()
        self.thread = threading.Thread(target=self._run, name=f"journal-writer {path.name}",
                                       daemon=True)
        self.thread.start()

    def put(self, item: Any) -> None:
        self.queue.put(item)

    def stop(self) -> None:
        """Commit what is queued, then close the connection and end the thread."""
        self.closing.set()
        self.queue.put(_STOP)

    # -- the thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while self._one_batch():
                pass
        finally:
            try:
                self.conn.close()
            finally:
                self._call(self._finish)

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is left to tell
            self.loop.call_soon_threadsafe(fn, *args)

    def _catch_up(self) -> None:
        """On the loop: runs after the handles ready now (the tasks a settle woke among them),
        so what they submit is queued when the thread takes its batch."""
        self.loop.call_soon(self._release)

    def _release(self) -> None:
        self.handed_off.clear()
        self.caught_up.give()
        # Let the thread write its statements before the loop runs on: each statement gives
        # the GIL up and takes it back, and with the loop running the runs that settle just
        # woke it would wait for the loop to idle each time. From the fsync on, both run.
        self.handed_off.take(HANDOFF_WAIT)

    def _hand_off(self) -> None:
        self.handed_off.give()

    def _wait_for_loop(self) -> None:
        # Bounded: a busy or closing loop never holds the journal back for long.
        self.caught_up.take(LOOP_WAIT)

    def _one_batch(self) -> bool:
        """Take and commit one batch; False once told to stop."""
        try:
            first = self.queue.get_nowait()
        except queue.Empty:
            self._hand_off()
            first = self.queue.get()  # idle until the next append
            if first is not _STOP:
                self._call(self._catch_up)
                self._wait_for_loop()
        if first is _STOP:
            return False
        batch: list[Any] = [first]
        going = True
        while len(batch) < self.max_batch:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                going = False
                break
            batch.append(item)
        jobs = [b for b in batch if b[0] is JOB]
        if jobs:
            batch = [b for b in batch if b[0] is not JOB]
        rows = [b for b in batch if b[0] is not FLUSH]
        error: BaseException | None = self.failed
        if error is None and rows:
            error = self._commit_until_written(rows)
            if error is not None:
                self.failed = error
        self._hand_off()
        if batch:
            self._call(self._settle, batch, error)
        for job in jobs:
            self._run_job(job, error)
        if batch:
            self._wait_for_loop()
        return going

    def _run_job(self, job: Any, error: BaseException | None) -> None:
        """Run one job in its own transaction; a journal that failed fails it unrun."""
        _, fn, _, future, _ = job
        result: Any = None
        if error is None:
            try:
                result = fn(self.conn)
            except Exception as exc:
                if self.conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self.conn.execute("ROLLBACK")
                error = exc
        self._call(_resolve, future, result, error)

    def _settle(self, batch: list[PendingAppend], error: BaseException | None) -> None:
        try:
            self.settle(batch, error)
        finally:
            self._catch_up()

    def _commit_until_written(self, rows: list[PendingAppend]) -> BaseException | None:
        failures = 0
        while True:
            try:
                began = time.perf_counter()
                entry_rows, ops, heads = batch_rows(rows)
                write_batch(self.conn, entry_rows, ops, heads, self.pids,
                            before_commit=self._hand_off)
            except Exception as exc:
                self._hand_off()  # the loop need not wait while this batch waits to retry
                if not is_passing(exc) or self.closing.is_set():
                    return exc
                failures += 1
                self._call(self.on_fault, exc)
                self.closing.wait(min(LAST_RETRY, FIRST_RETRY * 2.0 ** (failures - 1)))
                continue
            self.times.observe(time.perf_counter() - began)
            if failures:
                self._call(self.on_fault, None)
            return None


def _resolve(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """On the loop: a job's outcome to its waiter (gone already if it was cancelled)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)

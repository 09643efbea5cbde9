"""The SQLite journal's writer: one thread that owns the writing connection and group-commits.

Submitting (on the event loop) adds an append to the loop's list and, for the first append of a
round of loop work, schedules a kick with ``call_soon``: the kick runs after the handles ready
now, so the entries one round of work produces (an event's run end and the next event's
acceptance, a tool's result and the run's end) travel to the thread together, in one put. The
thread takes everything queued (up to ``max_batch``), writes it in one ``BEGIN IMMEDIATE ...
COMMIT`` and hands the batch back to the event loop with one ``call_soon_threadsafe``, which
resolves the callers' futures.

Two paths, one for each load. An idle thread (blocked waiting for work) is woken by the kick
directly: no round trip through the loop, no bounded wait; the loop waits (at most
``HANDOFF_WAIT``) until the thread has written its statements and entered the commit's fsync,
so the statements run without waiting for the GIL and the loop's Python overlaps the fsync. A
busy thread (appends arrived during its fsync) lets the loop finish what the commit released
first (the tasks a settle woke run one step and submit what they submit; at most
``LOOP_WAIT``), then takes all of it as the next batch: a busy journal pays one fsync for many
entries.

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
#: How many rounds of other ready work a kick lets pass before it sends what was submitted.
MAX_DEFERRALS = 4

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
        #: Lists of items, each the appends of one round of loop work, in submission order.
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.closing = threading.Event()
        self.caught_up = Signal()  # given by the loop once its ready work has run
        self.handed_off = Signal()  # given by the thread once it needs no GIL for long
        self.failed: BaseException | None = None
        self.done: asyncio.Future[None] = loop.create_future()
        self._pending: list[Any] = []  # the loop's: submitted since the last kick
        self._kick_due = False  # the loop's: a kick is scheduled
        self._deferred = 0  # the loop's: rounds the scheduled kick let pass
        self._idle = False  # the thread's: blocked waiting for work (read by the loop)
        self._loop_thread = threading.get_ident()  # made on the loop (the journal's open)
        self.thread = threading.Thread(target=self._run, name=f"journal-writer {path.name}",
                                       daemon=True)
        self.thread.start()

    def put(self, item: Any) -> None:
        """Queue ``item`` (an append, ``FLUSH`` or ``JOB``); on the loop (from another thread
        it is passed to the loop first, keeping the order the loop sees)."""
        if threading.get_ident() != self._loop_thread:
            self.loop.call_soon_threadsafe(self.put, item)
            return
        self._pending.append(item)
        if not self._kick_due:
            self._kick_due = True
            self._deferred = 0
            self.loop.call_soon(self._kick)

    def stop(self) -> None:
        """Commit what is queued, then close the connection and end the thread."""
        self.closing.set()
        self._send()
        self.queue.put(_STOP)

    # -- the loop --------------------------------------------------------------------------------
    def _send(self) -> bool:
        """Give the thread what this loop submitted since the last time; True if it was idle."""
        self._kick_due = False
        items = self._pending
        if not items:
            return False
        self._pending = []
        idle = self._idle
        if idle:
            self.handed_off.clear()
        self.queue.put(items)
        return idle

    def _kick(self) -> None:
        """Runs after the handles that were ready when the first of these appends came; while
        the loop has more ready (other runs going on), after those too, a few rounds at most:
        what they submit joins this batch instead of paying a commit of its own."""
        if not self._kick_due:
            return  # sent already (a catch-up took it)
        # asyncio's ready queue (private: a loop without one, uvloop's, sends at once)
        if self._deferred < MAX_DEFERRALS and getattr(self.loop, "_ready", None):
            self._deferred += 1
            self.loop.call_soon(self._kick)
            return
        if self._send():
            # Let the thread write its statements before the loop runs on: each statement gives
            # the GIL up and takes it back, and with the loop running it would wait for the
            # loop to idle each time. From the fsync on, both run.
            self.handed_off.take(HANDOFF_WAIT)

    def _catch_up(self) -> None:
        """On the loop: runs after the handles ready now (the tasks a settle woke among them),
        so what they submit is queued when the busy thread takes its next batch."""
        self.loop.call_soon(self._release)

    def _release(self) -> None:
        self._send()
        self.handed_off.clear()
        self.caught_up.give()
        self.handed_off.take(HANDOFF_WAIT)  # as in _kick: the statements first

    def _settle(self, batch: list[PendingAppend], error: BaseException | None,
                busy: bool) -> None:
        try:
            self.settle(batch, error)
        finally:
            if busy:
                self._catch_up()

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

    def _hand_off(self) -> None:
        self.handed_off.give()

    def _wait_for_loop(self) -> None:
        # Bounded: a busy or closing loop never holds the journal back for long.
        self.caught_up.take(LOOP_WAIT)

    def _take(self) -> tuple[list[Any], bool]:
        """The next batch (waiting for one while there is none) and whether to go on."""
        try:
            first = self.queue.get_nowait()
        except queue.Empty:
            self._idle = True
            first = self.queue.get()  # idle until the loop kicks
            self._idle = False
        if first is _STOP:
            return [], False
        batch: list[Any] = list(first)
        while len(batch) < self.max_batch:
            try:
                items = self.queue.get_nowait()
            except queue.Empty:
                break
            if items is _STOP:
                return batch, False
            batch.extend(items)
        return batch, True

    def _one_batch(self) -> bool:
        """Take and commit one batch; False once told to stop."""
        batch, going = self._take()
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
        # More came during the commit: a busy journal. Let the loop run what this batch
        # releases before taking the next, so the released callers' appends join it.
        busy = going and bool(batch) and not self.queue.empty()
        if busy:
            self.caught_up.clear()
        if batch:
            self._call(self._settle, batch, error, busy)
        for job in jobs:
            self._run_job(job, error)
        if busy:
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

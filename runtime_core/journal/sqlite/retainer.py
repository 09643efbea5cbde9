"""Retention in the background: a task on the journal's loop that, every ``every`` seconds,
removes what each registered process's policy lets go, in small windows through the writer
thread (one writer still), then gives freed pages back (incremental vacuuming).

A pass plans on a read-only connection of its own (the bounds and keep sets: reads that never
wait for the writer), then sends ``remove_window`` jobs to the writer one at a time: each is
one short transaction, and appends queued meanwhile commit between them. A journal that
cannot write just now (degraded) is skipped until the next pass; a failed pass is logged and
the next one tries again. What a pass removed is kept in ``last`` and ``total``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from runtime_core.journal.provider import JournalError
from runtime_core.journal.sqlite.retention import (
    BATCH,
    ProcessPlan,
    RetentionPolicy,
    plan,
    remove_window,
)
from runtime_core.journal.sqlite.vacuum import vacuum_step

log = logging.getLogger(__name__)
T = TypeVar("T")
Job = Callable[[sqlite3.Connection], T]


@dataclass(slots=True)
class PassReport:
    """What passes removed: entries and runs per process, pages given back."""

    entries: dict[str, int] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    pages: int = 0
    windows: int = 0
    seconds: float = 0.0
    slowest: float = 0.0  # the longest a window held the writer (seconds)

    def add(self, process: str, entries: int, runs: int) -> None:
        """Count ``entries`` and ``runs`` removed of ``process``."""
        if entries:
            self.entries[process] = self.entries.get(process, 0) + entries
            self.runs[process] = self.runs.get(process, 0) + runs

    @property
    def removed(self) -> int:
        """Entries removed, all processes together."""
        return sum(self.entries.values())


def plan_all(path: Path, policies: dict[str, RetentionPolicy], now: float
             ) -> list[ProcessPlan]:
    """Each process's plan, read on a read-only connection of its own (in a thread)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        found = [plan(conn, name, policy, now) for name, policy in sorted(policies.items())]
    finally:
        conn.close()
    return [p for p in found if p is not None]


class BackgroundRetention:
    """Runs passes for the processes ``retain`` registered, while started."""

    def __init__(self, path: Path, run_job: Callable[[Job[Any]], Awaitable[Any]],
                 degraded: Callable[[], bool]) -> None:
        self.path = path
        self.run_job = run_job
        self.degraded = degraded
        self.policies: dict[str, RetentionPolicy] = {}
        self.batch = BATCH
        self.last: PassReport | None = None
        self.total = PassReport()
        self.passes = 0  # passes run so far
        self._task: asyncio.Task[None] | None = None

    def retain(self, process: str, policy: RetentionPolicy | None) -> None:
        """Apply ``policy`` to ``process`` from the next pass on (None: keep everything)."""
        if policy is None:
            self.policies.pop(process, None)
        else:
            self.policies[process] = policy

    @property
    def every(self) -> float:
        """Seconds between passes: the shortest a registered policy asks for."""
        return min((p.every for p in self.policies.values()), default=60.0)

    def start(self) -> None:
        """Start the passes (on the running loop) if any process has a policy."""
        if self.policies and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"journal-retention {self.path.name}")

    async def stop(self) -> None:
        """Stop the passes (a window in the writer finishes on its own)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            if self.degraded():
                continue
            try:
                await self.run_pass()
            except (JournalError, sqlite3.Error, OSError) as exc:
                log.warning("journal %s: retention pass failed (the next one tries again "
                            "in %.0f s): %s", self.path, self.every, exc)
            except Exception:  # a bug must not end the passes, nor reach the runtime
                log.exception("journal %s: retention pass failed (the next one tries again "
                              "in %.0f s)", self.path, self.every)

    async def run_pass(self) -> PassReport:
        """One pass over every registered process, then vacuuming; returns what it did."""
        started = time.perf_counter()
        report = PassReport()
        plans = await asyncio.to_thread(plan_all, self.path, dict(self.policies), time.time())
        for work in plans:
            after = 0
            while True:
                window = await self.run_job(partial(remove_window, work=work, after=after,
                                                    batch=self.batch))
                report.windows += 1
                report.slowest = max(report.slowest, window.seconds)
                report.add(work.process, window.entries, window.runs)
                if window.done:
                    break
                after = window.last_seq
        if report.removed:
            while freed := await self.run_job(vacuum_step):
                report.pages += freed
            log.info("journal %s: retention removed %d entries (%d runs) of %s; %d free "
                     "pages given back", self.path, report.removed, sum(report.runs.values()),
                     ", ".join(sorted(report.entries)), report.pages)
        report.seconds = time.perf_counter() - started
        self.last = report
        for process, count in report.entries.items():
            self.total.add(process, count, report.runs.get(process, 0))
        self.total.pages += report.pages
        self.total.windows += report.windows
        self.total.slowest = max(self.total.slowest, report.slowest)
        self.passes += 1
        return report

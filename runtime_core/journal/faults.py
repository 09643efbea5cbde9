"""A journal that cannot be written for a while: what went wrong, in an operator's words, and
how the writer waits before it tries the same batch again.

Environmental faults (another program holding the write lock past the busy timeout, a full
disk, an I/O error; for PostgreSQL a server that is down or a lost connection) pass: the writer
keeps the batch, says the journal is degraded, retries with backoff and goes on by itself once
a commit succeeds. Nothing is acknowledged meanwhile: the callers waiting on that batch wait,
and new events are refused with the reason."""

from __future__ import annotations

import logging
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("runtime_core.journal")

FIRST_RETRY = 0.05  # seconds
LAST_RETRY = 2.0
LOG_EVERY = 10.0  # a fault that lasts is logged again this often, with its count


def describe_fault(exc: BaseException) -> str:
    """What an operator should read for a failed commit."""
    if _is_postgres_fault(exc):
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        return (f"PostgreSQL cannot be reached or cannot commit now ({first}); the runtime "
                "goes on by itself once it answers again")
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    text = str(exc) or type(exc).__name__
    if name.startswith("SQLITE_FULL") or "disk is full" in text:
        return "disk full (free space on the journal's disk; the runtime goes on by itself)"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
        return ("database is locked (another program holds its write lock; it goes on by "
                "itself once released)")
    if name.startswith("SQLITE_IOERR") or "I/O error" in text:
        return f"disk I/O error ({text})"
    if name.startswith("SQLITE_READONLY") or "readonly" in text:
        return "the journal file became read-only (give the runtime write access back)"
    return text


def is_passing(exc: BaseException) -> bool:
    """A fault the writer waits out (anything SQLite reports; PostgreSQL down, a lost
    connection, a full disk there); anything else is a bug."""
    return isinstance(exc, sqlite3.Error) or _is_postgres_fault(exc)


def _is_postgres_fault(exc: BaseException) -> bool:
    # Looked up, not imported: a runtime on SQLite never loads psycopg, and an exception can
    # only be psycopg's if psycopg is loaded.
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.OperationalError)


@dataclass(slots=True)
class FaultState:
    """The journal's degraded state: None while it writes, else why and since when."""

    where: str
    reason: str | None = None
    since: float | None = None  # wall-clock time of the first failure
    failures: int = 0
    _logged_at: float = 0.0
    _listeners: list[Any] = field(default_factory=list)

    @property
    def delay(self) -> float:
        return float(min(LAST_RETRY, FIRST_RETRY * 2.0 ** max(0, self.failures - 1)))

    def failed(self, exc: BaseException) -> None:
        reason = describe_fault(exc)
        now = time.monotonic()
        self.failures += 1
        changed = reason != self.reason
        if self.reason is None:
            self.since = time.time()
        if changed or now - self._logged_at >= LOG_EVERY:
            log.error("journal %s: cannot write: %s (attempt %d; events are refused until it "
                      "writes again)", self.where, reason, self.failures)
            self._logged_at = now
        self.reason = reason
        if changed:
            self._tell()

    def written(self) -> None:
        if self.reason is None:
            return
        took = time.time() - (self.since or time.time())
        log.warning("journal %s: writing again after %.1f s (%d failed attempts): %s",
                    self.where, took, self.failures, self.reason)
        self.reason, self.since, self.failures = None, None, 0
        self._tell()

    def listen(self, callback: Any) -> None:
        """``callback(reason | None)`` on every change (the runtime tells its processes)."""
        self._listeners.append(callback)

    def _tell(self) -> None:
        for callback in list(self._listeners):
            try:
                callback(self.reason)
            except Exception:  # a listener must never stop the writer
                log.exception("journal %s: a fault listener failed", self.where)


def journal_fault(journal: object) -> str | None:
    """Why ``journal`` cannot be written now, or None (journals without the notion: None)."""
    state = getattr(journal, "faults", None)
    return state.reason if isinstance(state, FaultState) else None


def fencing_token(journal: object) -> int | None:
    """The lease epoch ``journal`` writes under (a scale-out node's journal of a process it
    owns: ``fence=(process, epoch)``), or None for a journal that is not fenced."""
    fence = getattr(journal, "fence", None)
    if isinstance(fence, tuple) and len(fence) == 2 and isinstance(fence[1], int):
        return fence[1]
    return None

"""Compacting a journal file on demand (``promptui journal compact``): retention applied now,
then every free page given back, with the bytes before and after.

It writes, so it takes the journal's lock like a runtime: a journal a runtime holds is refused
with the holder's JournalLocked (that runtime applies its processes' retention itself, in the
background), a damaged one with the start's DamagedJournal. A file that is not yet switched to
incremental vacuuming is switched here, by a VACUUM that rewrites it once (about 1 s per
100 MB, and as much free disk as the file takes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime_core.journal.provider import JournalError
from runtime_core.journal.sqlite.check import take_file
from runtime_core.journal.sqlite.lock import JournalLock, check_path
from runtime_core.journal.sqlite.retention import RetentionPolicy, plan, remove_window
from runtime_core.journal.sqlite.schema import connect_writer
from runtime_core.journal.sqlite.vacuum import (
    file_bytes,
    incremental_vacuum,
    is_incremental,
    switch_to_incremental,
)


@dataclass(slots=True)
class CompactReport:
    """What a compaction did: bytes on disk (file and WAL) before and after, entries and runs
    removed per process, the processes it kept whole (no retention for them)."""

    path: Path
    bytes_before: int = 0
    bytes_after: int = 0
    entries: dict[str, int] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    switched: bool = False  # switched to incremental vacuuming (a one-time VACUUM)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (``--json``)."""
        return {"journal": str(self.path), "bytes_before": self.bytes_before,
                "bytes_after": self.bytes_after, "entries_removed": dict(self.entries),
                "runs_removed": dict(self.runs), "kept_everything": list(self.kept),
                "switched_to_incremental_vacuum": self.switched,
                "seconds": round(self.seconds, 3)}

    def lines(self) -> list[str]:
        """The report for people: one line for the file, one per process."""
        out = [f"{self.path}: {_size(self.bytes_before)} before, {_size(self.bytes_after)} "
               f"after ({_size(max(0, self.bytes_before - self.bytes_after))} given back, "
               f"{self.seconds:.1f} s)"]
        if self.switched:
            out.append("  switched to incremental vacuuming: from now on the file shrinks "
                       "as retention removes entries")
        for name in sorted(self.entries):
            count, runs = self.entries[name], self.runs.get(name, 0)
            out.append(f"  {name}: {count:,} {'entry' if count == 1 else 'entries'} removed "
                       f"({runs:,} finished {'run' if runs == 1 else 'runs'})")
        for name in self.kept:
            out.append(f"  {name}: kept everything (no retention for it)")
        return out


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MB" if count >= 2**20 else f"{count / 1024:.1f} kB"


def compact(path: Path, policies: dict[str, RetentionPolicy],
            default: RetentionPolicy | None = None, *, batch: int = 5_000) -> CompactReport:
    """Apply each process's policy (``policies`` by name, else ``default``; neither: the
    process keeps everything) to the journal at ``path``, then give every free page back."""
    started = time.perf_counter()
    check_path(path)
    if not path.exists():
        raise JournalError(f"no journal at {path} (pass --journal PATH)")
    lock = JournalLock(path)
    lock.acquire()  # JournalLocked when a runtime holds it
    try:
        take_file(path, start_fresh=False, act=False)  # DamagedJournal: refused, untouched
        report = CompactReport(path, bytes_before=file_bytes(path))
        conn = connect_writer(path, 10_000)
        try:
            now = time.time()
            names = [str(row[0]) for row in conn.execute(
                "SELECT process FROM heads ORDER BY process")]
            for name in names:
                policy = policies.get(name, default)
                if policy is None:
                    report.kept.append(name)
                    continue
                work, after = plan(conn, name, policy, now), 0
                while work is not None:
                    window = remove_window(conn, work, after, batch=batch)
                    if window.entries:
                        report.entries[name] = report.entries.get(name, 0) + window.entries
                        report.runs[name] = report.runs.get(name, 0) + window.runs
                    if window.done:
                        break
                    after = window.last_seq
            report.switched = not is_incremental(conn)
            if report.switched:
                switch_to_incremental(conn, path, limit=None)
            else:
                incremental_vacuum(conn)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            conn.close()
        report.bytes_after = file_bytes(path)
    finally:
        lock.release()
    report.seconds = time.perf_counter() - started
    return report

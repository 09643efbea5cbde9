"""``promptui journal verify`` on a PostgreSQL journal: what can be checked there, read-only,
while the nodes write.

One REPEATABLE READ, READ ONLY transaction (one snapshot: the heads and the entries agree, as
each commit writes both), reading the entries in pages through a server-side cursor so a long
journal never sits in memory. Per process: the seq chain runs 1, 2, 3 ... without a gap (the
PostgreSQL journal has no retention: every gap is damage), each entry matches its checksum
and holds a JSON object, each checkpoint holds a ``context_state`` mapping, and the head is
the last entry. Then the indexes a recovery reads (queued events, dead letters, open runs,
deliveries) must be readable and hold JSON where they keep it. UNIQUE (process, seq) and the
database's own consistency are PostgreSQL's to keep.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from runtime_core.journal.entry import EntryType
from runtime_core.journal.postgres.reader import PostgresReader
from runtime_core.journal.postgres.schema import checksum

__all__ = ["PostgresVerifyReport", "verify_postgres"]

PAGE = 2000  # entries fetched per round trip of the cursor


@dataclass
class PostgresVerifyReport:
    """What ``verify_postgres`` found: ``problems`` (empty when sound), and per process its
    entries, checkpoints, dead letters and queued events."""

    where: str
    problems: list[str] = field(default_factory=list)
    processes: dict[str, int] = field(default_factory=dict)  # name -> entries
    checkpoints: dict[str, int] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    #: the SQLite report's field: retention never removes entries on PostgreSQL
    retained: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_postgres(reader: PostgresReader) -> PostgresVerifyReport:
    """Check the journal ``reader`` reads (see the module); each problem names the entry or the
    row where it is. A database that cannot be read at all is the reader's JournalError."""
    reader.open()
    report = PostgresVerifyReport(reader.where)
    with reader.transaction() as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one snapshot
        heads = {str(p): int(s) for p, s in
                 conn.execute("SELECT process, last_seq FROM heads").fetchall()}
        last = _check_entries(conn, report)
        for process, head in sorted(heads.items()):
            if last.get(process, 0) != head:
                report.problems.append(
                    f"process {process!r}: the head says seq {head} but the last entry is "
                    f"seq {last.get(process, 0)}")
        for process in sorted(set(last) - set(heads)):
            report.problems.append(f"process {process!r} has entries (to seq {last[process]}) "
                                   "but no head")
        _check_indexes(conn, report, heads)
    return report


def _check_entries(conn: Any, report: PostgresVerifyReport) -> dict[str, int]:
    """Every entry, in (process, seq) order by the unique index; the last seq per process."""
    last: dict[str, int] = {}
    broken: set[str] = set()  # a chain is said broken once per process
    with conn.cursor(name="promptui_verify") as cursor:
        cursor.itersize = PAGE
        cursor.execute("SELECT process, seq, entry_type, data, crc FROM entries "
                       "ORDER BY process, seq")
        for process, seq, entry_type, data, crc in cursor:
            process, seq = str(process), int(seq)
            want = last.get(process, 0) + 1
            if seq != want and process not in broken:
                report.problems.append(f"process {process!r}: the seq chain breaks at entry "
                                       f"{process}:{seq} (expected seq {want})")
                broken.add(process)
            last[process] = seq
            report.processes[process] = report.processes.get(process, 0) + 1
            problem = _entry_problem(process, seq, str(entry_type), data, crc)
            if problem is not None:
                report.problems.append(problem)
            elif entry_type == EntryType.CHECKPOINT:
                report.checkpoints[process] = report.checkpoints.get(process, 0) + 1
    return last


def _entry_problem(process: str, seq: int, entry_type: str, data: Any, crc: Any) -> str | None:
    where = f"entry {process}:{seq} ({entry_type})"
    if not isinstance(data, str) or checksum(data) != crc:
        return f"{where} is corrupt: its checksum does not match (changed outside promptui)"
    try:
        value = json.loads(data)
    except ValueError as exc:
        return f"{where} does not hold JSON: {exc}"
    if not isinstance(value, dict):
        return f"{where} holds a {type(value).__name__}, not a JSON object"
    if entry_type == EntryType.CHECKPOINT and not isinstance(value.get("context_state", {}),
                                                             dict):
        return f"checkpoint {process}:{seq} does not hold a context_state mapping"
    return None


def _check_indexes(conn: Any, report: PostgresVerifyReport, heads: dict[str, int]) -> None:
    """The tables a recovery reads besides the entries: readable, their JSON parses."""
    for process, event_id, event in conn.execute(
            "SELECT process, event_id, event FROM pending ORDER BY process, ord"):
        report.pending[str(process)] = report.pending.get(str(process), 0) + 1
        if not _is_json_object(event):
            report.problems.append(f"queued event {process}:{event_id} does not hold a JSON "
                                   "object")
    for process, event_id, event, reason, error in conn.execute(
            "SELECT process, event_id, event, reason, error FROM dead_letters "
            "ORDER BY process, ord"):
        report.dead_letters[str(process)] = report.dead_letters.get(str(process), 0) + 1
        if not _is_json_object(event) or not _is_json(reason) or not _is_json(error):
            report.problems.append(f"dead letter {process}:{event_id} does not hold JSON (its "
                                   "event, reason or error)")
    for process, run_id, started in conn.execute(
            "SELECT process, run_id, started_seq FROM open_runs ORDER BY process"):
        if int(started) > heads.get(str(process), 0):
            report.problems.append(
                f"open run {process}:{run_id} starts at seq {started}, after the head "
                f"({heads.get(str(process), 0)})")
    conn.execute("SELECT COUNT(*) FROM deliveries").fetchone()  # readable: duplicates held


def _is_json(text: Any) -> bool:
    try:
        json.loads(text)
    except (TypeError, ValueError):
        return False
    return True


def _is_json_object(text: Any) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError):
        return False

"""Read-only access to a journal file, for the command line: listing entries and dead letters,
and verifying the file. Opens SQLite read-only, so inspecting a journal never changes it (not
even a migration)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.left_out import typed_entries, typed_sql
from runtime_core.journal.provider import JournalError, StoredDeadLetter
from runtime_core.journal.sqlite.check import find_damage
from runtime_core.journal.sqlite.marks import gap_is_retained, low_water_marks
from runtime_core.journal.sqlite.queries import SELECT_ENTRIES
from runtime_core.journal.sqlite.salvage import SalvageReport
from runtime_core.journal.sqlite.salvage import salvage as write_salvaged
from runtime_core.journal.sqlite.schema import SQLITE_HEADER, checksum


def connect_readonly(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise JournalError(f"no journal at {path} (pass --journal PATH, or run a process with a "
                           "journal first)")
    with path.open("rb") as fh:
        if fh.read(16) != SQLITE_HEADER:
            raise JournalError(f"{path} is not an SQLite journal (bad file header)")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def _entry(row: tuple[str, str, int, float, str, str | None, str, int]) -> JournalEntry:
    process, process_id, seq, ts, entry_type, run_id, data, crc = row
    text = str(data)
    if checksum(text) != crc:
        raise JournalError(f"journal entry {process}:{seq} is corrupt (checksum mismatch); "
                           "run 'promptui journal verify'")
    return JournalEntry(str(process), str(entry_type), json.loads(text),
                        process_id=str(process_id), run_id=run_id, timestamp=float(ts),
                        seq=int(seq))


def read_entries(
    path: Path, process: str, *, entry_type: str | None = None, since_seq: int = 0,
    limit: int | None = None, newest_first: bool = False,
) -> list[JournalEntry]:
    conn = connect_readonly(path)
    try:
        sql = SELECT_ENTRIES + " WHERE e.process = ? AND e.seq > ?"
        params: list[object] = [process, since_seq]
        if entry_type is not None:  # with the entries that carry such entries
            sql += " AND " + typed_sql(entry_type)
            params.append(entry_type)
        sql += f" ORDER BY e.seq {'DESC' if newest_first else 'ASC'}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        entries = [_entry(row) for row in conn.execute(sql, params)]
        return typed_entries(entry_type, entries, newest_first=newest_first, limit=limit)
    except sqlite3.DatabaseError as exc:
        raise JournalError(f"cannot read {path}: {exc}") from exc
    finally:
        conn.close()


def process_names(path: Path) -> list[str]:
    conn = connect_readonly(path)
    try:
        return [row[0] for row in conn.execute("SELECT process FROM heads ORDER BY process")]
    finally:
        conn.close()


@dataclass
class VerifyReport:
    path: Path
    problems: list[str] = field(default_factory=list)
    processes: dict[str, int] = field(default_factory=dict)  # name -> entries
    checkpoints: dict[str, int] = field(default_factory=dict)
    #: Per process, the seq below which retention removed entries (gaps there are no damage).
    retained: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def read_dead_letters(path: Path, process: str, *, offset: int = 0, limit: int | None = None
                      ) -> list[StoredDeadLetter]:
    """The dead letters the journal keeps for ``process``, oldest first (a page of them)."""
    conn = connect_readonly(path)
    try:
        rows = conn.execute("SELECT event, reason, error, attempts, at FROM dead_letters "
                            "WHERE process = ? ORDER BY ord LIMIT ? OFFSET ?",
                            (process, -1 if limit is None else limit, offset)).fetchall()
    except sqlite3.DatabaseError as exc:
        raise JournalError(f"cannot read the dead letters in {path}: {exc}") from exc
    finally:
        conn.close()
    return [StoredDeadLetter(json.loads(event), str(reason), str(error), int(attempts),
                             float(at)) for event, reason, error, attempts, at in rows]


def _iter_rows(conn: sqlite3.Connection) -> Iterator[tuple[str, int, str, str, int]]:
    yield from conn.execute(
        "SELECT process, seq, entry_type, data, crc FROM entries ORDER BY process, seq")


def verify(path: Path) -> VerifyReport:
    """Check the file, the chain of seqs per process, every checksum and every checkpoint; each
    problem names the entry where the damage starts."""
    report = VerifyReport(path)
    try:
        conn = connect_readonly(path)
    except JournalError as exc:
        report.problems.append(str(exc))
        return report
    try:
        integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        if integrity != ["ok"]:
            report.problems.append("SQLite integrity check failed: " + "; ".join(integrity[:5]))
        heads = dict(conn.execute("SELECT process, last_seq FROM heads").fetchall())
        report.retained = low_water_marks(conn)
        expected: dict[str, int] = {}
        damaged: set[str] = set()
        for process, seq, entry_type, data, crc in _iter_rows(conn):
            want = expected.get(process, 0) + 1
            if process not in damaged and seq != want and not gap_is_retained(
                    seq, report.retained.get(process, 0)):
                report.problems.append(
                    f"process {process!r}: the seq chain breaks at entry {process}:{seq} "
                    f"(expected seq {want})")
                damaged.add(process)
            expected[process] = seq
            report.processes[process] = report.processes.get(process, 0) + 1
            if checksum(data) != crc:
                report.problems.append(
                    f"entry {process}:{seq} ({entry_type}) is corrupt: checksum mismatch")
                continue
            if entry_type == EntryType.CHECKPOINT:
                report.checkpoints[process] = report.checkpoints.get(process, 0) + 1
                try:
                    state = json.loads(data)
                except ValueError:
                    state = None
                if not isinstance(state, dict) or not isinstance(
                        state.get("context_state", {}), dict):
                    report.problems.append(
                        f"checkpoint {process}:{seq} does not hold a context_state mapping")
        for process, last in heads.items():
            if expected.get(process, 0) != last:
                report.problems.append(
                    f"process {process!r}: the head says seq {last} but the last entry is "
                    f"seq {expected.get(process, 0)}")
    except sqlite3.DatabaseError as exc:
        report.problems.append(f"cannot read {path}: {exc}")
        return report
    except (ValueError, TypeError) as exc:  # damage that left text where a number belongs
        report.problems.append(f"cannot read {path}: a value has the wrong type ({exc})")
        return report
    finally:
        conn.close()
    if not any(p.startswith("SQLite integrity check failed") for p in report.problems):
        # What a start checks (and refuses): the indexes recovery trusts, against the entries.
        report.problems += [p for p in find_damage(path) if p not in report.problems]
    return report


def salvage(path: Path, output: Path | None = None) -> SalvageReport:
    """Write a new journal from what the damaged journal at ``path`` still holds (see
    ``sqlite.salvage``), then verify it as ``promptui journal verify`` does: the report's
    ``verify_problems`` is empty when the new journal is sound."""
    report = write_salvaged(path, output)
    report.verify_problems = verify(report.output).problems
    return report

"""Checking a journal file before a runtime writes to it, and what to do about damage.

A start reads the last checkpoint, the entries after it, every open run's entries, the queued
events and the indexes that point at them. A flipped byte in any of those can make recovery
forget that a run is waiting on a write whose outcome is unknown, and run that write again. So
before anything starts: SQLite's ``quick_check`` (the structure of the tables a start reads
whole), then for each process, from its last checkpoint (or its oldest open run, or the entry
that queued its oldest pending event) on: every entry's checksum, the seq chain and the head,
and the indexes a start finds those entries by (the open runs, the run index, the entry type
index for the checkpoint, the queue), which ``quick_check`` does not compare with their tables.
History older than that is not read here, nor by ``quick_check`` (it checks every table but the
entries): that would cost the journal's length (``promptui journal verify`` reads all of it,
with SQLite's full ``integrity_check``).

What happens then (the journal's ``on_damage``): any damage, a file that is not a journal at
all (bad header, not SQLite, no schema version, a schema page or a cut that SQLite cannot read)
or one damaged where recovery reads it, is refused: the file (and its -wal and -shm) stays
as it is and the refusal names the damage and ``promptui journal salvage PATH``, which writes
a new journal from every entry it can still read (``salvage``). ``on_damage: start_fresh``
moves it aside instead (never deleting it) and a fresh journal starts; what was left behind
is then said everywhere (``left_behind``). A journal written by a newer promptui is always
refused: it is not damaged.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from runtime_core.journal.entry import EntryType
from runtime_core.journal.left_out import CARRIES_START, STARTED
from runtime_core.journal.provider import IndexRules
from runtime_core.journal.run_key import runs_params, runs_term
from runtime_core.journal.sqlite.left_behind import left_behind
from runtime_core.journal.sqlite.marks import gap_is_retained, low_water_marks
from runtime_core.journal.sqlite.schema import (
    NEWER,
    TYPE_INDEXED,
    DamagedJournal,
    checksum,
    move_aside,
    open_checked,
    readonly_uri,
)

MAX_PROBLEMS = 20
#: How many runs one query of the run index asks for (well under SQLite's parameter limit).
RUNS_PER_QUERY = 500
#: The entry a salvage writes where an entry was lost (``salvage``).
LOST = EntryType.LOST
_OPEN_STATES = ("running", "waiting")


def refuse_advice(path: Path, reason: str = "") -> str:
    """How to go on from a refused journal (its file untouched)."""
    if reason.startswith(NEWER):
        return ("it was not opened and the file is untouched: run it with that promptui (or a "
                "newer one), never an older one")
    return (f"it was not opened and the file is untouched: 'promptui journal salvage {path}' "
            "writes a new journal beside it from every entry it can still read and says what "
            "it rescued (runs whose outcome is unknown wait for an operator); 'promptui "
            f"journal verify -j {path}' shows the damage; or set the journal's on_damage: "
            "start_fresh to have a damaged journal moved aside and a fresh one started")


def take_file(path: Path, *, start_fresh: bool, act: bool) -> DamagedJournal | None:
    """Check the journal at ``path`` (its writer's lock held). Raises DamagedJournal when the
    start must refuse (any damage, unless ``start_fresh``); returns the damage it moved aside
    (``act``; without ``act`` nothing is moved and the damage that would be is returned), or
    None for a sound file."""
    unreadable, conn = open_checked(path)  # one connection for both checks
    if unreadable is not None:
        reason, readable = unreadable, False
    else:
        problems = find_damage(path, conn)
        if not problems:
            return None
        reason = problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1
                                else "")
        readable = True
    if not start_fresh or reason.startswith(NEWER):
        raise DamagedJournal(path, reason, readable=readable,
                             advice=refuse_advice(path, reason))
    if not act:
        return DamagedJournal(path, reason, readable=readable)
    moved = move_aside(path)
    return DamagedJournal(path, reason, moved, readable=readable,
                          left_behind=left_behind(moved, path, reason))


def find_damage(path: Path, conn: sqlite3.Connection | None = None) -> list[str]:
    """What is wrong where a start reads ``path`` (a readable SQLite journal); [] if nothing.
    Each problem names the entry, run or event where it is. ``conn``: a read-only connection
    to it (``open_checked``'s), closed here; None: one is opened."""
    if conn is None:
        if not path.exists() or path.stat().st_size == 0:
            return []
        conn = sqlite3.connect(readonly_uri(path), uri=True, timeout=5)
    try:
        return _problems(conn)[:MAX_PROBLEMS]
    except sqlite3.DatabaseError as exc:
        return [f"SQLite cannot read it: {exc}"]
    except (ValueError, TypeError, OverflowError) as exc:  # a flipped type byte: text for a seq
        return [f"a value in it has the wrong type ({exc})"]
    finally:
        conn.close()


def _structure(conn: sqlite3.Connection) -> list[str]:
    """SQLite's quick_check of every table but ``entries``, and of their indexes: what a start
    reads whole. The history is most of the file and a start reads only its tail, so checking
    all of it would make every start cost the journal's length (about 1 ms a megabyte); the
    pages of the tail are checked as the scans below read them (``cell_size_check``)."""
    tables = [str(row[0]) for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'entries'")]
    for table in tables:
        found = [row[0] for row in conn.execute(f'PRAGMA quick_check("{table}")')]
        if found != ["ok"]:
            said = " ".join(" ".join(map(str, found[:3]))
                            .replace("*** in database main ***", "").split())  # one line
            return [f"SQLite's quick_check failed: {said}"]
    return []


def _last_seqs(conn: sqlite3.Connection) -> dict[str, int]:
    """Each process's last entry, one index seek per process (a GROUP BY reads the whole
    (process, seq) index)."""
    last: dict[str, int] = {}
    process = conn.execute("SELECT MIN(process) FROM entries").fetchone()[0]
    while process is not None:
        last[str(process)] = int(conn.execute(
            "SELECT MAX(seq) FROM entries WHERE process = ?", (process,)).fetchone()[0])
        process = conn.execute("SELECT MIN(process) FROM entries WHERE process > ?",
                               (process,)).fetchone()[0]
    return last


def _problems(conn: sqlite3.Connection) -> list[str]:
    conn.execute("PRAGMA cell_size_check = ON")  # each page the scans read, parsed strictly
    structure = _structure(conn)
    if structure:  # past a broken structure no table can be trusted
        return structure
    heads = {str(p): int(s) for p, s in conn.execute("SELECT process, last_seq FROM heads")}
    last = _last_seqs(conn)
    runs = {str(row[0]) for row in conn.execute("SELECT DISTINCT process FROM open_runs")}
    problems: list[str] = []
    pids: set[int] = set()
    for process in sorted(set(heads) | set(last) | runs):
        head, top = heads.get(process), last.get(process, 0)
        if head != top:  # the same words as 'promptui journal verify'
            said = "no head" if head is None else f"the head says seq {head}"
            problems.append(f"process {process!r}: {said} but the last entry is seq {top}")
        problems += _check_process(conn, process, pids)
        problems += _check_pending(conn, process)
        if len(problems) >= MAX_PROBLEMS:
            return problems
    known = {int(row[0]) for row in conn.execute("SELECT pid FROM incarnations")}
    for pid in sorted(pids - known):  # the entry SELECT joins incarnations: they would vanish
        problems.append(f"entries name incarnation {pid}, which the journal does not have")
    return problems


def _check_process(conn: sqlite3.Connection, process: str, pids: set[int]) -> list[str]:
    """The entries a start reads for ``process``, and the indexes it finds them by (SQLite's
    quick_check does not compare an index with its table: a run's entry missing from the run
    index would hide its write intent, and the write would run again)."""
    problems: list[str] = []
    mark = low_water_marks(conn).get(process, 0)  # retention removed entries below it
    row = conn.execute("SELECT MAX(seq) FROM entries WHERE process = ? AND entry_type = ? "
                       f"AND {TYPE_INDEXED}", (process, EntryType.CHECKPOINT)).fetchone()
    checkpoint = int(row[0]) if row and row[0] is not None else 0
    indexed = {str(r[0]): (str(r[1]), str(r[2]), r[3]) for r in conn.execute(
        "SELECT run_id, event_id, state, started_seq FROM open_runs WHERE process = ?",
        (process,))}
    # From the oldest thing a start still depends on: the last checkpoint, an open run's
    # start, or the entry that queued a pending event (its order key holds that entry's seq):
    # a run of a queued event that is missing from the open runs index would run again.
    starts = [s for _, _, s in indexed.values() if isinstance(s, int)]
    starts += [o // IndexRules.ORD_SCALE for (o,) in conn.execute(
        "SELECT ord FROM pending WHERE process = ?", (process,)) if isinstance(o, int)]
    start = min([checkpoint or 1, *(s for s in starts if s >= 1)])
    expected, seen_checkpoint = start, 0
    started: dict[str, tuple[int, str]] = {}  # run_id -> (seq, event_id)
    unfinished: set[str] = set()
    blurred: set[str] = set()  # started before entries a salvage lost: their end may be there
    rows_of: dict[str, dict[int, int]] = {}  # run_id -> {row id: seq}, as the table has it
    for rowid, seq, entry_type, run_id, data, crc, pid in conn.execute(
            "SELECT id, seq, entry_type, run_id, data, crc, pid FROM entries "
            "INDEXED BY sqlite_autoindex_entries_1 "  # the one a start's reads go through
            "WHERE process = ? AND seq >= ? ORDER BY seq", (process, start)):
        where = f"{process}:{seq}"
        if seq != expected and not gap_is_retained(seq, mark):  # retention's gaps are no damage
            problems.append(f"process {process!r}: the seq chain breaks at entry {where} "
                            f"(expected seq {expected})")
        expected = seq + 1
        pids.add(int(pid))
        if not isinstance(data, str) or checksum(data) != crc:
            problems.append(f"entry {where} ({entry_type}) is corrupt: checksum mismatch")
            continue
        if run_id is not None:
            rows_of.setdefault(str(run_id), {})[int(rowid)] = int(seq)
        if entry_type == LOST:
            blurred |= unfinished
        elif entry_type == EntryType.CHECKPOINT:
            seen_checkpoint = seq
        elif entry_type == EntryType.RUN_STARTED and run_id:
            started[run_id] = (seq, str(_field(data, "event_id")))
            unfinished.add(run_id)
        elif entry_type == EntryType.TOOL_INTENT and run_id and CARRIES_START in data:
            carried = _field(data, STARTED)  # a run's start, carried by its first intent
            if isinstance(carried, dict):
                started[run_id] = (seq, str(carried.get("event_id")))
                unfinished.add(run_id)
        elif entry_type == EntryType.RUN_FINISHED and run_id:
            unfinished.discard(run_id)
    if expected == start and start > 1:
        problems.append(f"entry {process}:{start} (where recovery of {process!r} starts) is "
                        "missing")
    if seen_checkpoint != checkpoint:
        problems.append(f"the entry type index says the last checkpoint of {process!r} is "
                        f"entry {process}:{checkpoint}, the entries say {process}:"
                        f"{seen_checkpoint}")
    checked = sorted(unfinished | set(indexed))
    by_index = _indexed_rows(conn, process, checked, start)
    for run_id in checked:
        found = by_index.get(run_id, set())
        table = rows_of.get(run_id, {})
        missed = ", ".join(f"{process}:{table[i]}" for i in sorted(set(table) - found))
        if missed:
            problems.append(f"the run index misses entries of run {run_id} of {process!r}: "
                            f"recovery would not read {missed}")
        if found - set(table):
            problems.append(f"the run index gives run {run_id} of {process!r} "
                            f"{len(found - set(table))} entries that are not its own")
    return problems + _check_open_runs(process, indexed, started, unfinished, blurred)


def _indexed_rows(conn: sqlite3.Connection, process: str, run_ids: list[str],
                  start: int) -> dict[str, set[int]]:
    """What recovery reads of each run (its process's entries by the run index), from where
    the scan started (a fork's copies or an older use of the id are not damage): the row ids
    by run, one query for many runs (a crash with many runs in flight: not one query each)."""
    found: dict[str, set[int]] = {}
    for at in range(0, len(run_ids), RUNS_PER_QUERY):
        page = run_ids[at:at + RUNS_PER_QUERY]
        for rowid, run_id in conn.execute(
                "SELECT id, run_id FROM entries INDEXED BY entries_by_run WHERE "
                f"{runs_term('run_id', len(page))} AND process = ? AND seq >= ?",
                (*runs_params(page), process, start)):
            found.setdefault(str(run_id), set()).add(int(rowid))
    return found


def _check_open_runs(process: str, indexed: dict[str, tuple[str, str, object]],
                     started: dict[str, tuple[int, str]], unfinished: set[str],
                     blurred: set[str]) -> list[str]:
    """The open runs index against the runs the entries leave unfinished (a run started
    before entries a salvage lost may have ended in them)."""
    problems = []
    for run_id in sorted(unfinished - set(indexed) - blurred):
        problems.append(f"run {run_id} of {process!r} (started at entry "
                        f"{process}:{started[run_id][0]}) is unfinished but not in the open "
                        "runs index")
    for run_id, (event_id, state, started_seq) in sorted(indexed.items()):
        if state not in _OPEN_STATES:
            problems.append(f"open run {run_id} of {process!r} has an unknown state {state!r}")
        if run_id not in started:
            problems.append(f"open run {run_id} of {process!r} has no run_started entry (the "
                            f"index says {process}:{started_seq})")
        elif started[run_id] != (started_seq, event_id):
            problems.append(f"open run {run_id} of {process!r} does not match its run_started "
                            f"entry {process}:{started[run_id][0]}")
        elif run_id not in unfinished:
            problems.append(f"open run {run_id} of {process!r} is finished in the entries but "
                            "still in the open runs index")
    return problems


def _field(data: object, key: str) -> object:
    try:
        value = json.loads(data)  # type: ignore[arg-type]  # damage may leave any type
    except (ValueError, TypeError):
        return None
    return value.get(key) if isinstance(value, dict) else None


def _check_pending(conn: sqlite3.Connection, process: str) -> list[str]:
    """The queued events a start re-queues: readable, and the same read by the process's key
    (what recovery reads) as in a scan of the whole table."""
    problems = []
    table = {}
    for event_id, event in conn.execute(
            "SELECT event_id, event FROM pending NOT INDEXED WHERE process = ?", (process,)):
        table[event_id] = event
        if _field(event, "event_id") != event_id:
            problems.append(f"queued event {event_id} of {process!r} cannot be read")
    ordered = [r[0] for r in conn.execute(
        "SELECT event_id FROM pending WHERE process = ? ORDER BY ord", (process,))]
    if sorted(map(str, ordered)) != sorted(map(str, table)):
        problems.append(f"the queue index of {process!r} does not match its queued events: "
                        f"recovery would re-queue {len(ordered)} of {len(table)}")
    return problems

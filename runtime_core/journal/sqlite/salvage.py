"""``promptui journal salvage``: a new journal from every entry a damaged one still holds.

The damaged file is read (``rescue``, page by page; it is never written), each process's
state is decided (``salvage_plan``) and a new journal is written beside it, which passes
``promptui journal verify``: every entry that was read keeps its process, seq, time and
checksum; a seq that was lost is held by a ``lost`` entry (so the chain is whole and an entry
id still names the same entry); the indexes (queue, dead letters, open runs, deliveries) are
written as the plan says; a run the salvage puts to wait gets a write call whose outcome is
unknown (``salvage_unknown_outcome``), so it waits for an operator exactly as after a crash;
each process ends with one ``salvaged`` entry saying what was rescued and what was lost.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runtime_core.ids import token_hex
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import JournalError, to_json
from runtime_core.journal.sqlite.check import LOST
from runtime_core.journal.sqlite.marks import TABLE as RETAINED
from runtime_core.journal.sqlite.rescue import Rescued, rescue
from runtime_core.journal.sqlite.salvage_plan import ProcessPlan, Wait, plan
from runtime_core.journal.sqlite.schema import checksum, connect_writer, free_name

#: The entry that closes a salvage (a seq whose entry was lost holds a ``LOST`` one).
SALVAGED = EntryType.SALVAGED
#: The call a run put to wait by the salvage waits on.
UNKNOWN_CALL = "salvage_unknown_outcome"
_LISTED = 1000  # ids listed in a salvaged entry at most (the report has the counts)


@dataclass(slots=True)
class SalvageReport:
    """What a salvage read, wrote and could not rescue."""

    source: Path
    output: Path
    processes: list[ProcessPlan] = field(default_factory=list)
    pages: int = 0
    expected_pages: int = 0
    torn_entries: int = 0
    torn_cells: int = 0
    schema_readable: bool = True
    notes: list[str] = field(default_factory=list)
    verify_problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON data (``promptui journal salvage --json``)."""
        return {
            "source": str(self.source), "output": str(self.output), "pages": self.pages,
            "expected_pages": self.expected_pages, "schema_readable": self.schema_readable,
            "torn_entries": self.torn_entries, "torn_cells": self.torn_cells,
            "notes": self.notes, "verify_problems": self.verify_problems,
            "processes": {p.name: process_summary(p) for p in self.processes},
        }


def process_summary(p: ProcessPlan) -> dict[str, Any]:
    """One process's part of the report."""
    return {
        "entries_rescued": len(p.rows), "entries_lost": p.lost_count,
        "lost": [list(r) for r in p.lost], "head": p.head, "tail_known": p.tail_known,
        "requeued": p.requeued, "dead_letters": len(p.dead), "dead_letters_lost": p.dead_lost,
        "runs_finished": p.finished_runs,
        "runs_open": sorted(p.open_runs),
        "runs_waiting_before": sorted(r for r, v in p.open_runs.items() if v[2] == "waiting"),
        "runs_put_to_wait": [{"run_id": w.run_id, "event_id": w.event_id, "cause": w.cause}
                             for w in p.waits],
        "payload_lost": p.payload_lost, "settled_end_lost": p.settled_end_lost,
    }


def default_output(path: Path) -> Path:
    """``PATH.salvaged-<time>.db`` beside the damaged file (a free name)."""
    return free_name(path, "salvaged", ".db")


def salvage(path: Path, output: Path | None = None) -> SalvageReport:
    """Write a new journal at ``output`` (default ``default_output(path)``) from what the
    journal at ``path`` still holds, and say what was rescued. JournalError when there is no
    file, the output exists already, or nothing in the file is a journal's."""
    path = Path(path)
    if not path.is_file():
        raise JournalError(f"no journal file at {path}")
    output = Path(output) if output is not None else default_output(path)
    if output.exists() or output.with_name(output.name + "-wal").exists():
        raise JournalError(f"{output} exists already: give another --output (the salvage "
                           "never overwrites a file)")
    if output.resolve() == path.resolve():
        raise JournalError("the salvaged journal must be a new file, not the damaged one")
    rescued = rescue(path)
    if not rescued.processes():
        raise JournalError(f"nothing in {path} could be read as a journal's entries "
                           f"({rescued.pages} pages read): there is nothing to salvage")
    report = SalvageReport(path, output, pages=rescued.pages,
                           expected_pages=rescued.expected_pages,
                           torn_entries=rescued.torn_entries, torn_cells=rescued.torn_cells,
                           schema_readable=rescued.schema_readable, notes=list(rescued.notes))
    report.processes = plan(rescued, str(path), lambda: token_hex(8))
    output.parent.mkdir(parents=True, exist_ok=True)
    write_journal(output, rescued, report)
    return report


def write_journal(output: Path, rescued: Rescued, report: SalvageReport) -> None:
    """Write the journal ``report``'s plans describe at ``output`` (a new file), in one
    transaction, its WAL folded in when done."""
    conn = connect_writer(output, 10_000)
    try:
        with closing(conn):
            conn.execute("BEGIN IMMEDIATE")
            try:
                _fill(conn, rescued, report)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error as exc:
        raise JournalError(f"cannot write the salvaged journal {output}: {exc}") from exc


def _fill(conn: sqlite3.Connection, rescued: Rescued, report: SalvageReport) -> None:
    pids = dict(rescued.incarnations)
    used = {row.pid for p in report.processes for row in p.rows.values()}
    for pid in sorted(used - set(pids)):  # its incarnation row was lost: a name that says so
        pids[pid] = f"salvaged-incarnation-{pid}"
    now = time.time()
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    for p in report.processes:
        pids[max(pids, default=0) + 1] = f"salvage:{p.name}:{stamp}"
    conn.executemany("INSERT INTO incarnations (pid, process_id) VALUES (?, ?)",
                     sorted(pids.items()))
    own = {process_id: pid for pid, process_id in pids.items()}
    rows: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []  # (order key, row)
    for p in report.processes:
        mine = own[f"salvage:{p.name}:{stamp}"]
        rows += [((r.id, 0, 0), (p.name, r.pid, r.seq, r.ts, r.entry_type, r.run_id, r.data,
                                 r.crc)) for r in p.rows.values()]
        rows += _lost_rows(p, mine, str(report.source))
        rows += [((float("inf"), p.name, i), row)
                 for i, row in enumerate(_closing_rows(p, mine, now, report))]
    rows.sort(key=lambda kept: kept[0])
    conn.executemany("INSERT INTO entries (id, process, pid, seq, ts, entry_type, run_id, "
                     "data, crc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     [(n, *row) for n, (_, row) in enumerate(rows, start=1)])
    heads: dict[str, int] = {}
    for _, row in rows:
        heads[row[0]] = max(heads.get(row[0], 0), row[2])
    conn.executemany("INSERT INTO heads (process, last_seq) VALUES (?, ?)", heads.items())
    for p in report.processes:
        _indexes(conn, p, rescued)
    if rescued.retained and conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                                         (RETAINED,)).fetchone():
        conn.executemany(f"INSERT INTO {RETAINED} (process, before_seq, removed, at) VALUES "
                         "(?, ?, ?, ?)", [(p, *v) for p, v in rescued.retained.items()])


def _lost_rows(p: ProcessPlan, pid: int, source: str
               ) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """A ``lost`` entry for each seq that was lost, right after the entry before it."""
    out = []
    for first, last in p.lost:
        before = max((s for s in p.rows if s < first), default=0)
        after_id = p.rows[before].id if before else 0
        ts = p.rows[before].ts if before else 0.0
        data = to_json({"lost": [first, last], "salvaged_from": source}, "lost entry")
        for seq in range(first, last + 1):
            out.append(((after_id, 1, seq),
                        (p.name, pid, seq, ts, LOST, None, data, checksum(data))))
    return out


def _closing_rows(p: ProcessPlan, pid: int, now: float, report: SalvageReport
                  ) -> list[tuple[Any, ...]]:
    """After the last seq: each wait's entries, then the ``salvaged`` entry."""
    made: list[tuple[str, str | None, dict[str, Any]]] = []
    for wait in p.waits:
        made += _wait_entries(wait)
    summary = process_summary(p)
    for key in ("requeued", "payload_lost", "settled_end_lost", "dead_letters_lost",
                "runs_put_to_wait"):
        summary[key] = summary[key][:_LISTED]
    made.append((SALVAGED, None, {"salvaged_from": str(report.source),
                                  "at": datetime.fromtimestamp(now, UTC).isoformat(),
                                  **summary}))
    out = []
    for n, (kind, run_id, data) in enumerate(made, start=p.head + 1):
        text = to_json(data, f"{kind} entry")
        out.append((p.name, pid, n, now, kind, run_id, text, checksum(text)))
    return out


def _wait_entries(wait: Wait) -> list[tuple[str, str | None, dict[str, Any]]]:
    """What makes a run wait on a write whose outcome is unknown: a model turn that called
    ``salvage_unknown_outcome``, its write intent (no result), and the run's wait with its
    cause (what ``promptui reconcile`` and the room show)."""
    call_id = f"salvage-{wait.run_id}"
    key = f"{wait.run_id}:{wait.step}"
    args = {"event_id": wait.event_id}
    out: list[tuple[str, str | None, dict[str, Any]]] = []
    if not wait.started:
        out.append((EntryType.RUN_STARTED, wait.run_id,
                    {"event_id": wait.event_id, "attempt": wait.attempt}))
    call = {"name": UNKNOWN_CALL, "args": args, "call_id": call_id}
    out += [
        (EntryType.MODEL_USAGE, wait.run_id,
         {"step": wait.step, "turn": 0, "input_tokens": 0, "output_tokens": 0,
          "tool_calls": [call], "reply": "", "salvaged": True}),
        (EntryType.TOOL_INTENT, wait.run_id,
         {"step": wait.step, "tool": UNKNOWN_CALL, "call_id": call_id, "effect": "write",
          "args": args, "idempotency_key": key, "salvaged": True}),
        (EntryType.RUN_WAITING, wait.run_id,
         {"step": wait.step, "tool": UNKNOWN_CALL, "reason": "unknown_write_outcome",
          "call_id": call_id, "args": args, "idempotency_key": key, "cause": wait.cause}),
    ]
    return out


def _indexes(conn: sqlite3.Connection, p: ProcessPlan, rescued: Rescued) -> None:
    conn.executemany("INSERT INTO pending (process, event_id, ord, event) VALUES (?, ?, ?, ?)",
                     [(p.name, e, o, ev) for e, (o, ev) in p.queued.items()])
    conn.executemany(
        "INSERT INTO dead_letters (process, event_id, ord, event, reason, error, attempts, at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [(p.name, e, *v) for e, v in p.dead.items()])
    started = _started_seqs(p)
    runs = [(p.name, r, e, a, s, seq) for r, (e, a, s, seq) in p.open_runs.items()]
    runs += [(p.name, w.run_id, w.event_id, w.attempt, "waiting", started[w.run_id])
             for w in p.waits]
    conn.executemany("INSERT INTO open_runs (process, run_id, event_id, attempt, state, "
                     "started_seq) VALUES (?, ?, ?, ?, ?, ?)", runs)
    conn.executemany("INSERT OR IGNORE INTO deliveries (process, delivery_key, event_id, at) "
                     "VALUES (?, ?, ?, ?)",
                     [(p.name, k, e, at) for (name, k), (e, at) in rescued.deliveries.items()
                      if name == p.name])


def _started_seqs(p: ProcessPlan) -> dict[str, int]:
    """The seq of each waiting run's run_started entry (the salvage's own for a new run)."""
    out = {w.run_id: w.started for w in p.waits if w.started}
    n = p.head
    for wait in p.waits:  # the order _closing_rows writes them in
        if not wait.started:
            out[wait.run_id] = n + 1
        n += 3 if wait.started else 4
    return out


def report_lines(report: SalvageReport) -> list[str]:
    """The report as lines of text (what the command prints)."""
    lines = [f"salvaged {report.source} into {report.output}"]
    cut = report.expected_pages - report.pages
    lines.append(f"read {report.pages} pages" + (f" ({cut} more were cut off the end)"
                                                 if cut > 0 else "")
                 + ("" if report.schema_readable else "; the schema page was damaged")
                 + (f"; {report.torn_entries} torn entries skipped" if report.torn_entries
                    else ""))
    lines += [f"note: {note}" for note in report.notes]
    for p in report.processes:
        lost = ", ".join(f"{p.name}:{a}" + (f"-{b}" if b != a else "") for a, b in p.lost[:5])
        more = f" and {len(p.lost) - 5} more ranges" if len(p.lost) > 5 else ""
        tail = "" if p.tail_known else " (its last seq could not be read: more may be lost)"
        lines.append(f"process {p.name}: {len(p.rows)} entries rescued, {p.lost_count} lost"
                     + (f" ({lost}{more})" if lost else "") + tail)
        waiting_before = sum(1 for v in p.open_runs.values() if v[2] == "waiting")
        lines.append(f"  queued events: {len(p.requeued)} queued again; runs: "
                     f"{p.finished_runs} finished, {len(p.open_runs)} open as they were "
                     f"({waiting_before} waiting for an operator), {len(p.waits)} put to wait "
                     "for an operator (their outcome is unknown)")
        lines.append(f"  dead letters: {len(p.dead)} rescued"
                     + (f", {len(p.dead_lost)} lost with their event" if p.dead_lost else ""))
        if p.payload_lost:
            lines.append(f"  {len(p.payload_lost)} unfinished events lost their payload (their "
                         "runs wait): " + ", ".join(p.payload_lost[:10]))
        if p.settled_end_lost:
            lines.append(f"  {len(p.settled_end_lost)} events were settled but how is lost: "
                         + ", ".join(p.settled_end_lost[:10]))
        for wait in p.waits[:20]:
            lines.append(f"  waits: run {wait.run_id} (event {wait.event_id})")
    return lines

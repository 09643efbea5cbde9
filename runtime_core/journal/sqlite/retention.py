"""Retention: removing the entries of old finished runs, and nothing anything still needs.

A process's policy (``RetentionPolicy``: a ``max_age``, a ``keep_runs`` count, or both) gives a
bound, a seq: entries below it are old enough to go. The bound is never above the process's
last checkpoint (recovery reads that checkpoint and everything after it: the anchor and the
tail are never touched), nor above the end of the oldest run a restart's conversation reads
(``conversation_runs``: the newest runs' ``run_finished`` entries hold it). Below the bound:

* a **run** (every entry with its run_id) goes whole, once it is finished (its
  ``run_finished`` is below the bound), not open (the open runs index: running, or waiting on
  an unknown write outcome, evidence or an elicitation), its event is neither queued (the
  pending index) nor a dead letter, and no incident names it or its event;
* an ``event_accepted`` entry goes once its event is settled: not queued, not a dead letter,
  no open run of it, no incident's; a ``dead_lettered`` entry once its event is no longer a
  dead letter (redelivered, cleared); a ``redelivered`` entry once none of its events is
  queued or dead;
* superseded process entries go: older checkpoints, context updates, transitions, restarts,
  recoveries, shutdowns, secret accesses... (the anchor checkpoint holds their sum), but the
  newest entry of each type a start or a status looks up (the entry type index) stays;
* always kept: ``profile`` entries (an open run's identity names one), ``incident`` entries
  (the incidents are folded from all of them), ``rewind``, ``forked`` and ``imported`` entries
  (the lineage: a process's conversation and state start from the last of them), and any type
  not listed here.

"Needed" is read from the indexes the schema keeps (open runs, pending, dead letters, the
run index), in the same transaction as the deletion, so what a commit queues or parks
meanwhile is seen. The bound, the newest entry of each type (the entry type index) and what
incidents name are read when the pass is planned (``plan``): a later commit only moves them
forward, and an incident names a run when it starts, before its end is committed. The
delivery index (the deduplication of redeliveries) is a table of its own that retention
never touches: it keeps its own week.

Work comes in windows (``remove_window``): about ``batch`` (200) entries read and at most
about as many removed per transaction (10-30 ms), so a pass never holds the writer for long.
The process's low-water mark (``marks``) is raised in the same transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

from runtime_core.journal.entry import EntryType
from runtime_core.journal.run_key import runs_params, runs_term
from runtime_core.journal.sqlite.marks import record_mark
from runtime_core.journal.sqlite.schema import TYPE_INDEXED, TYPES_INDEXED

RUN_TERM = runs_term("run_id")  # a run's entries by the run index

E = EntryType
#: Process entries the anchor checkpoint (or the entries after it) supersede.
SUPERSEDED = frozenset({E.CHECKPOINT, E.CONTEXT_UPDATE, E.STATE_TRANSITION, E.SECRET_ACCESS,
                        E.RESTART, E.RESTART_EXHAUSTED, E.RECOVERED, E.SHUTDOWN,
                        E.INSTRUCTIONS_UPDATED, E.DEAD_LETTERS_CLEARED, E.CONFIG_CHANGED})
#: Entries that go with their event once it is settled.
OF_EVENTS = frozenset({E.EVENT_ACCEPTED, E.DEAD_LETTERED, E.REDELIVERED})
#: Never removed, even when they carry a run_id.
LINEAGE = (E.PROFILE, E.INCIDENT, E.REWIND, E.FORKED, E.IMPORTED)
BATCH = 200


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """One process's retention: ``max_age`` seconds and/or ``keep_runs`` newest finished runs;
    ``conversation_runs``: the newest finished runs a restart's conversation reads (kept
    whatever the limits); ``every``: seconds between background passes."""

    max_age: float | None = None
    keep_runs: int | None = None
    conversation_runs: int = 0
    every: float = 60.0


@dataclass(slots=True)
class ProcessPlan:
    """What one pass may remove of ``process``: entries below ``below``, minus ``keep``
    (seqs) and what incidents name."""

    process: str
    below: int
    keep: set[int] = field(default_factory=set)
    incident_runs: set[str] = field(default_factory=set)
    incident_events: set[str] = field(default_factory=set)


@dataclass(slots=True)
class WindowResult:
    """What one window removed, and where the next one starts."""

    entries: int = 0
    runs: int = 0
    last_seq: int = 0  # the last seq examined: the next window starts after it
    done: bool = True  # nothing left below the bound
    seconds: float = 0.0  # how long it held the writer (appends queued behind it wait)


def plan(conn: sqlite3.Connection, process: str, policy: RetentionPolicy,
         now: float) -> ProcessPlan | None:
    """The bound and the keep sets for one pass over ``process``, or None when nothing is old
    enough (or the process has no checkpoint yet to anchor recovery)."""
    anchor = _one(conn, "SELECT MAX(seq) FROM entries WHERE process = ? AND entry_type = ? "
                  f"AND {TYPE_INDEXED}", (process, E.CHECKPOINT))
    if not anchor:
        return None
    bound = 0
    if policy.keep_runs is not None:
        bound = max(bound, _nth_finish(conn, process, policy.keep_runs))
    if policy.max_age is not None:
        bound = max(bound, _first_since(conn, process, now - policy.max_age, anchor))
    if policy.conversation_runs > 0:
        floor = (_nth_finish(conn, process, policy.conversation_runs)
                 or _one(conn, "SELECT seq FROM entries INDEXED BY sqlite_autoindex_entries_1 "
                         "WHERE process = ? AND entry_type = ? ORDER BY seq LIMIT 1",
                         (process, E.RUN_FINISHED)))
        if floor:
            bound = min(bound, floor)
    bound = min(bound, anchor)
    if bound <= 1:
        return None
    out = ProcessPlan(process, bound)
    for kind in TYPES_INDEXED:  # the newest of each: a start or a status looks it up
        newest = _one(conn, "SELECT MAX(seq) FROM entries WHERE process = ? AND "
                      f"entry_type = ? AND {TYPE_INDEXED}", (process, kind))
        if newest:
            out.keep.add(newest)
    for (data,) in conn.execute("SELECT data FROM entries WHERE process = ? AND entry_type = ? "
                                f"AND {TYPE_INDEXED}", (process, E.INCIDENT)):
        _incident_names(_json(data), out)
    return out


def _one(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> int:
    row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _nth_finish(conn: sqlite3.Connection, process: str, n: int) -> int:
    """The seq of ``process``'s n-th newest ``run_finished`` entry (0: fewer runs)."""
    return _one(conn, "SELECT seq FROM entries INDEXED BY sqlite_autoindex_entries_1 "
                "WHERE process = ? AND entry_type = ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
                (process, E.RUN_FINISHED, n - 1))


def _first_since(conn: sqlite3.Connection, process: str, cutoff: float, top: int) -> int:
    """The first seq (up to ``top``) of an entry made at or after ``cutoff``: a binary search
    by seq (entries are made in seq order), a few index lookups whatever the length."""

    def at(seq: int) -> tuple[int, float] | None:
        row = conn.execute("SELECT seq, ts FROM entries WHERE process = ? AND seq >= ? "
                           "ORDER BY seq LIMIT 1", (process, seq)).fetchone()
        return (int(row[0]), float(row[1])) if row else None

    low, high = 1, top
    while low < high:
        middle = (low + high) // 2
        found = at(middle)
        if found is None or found[1] >= cutoff:
            high = middle
        else:
            low = found[0] + 1
    return low


def _incident_names(data: Any, out: ProcessPlan) -> None:
    """The runs and events an ``incident`` entry names."""
    if not isinstance(data, dict):
        return
    incident = data.get("incident")
    if isinstance(incident, dict):
        out.incident_runs.update(str(r) for r in incident.get("run_ids") or ())
    for holder in (data, data.get("history_item")):
        if isinstance(holder, dict):
            if holder.get("run_id"):
                out.incident_runs.add(str(holder["run_id"]))
            if holder.get("event_id"):
                out.incident_events.add(str(holder["event_id"]))


def _json(data: Any) -> Any:
    try:
        return json.loads(data)
    except (TypeError, ValueError):
        return None


class _Needs:
    """What the indexes say is still needed, asked in the deletion's transaction."""

    def __init__(self, conn: sqlite3.Connection, work: ProcessPlan) -> None:
        self.conn = conn
        self.work = work

    def _has(self, sql: str, key: str) -> bool:
        return self.conn.execute(sql, (self.work.process, key)).fetchone() is not None

    def queued(self, event_id: str) -> bool:
        return self._has("SELECT 1 FROM pending WHERE process = ? AND event_id = ?", event_id)

    def dead(self, event_id: str) -> bool:
        return self._has("SELECT 1 FROM dead_letters WHERE process = ? AND event_id = ?",
                         event_id)

    def event(self, event_id: str) -> bool:
        """An event not settled yet (or an incident's)."""
        return (event_id in self.work.incident_events or self.queued(event_id)
                or self.dead(event_id)
                or self._has("SELECT 1 FROM open_runs WHERE process = ? AND event_id = ?",
                             event_id))

    def run(self, run_id: str) -> bool:
        """A run that is open, unfinished or not old enough, or whose event is needed."""
        if run_id in self.work.incident_runs or self._has(
                "SELECT 1 FROM open_runs WHERE process = ? AND run_id = ?", run_id):
            return True
        end = self.conn.execute(
            f"SELECT seq, data FROM entries INDEXED BY entries_by_run WHERE {RUN_TERM} AND "
            "process = ? AND entry_type = ? ORDER BY seq DESC LIMIT 1",
            (*runs_params([run_id]), self.work.process, E.RUN_FINISHED)).fetchone()
        if end is None or int(end[0]) >= self.work.below:
            return True
        data = _json(end[1])
        event_id = data.get("event_id") if isinstance(data, dict) else None
        return not isinstance(event_id, str) or self.event(event_id)

    def entry(self, seq: int, kind: str, data: Any) -> bool:
        """A non-run entry that must stay."""
        if seq in self.work.keep:
            return True
        if kind in SUPERSEDED:
            return False
        if kind not in OF_EVENTS:
            return True  # lineage, incidents, profiles, and any type not known here
        body = _json(data)
        if not isinstance(body, dict):
            return True
        if kind == E.REDELIVERED:
            ids = body.get("event_ids") or []
            return any(self.queued(str(i)) or self.dead(str(i)) for i in ids)
        event_id = body.get("event_id")
        if not isinstance(event_id, str):
            return True
        return self.dead(event_id) if kind == E.DEAD_LETTERED else self.event(event_id)


def remove_window(conn: sqlite3.Connection, work: ProcessPlan, after: int, *,
                  batch: int = BATCH, examine: int | None = None) -> WindowResult:
    """One transaction: examine ``work.process``'s entries after seq ``after`` and below the
    bound (``examine`` of them, ``batch`` by default), remove what nothing needs (about
    ``batch`` entries at most: a run goes whole) and raise the low-water mark. Runs on the
    writing connection (the writer thread, or a compaction that holds the journal)."""
    started = time.perf_counter()
    result = WindowResult(last_seq=after)
    if conn.in_transaction:  # a failed job's leftovers: start clean
        conn.execute("ROLLBACK")
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = conn.execute(
            "SELECT id, seq, entry_type, run_id, data FROM entries INDEXED BY "
            "sqlite_autoindex_entries_1 WHERE process = ? AND seq > ? AND seq < ? "
            "ORDER BY seq LIMIT ?", (work.process, after, work.below, examine or batch)
        ).fetchall()
        result.done = len(rows) < (examine or batch)
        needs = _Needs(conn, work)
        decided: dict[str, bool] = {}  # run id -> removed
        loose: list[tuple[int]] = []
        top = 0
        for rowid, seq, kind, run_id, data in rows:
            if result.entries + len(loose) >= batch:
                result.done = False
                break
            result.last_seq = int(seq)
            if run_id is not None and kind not in LINEAGE:
                if run_id not in decided:
                    decided[run_id] = not needs.run(run_id)
                    if decided[run_id]:
                        count, high = _remove_run(conn, work, str(run_id))
                        result.entries += count
                        result.runs += 1
                        top = max(top, high)
            elif not needs.entry(int(seq), str(kind), data):
                loose.append((int(rowid),))
                top = max(top, int(seq))
        conn.executemany("DELETE FROM entries WHERE id = ?", loose)
        result.entries += len(loose)
        if result.entries:
            record_mark(conn, work.process, top + 1, result.entries, time.time())
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    result.seconds = time.perf_counter() - started
    return result


def _remove_run(conn: sqlite3.Connection, work: ProcessPlan, run_id: str) -> tuple[int, int]:
    """Remove a run's entries below the bound: (how many, the highest seq). Found by the run
    index (a DELETE with these terms would range-scan the process's entries instead)."""
    rows = conn.execute(
        f"SELECT id, seq FROM entries INDEXED BY entries_by_run WHERE {RUN_TERM} AND "
        "process = ? AND seq < ? AND entry_type NOT IN ("
        + ", ".join("?" * len(LINEAGE)) + ")",
        (*runs_params([run_id]), work.process, work.below, *LINEAGE)).fetchall()
    conn.executemany("DELETE FROM entries WHERE id = ?", [(row[0],) for row in rows])
    return len(rows), max((int(row[1]) for row in rows), default=0)

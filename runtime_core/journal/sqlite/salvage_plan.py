"""What a salvaged journal holds for each process, decided from what a damaged one still had
(``rescue``): which events are queued again, which runs stay open, which wait for an operator,
and which entries were lost.

The rule is the one recovery keeps after a crash: nothing is dispatched again unless the
journal shows it is safe. A queued event runs again only when it is known that no run of it
wrote anything (the open runs table was read whole, or no entry after its acceptance was
lost); an open run resumes only when none of its entries can have been lost. Any other event
whose outcome can no longer be known gets a run that waits for an operator with
``unknown_write_outcome``, as a write cut off by a crash does: ``promptui reconcile`` and the
room settle it. Where the entries (each one checked against its checksum) and the index tables
disagree, the entries win; the tables say only what lost entries no longer can.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from runtime_core.journal.entry import EntryType, event_done
from runtime_core.journal.left_out import STARTED
from runtime_core.journal.provider import IndexRules
from runtime_core.journal.sqlite.rescue import EntryRow, Rescued

#: The steps a run that lost the end of its journal is taken to have made at most: the call it
#: waits on is numbered past them, so its idempotency key (``run_id:step``) is not one a lost
#: write already used.
UNKNOWN_TAIL_STEPS = 10_000


@dataclass(slots=True)
class Wait:
    """A run the salvage puts to wait for an operator; ``run_id`` is new when the journal
    kept no open run of the event (``started`` 0)."""

    run_id: str
    event_id: str
    attempt: int
    started: int  # the seq of its run_started entry (0: written by the salvage)
    step: int  # the step of the call it waits on
    cause: str


@dataclass(slots=True)
class ProcessPlan:
    """One process of the salvaged journal."""

    name: str
    rows: dict[int, EntryRow]  # seq -> entry, as rescued
    head: int  # the last seq it had, as far as is known
    tail_known: bool  # the head was read: entries lost at the end are counted
    lost: list[tuple[int, int]] = field(default_factory=list)  # seq ranges, both ends in
    queued: dict[str, tuple[int, str]] = field(default_factory=dict)  # event -> (ord, event)
    requeued: list[str] = field(default_factory=list)  # events that run again by themselves
    open_runs: dict[str, tuple[str, int, str, int]] = field(default_factory=dict)
    waits: list[Wait] = field(default_factory=list)
    dead: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    dead_lost: list[str] = field(default_factory=list)  # dead letters whose event was lost
    payload_lost: list[str] = field(default_factory=list)  # unfinished, their payload lost
    settled_end_lost: list[str] = field(default_factory=list)  # settled; how is lost

    @property
    def lost_count(self) -> int:
        """How many seqs were lost."""
        return sum(last - first + 1 for first, last in self.lost)

    def lost_after(self, seq: int) -> bool:
        """Whether an entry after ``seq`` may be lost."""
        return not self.tail_known or any(last > seq for _, last in self.lost)

    def steps_lost_after(self, seq: int) -> int:
        """At most how many steps of a run could hide in the entries lost after ``seq`` (each
        step writes one entry at least; an end that was never read hides any number)."""
        lost = sum(last - max(first, seq + 1) + 1 for first, last in self.lost if last > seq)
        return lost + (UNKNOWN_TAIL_STEPS if not self.tail_known else 0)

    @property
    def finished_runs(self) -> int:
        """The runs whose end was rescued."""
        return sum(1 for r in self.rows.values() if r.entry_type == EntryType.RUN_FINISHED)


@dataclass(slots=True)
class _Event:
    accepted: int = 0
    state: str = ""  # queued, running, done, dead, cleared
    run: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class _Run:
    event_id: str
    attempt: int
    started: int
    waiting: bool = False
    finished: bool = False
    step: int = 0


def plan(rescued: Rescued, source: str, new_id: Any) -> list[ProcessPlan]:
    """Each process's plan; ``new_id()`` makes a run id, ``source`` names the damaged file
    in the causes."""
    return [_plan_process(rescued, name, source, new_id) for name in rescued.processes()]


def _plan_process(rescued: Rescued, name: str, source: str, new_id: Any) -> ProcessPlan:
    rows = rescued.entries.get(name, {})
    top = max(rows, default=0)
    head = max(rescued.heads.get(name, 0), top)
    out = ProcessPlan(name, rows, head, name in rescued.heads)
    out.lost = _gaps(rows, head, rescued.retained.get(name, (0, 0, 0.0))[0])
    events, runs = _fold(rows)
    pending = {e: v for (p, e), v in rescued.pending.items() if p == name}
    dead = {e: v for (p, e), v in rescued.dead.items() if p == name}
    table_runs = {r: v for (p, r), v in rescued.open_runs.items() if p == name}
    open_known = "open_runs" in rescued.complete
    run_of = _open_runs(out, runs, table_runs, open_known)
    known = set(pending) | set(dead) | set(run_of) | set(events)
    for event_id in sorted(known):
        event = events.get(event_id, _Event())
        if event_id in dead:
            out.dead[event_id] = dead[event_id]
        elif event_id in pending and event.state == "done":
            continue  # the queue kept a finished event (index damage): the entries win
        elif event_id in pending:
            _open(out, event_id, pending[event_id], run_of.get(event_id), event, False,
                  open_known, source, new_id)
        elif event.state in ("queued", "running", ""):
            if "pending" in rescued.complete:  # not queued at the last commit: its end is lost
                out.settled_end_lost.append(event_id)
                continue
            kept = _event_from(event, event_id)
            if kept is None:
                out.payload_lost.append(event_id)
            ord_ = (event.accepted or head + 1) * IndexRules.ORD_SCALE
            _open(out, event_id, (ord_, kept or _stub(event, event_id, rows)),
                  run_of.get(event_id), event, kept is None, open_known, source, new_id)
        elif event.state == "dead" and "dead_letters" not in rescued.complete:
            out.dead_lost.append(event_id)
    return out


def _open_runs(out: ProcessPlan, runs: dict[str, _Run],
               table: dict[str, tuple[str, int, str, int]], open_known: bool
               ) -> dict[str, tuple[str, _Run]]:
    """The open run of each event. The entries are checked, the index is not, so they win:
    a run they start and never finish is open unless its end may be in entries that were
    lost and the open runs table, read whole, no longer has it; a run of the table is open
    unless the entries finish it."""
    found: dict[str, tuple[str, _Run]] = {}
    for run_id, (event_id, attempt, state, started) in table.items():
        fold = runs.get(run_id)
        if fold is not None and fold.finished:
            continue
        fold = fold or _Run(event_id, attempt, started)
        fold.waiting = state == "waiting"
        found[event_id] = (run_id, fold)
    for run_id, fold in runs.items():
        if fold.finished or run_id in table:
            continue
        if open_known and out.lost_after(fold.started):  # it ended in what was lost
            continue
        if fold.event_id not in found or found[fold.event_id][1].started < fold.started:
            found[fold.event_id] = (run_id, fold)
    return found


def _open(out: ProcessPlan, event_id: str, queued: tuple[int, str],
          open_run: tuple[str, _Run] | None, event: _Event, payload_lost: bool,
          open_known: bool, source: str, new_id: Any) -> None:
    """An event still to settle: queued again, its open run kept, or a run that waits."""
    out.queued[event_id] = queued
    where = f"salvaged from {source}"
    if open_run is not None:
        run_id, run = open_run
        if not payload_lost and not out.lost_after(run.started - 1):
            out.open_runs[run_id] = (event_id, run.attempt,
                                     "waiting" if run.waiting else "running", run.started)
            return
        cause = (f"{where}: this event's payload was lost" if payload_lost else
                 f"{where}: entries of this run after {out.name}:{run.started} were lost, "
                 "so what it did next is unknown")
        step = run.step + 1 + out.steps_lost_after(run.started)
        # A start that was lost itself is written again by the salvage (the same run).
        started = run.started if run.started in out.rows else 0
        out.waits.append(Wait(run_id, event_id, run.attempt, started, step, cause + _ADVICE))
        return
    accepted = queued[0] // IndexRules.ORD_SCALE
    if not payload_lost and (open_known or not out.lost_after(accepted)):
        out.requeued.append(event_id)
        return
    cause = (f"{where}: this event's payload was lost" if payload_lost else
             f"{where}: entries after this event was accepted ({out.name}:{accepted}) were "
             "lost, so a run of it may have started and written")
    out.waits.append(Wait(new_id(), event_id, 1, 0, 1, cause + _ADVICE))


_ADVICE = ("; check the outside systems, then reconcile: 'failed' moves the event to the dead "
           "letters (redeliver it there to run it from the start), 'applied' or 'not_applied' "
           "lets the run go on")


def _gaps(rows: dict[int, EntryRow], head: int, retained: int) -> list[tuple[int, int]]:
    """The seqs up to ``head`` that were lost, as ranges; those below ``retained`` (the
    process's low-water mark) were removed by retention on purpose, and are not."""
    gaps: list[tuple[int, int]] = []
    expected = 1
    for seq in [*sorted(rows), head + 1]:
        first = max(expected, retained)
        if seq > first:
            gaps.append((first, seq - 1))
        expected = max(expected, seq + 1)
    return gaps


def _fold(rows: dict[int, EntryRow]) -> tuple[dict[str, _Event], dict[str, _Run]]:
    """Each event's last known state and each run's, from the entries that were read."""
    events: dict[str, _Event] = {}
    runs: dict[str, _Run] = {}
    for seq in sorted(rows):
        row = rows[seq]
        data, kind, run_id = row.fields, row.entry_type, row.run_id
        step = data.get("step")
        if run_id and run_id in runs and isinstance(step, int):
            runs[run_id].step = max(runs[run_id].step, step)
        if kind == EntryType.EVENT_ACCEPTED and isinstance(data.get("event_id"), str):
            event = events.setdefault(data["event_id"], _Event())
            event.accepted, event.state, event.fields = seq, "queued", data
        elif kind == EntryType.TOOL_INTENT and run_id and isinstance(data.get(STARTED), dict) \
                and isinstance(data[STARTED].get("event_id"), str):
            _started(events, runs, run_id, data[STARTED], seq)  # carried by its first intent
        elif kind == EntryType.RUN_STARTED and run_id and isinstance(data.get("event_id"), str):
            _started(events, runs, run_id, data, seq)
        elif kind in (EntryType.RUN_WAITING, EntryType.RECONCILED, EntryType.EVIDENCE) \
                and run_id in runs:
            runs[run_id].waiting = kind == EntryType.RUN_WAITING
        elif kind == EntryType.RUN_FINISHED and isinstance(data.get("event_id"), str):
            if run_id in runs:
                runs[run_id].finished = True
            event = events.setdefault(data["event_id"], _Event())
            event.state, event.run = ("done" if event_done(data) else "queued"), None
        elif kind == EntryType.DEAD_LETTERED and isinstance(data.get("event_id"), str):
            events.setdefault(data["event_id"], _Event()).state = "dead"
        elif kind == EntryType.REDELIVERED:
            for event_id in _ids(data.get("event_ids")):
                events.setdefault(event_id, _Event()).state = "queued"
        elif kind == EntryType.DEAD_LETTERS_CLEARED:
            ids = data.get("event_ids")
            for event_id, event in events.items():
                if event.state == "dead" and (ids is None or event_id in _ids(ids)):
                    event.state = "cleared"
    return events, runs


def _started(events: dict[str, _Event], runs: dict[str, _Run], run_id: str,
             start: dict[str, Any], seq: int) -> None:
    """A run's start (a ``run_started`` entry's data, or the one a tool intent carries)."""
    attempt = start.get("attempt")
    runs[run_id] = _Run(start["event_id"], attempt if isinstance(attempt, int) else 1, seq)
    event = events.setdefault(start["event_id"], _Event())
    event.state, event.run = "running", run_id


def _ids(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _event_from(event: _Event, event_id: str) -> str | None:
    """The event as the queue keeps it, from its acceptance entry when the journal kept its
    payload there (level ``full``); None when it did not."""
    if "payload" not in event.fields:
        return None
    return json.dumps({"trigger_id": str(event.fields.get("trigger_id", "")),
                       "trigger_type": str(event.fields.get("trigger_type", "")),
                       "payload": event.fields["payload"], "event_id": event_id,
                       "metadata": {}}, separators=(",", ":"))


def _stub(event: _Event, event_id: str, rows: dict[int, EntryRow]) -> str:
    """An event whose payload was lost, as the queue keeps it: what its acceptance said,
    marked, so the run that waits on it shows where it came from."""
    at = rows[event.accepted].ts if event.accepted in rows else 0.0
    return json.dumps({"trigger_id": str(event.fields.get("trigger_id", "salvage")),
                       "trigger_type": str(event.fields.get("trigger_type", "")),
                       "payload": {}, "event_id": event_id,
                       "timestamp": datetime.fromtimestamp(at, UTC).isoformat(),
                       "metadata": {"salvage": "payload lost"}}, separators=(",", ":"))

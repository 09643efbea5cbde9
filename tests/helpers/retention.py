"""Journal histories for the retention tests: one process's life written straight to a
SQLiteJournal in the shapes the recorder writes (events accepted, runs that succeed, fail,
die, stay open or wait, checkpoints, context updates, redeliveries, incidents, a rewind), with
timestamps one ``step`` apart, and what a restart takes back from such a journal."""

from __future__ import annotations

import shutil
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime_core.journal import EntryType, JournalEntry, SQLiteJournal
from runtime_core.journal.recorder import ProcessRecorder
from runtime_core.runs.recovery import recover_process
from runtime_core.triggers.base import DELIVERY_KEY, TriggerEvent

E = EntryType


@dataclass
class History:
    """Writes one process's entries to ``journal``; remembers what it left open."""

    journal: SQLiteJournal
    process: str = "p"
    ts: float = field(default_factory=lambda: time.time() - 100_000.0)
    step: float = 10.0
    context: dict[str, Any] = field(default_factory=dict)
    invocations: int = 0
    queued: list[str] = field(default_factory=list)  # accepted, no run going, not dead
    dead: list[str] = field(default_factory=list)
    open_runs: list[str] = field(default_factory=list)
    finished: list[tuple[str, str]] = field(default_factory=list)  # (run id, event id)
    keys: list[str] = field(default_factory=list)  # delivery keys accepted
    runs: int = 0
    incidents: int = 0  # incident entries written

    def put(self, kind: str, data: dict[str, Any], run_id: str | None = None,
            attachment: Any = None) -> JournalEntry:
        self.ts += self.step
        entry = JournalEntry(self.process, kind, data, process_id=f"{self.process}-1",
                             run_id=run_id, timestamp=self.ts)
        self.journal.submit(entry, attachment=attachment)
        return entry

    def accept(self, key: str | None = None) -> str:
        metadata = {DELIVERY_KEY: key} if key else {}
        event = TriggerEvent("t", "manual", {"n": len(self.queued)}, metadata=metadata)
        self.put(E.EVENT_ACCEPTED, {"event_id": event.event_id, "trigger_id": "t",
                                    "trigger_type": "manual"}, attachment=event.to_dict())
        self.queued.append(event.event_id)
        if key:
            self.keys.append(key)
        return event.event_id

    def run(self, outcome: str, tools: int = 1) -> str | None:
        """Run the oldest queued event: ``ok``, ``retry`` (failed, still queued), ``dead``
        (failed, dead-lettered), ``open`` (cut off in a write), ``evidence`` (waiting)."""
        if not self.queued:
            return None
        event_id = self.queued[0]
        self.runs += 1
        run_id = f"{self.process}-r{self.runs}"
        messages = [{"role": "user", "content": f"goal {self.runs}"},
                    {"role": "assistant", "content": f"done {self.runs}"}]
        if outcome == "ok" and tools == 0:  # the folded shape: the end alone
            self.queued.pop(0)
            self._finish(run_id, event_id, "succeeded", True, messages,
                         started={"attempt": 1, "usage": [{"step": 1, "turn": 1}]})
            return run_id
        self.put(E.RUN_STARTED, {"event_id": event_id, "attempt": 1}, run_id)
        for step in range(1, tools + 1):
            call = {"name": "book", "args": {"n": step}, "call_id": f"c{step}"}
            self.put(E.MODEL_USAGE, {"step": step, "turn": step, "tool_calls": [call],
                                     "reply": ""}, run_id)
            self.put(E.TOOL_INTENT, {"step": step, "tool": "book", "call_id": f"c{step}",
                                     "effect": "write", "args": call["args"],
                                     "idempotency_key": f"{run_id}:{step}"}, run_id)
            if outcome == "open" and step == tools:
                self.queued.pop(0)
                self.open_runs.append(run_id)
                return run_id
            key = f"k{self.runs}"
            self.context[key] = step
            self.put(E.TOOL_RESULT, {"step": step, "tool": "book", "call_id": f"c{step}",
                                     "ok": True, "result": "booked", "updates": {key: step}},
                     run_id)
        if outcome == "evidence":
            self.queued.pop(0)
            self.open_runs.append(run_id)
            self.put(E.RUN_WAITING, {"step": tools, "tool": "", "reply": "done",
                                     "reason": "missing_completion_evidence",
                                     "missing": "a receipt"}, run_id)
            return run_id
        if outcome == "ok":
            self.queued.pop(0)
            self._finish(run_id, event_id, "succeeded", True, messages)
        elif outcome == "retry":
            self._finish(run_id, event_id, "failed", False, messages)
        else:  # dead
            self.queued.pop(0)
            self._finish(run_id, event_id, "failed", False, messages)
            event = TriggerEvent("t", "manual", {}, event_id=event_id)
            self.put(E.DEAD_LETTERED, {"event_id": event_id, "trigger_type": "manual",
                                       "reason": "retries_exhausted", "error": "boom",
                                       "attempts": 1}, attachment=event.to_dict())
            self.dead.append(event_id)
        return run_id

    def _finish(self, run_id: str, event_id: str, state: str, done: bool,
                messages: list[dict[str, Any]], started: dict[str, Any] | None = None) -> None:
        data: dict[str, Any] = {"event_id": event_id, "state": state, "event_done": done,
                                "messages": messages}
        if started is not None:
            data["started"] = started
        self.put(E.RUN_FINISHED, data, run_id)
        self.finished.append((run_id, event_id))
        if state == "succeeded":
            self.invocations += 1

    def checkpoint(self) -> None:
        self.put(E.CHECKPOINT, {"context_state": dict(self.context), "lifecycle_state":
                                "running", "invocation_count": self.invocations})

    def update(self, key: str, value: Any) -> None:
        self.context[key] = value
        self.put(E.CONTEXT_UPDATE, {"key": key, "value": value, "source": "test"})

    def transition(self) -> None:
        self.put(E.STATE_TRANSITION, {"from_state": "running", "to_state": "running",
                                      "reason": "test"})

    def redeliver(self) -> None:
        if self.dead:
            self.put(E.REDELIVERED, {"event_ids": list(self.dead)})
            self.queued.extend(self.dead)
            self.dead.clear()

    def clear_dead(self) -> None:
        if self.dead:
            self.put(E.DEAD_LETTERS_CLEARED, {"event_ids": list(self.dead)})
            self.dead.clear()

    def incident(self) -> None:
        """An incident naming the newest finished run and its event."""
        if self.finished:
            run_id, event_id = self.finished[-1]
            self.incidents += 1
            self.put(E.INCIDENT, {"action": "run_linked", "run_id": run_id,
                                  "event_id": event_id,
                                  "incident": {"incident_id": f"i-{run_id}",
                                               "run_ids": [run_id]}})

    def rewind(self) -> None:
        self.context = {"rewound": True}
        self.put(E.REWIND, {"target": f"{self.process}:1", "context_state": dict(self.context),
                            "conversation": [{"role": "user", "content": "before"}]})
        self.checkpoint()


def copy_journal(source: Path, target: Path) -> Path:
    """A copy of a closed journal file (its WAL folded in)."""
    with closing(sqlite3.connect(source)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(source, target)
    return target


async def recovered(path: Path, process: str, max_messages: int) -> dict[str, Any]:
    """What a restart of ``process`` takes back from the journal at ``path``, as plain data
    (the conversation as a process with ``conversation_max_messages`` keeps it)."""
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        recorder = ProcessRecorder(journal, process, f"{process}-1", "checkpoint")
        found = await recover_process(journal, recorder, process, max_messages)
        await journal.flush()
        if found is None:  # nothing journaled for it
            return {}
        conversation = found.conversation[-max_messages:] if max_messages else []
        # what the process keeps: with 0 none (replay reads "all" there, and counts it)
        summary = {**found.summary, "conversation_messages": len(conversation)}
        return {
            "summary": summary, "context": found.context_state, "conversation": conversation,
            "invocations": found.invocation_count, "checkpoint": found.checkpoint,
            "queued": [e.event_id for e in found.queued],
            "dead": [(d.event.event_id, d.reason) for d in found.dead],
            "dead_total": found.dead_total,
            "resumable": {k: (r.run.run_id, r.rebuild) for k, r in found.resumable.items()},
            "waiting": {k: (r.run.state, r.run.waiting_reason, r.rebuild)
                        for k, r in found.waiting.items()},
            "failed": [r.run.run_id for r in found.failed],
        }
    finally:
        await journal.close()


def entry_count(path: Path, process: str | None = None) -> int:
    with closing(sqlite3.connect(path)) as conn:
        if process is None:
            return int(conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
        return int(conn.execute("SELECT COUNT(*) FROM entries WHERE process = ?",
                                (process,)).fetchone()[0])

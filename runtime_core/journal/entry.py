"""JournalEntry and the entry types the runtime writes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


class EntryType:
    """The ``entry_type`` strings a journal holds, as constants: state transitions, events
    accepted, runs and their steps (model usage, tool intent and result), context updates,
    checkpoints, dead letters, restarts, rewinds, forks, incidents and the rest. Plain
    strings, so an entry of a type a newer version writes still reads."""

    STATE_TRANSITION = "state_transition"
    EVENT_ACCEPTED = "event_accepted"
    RUN_STARTED = "run_started"
    PROFILE = "profile"  # what runs under one configuration execute (policy, budget...): once
    MODEL_USAGE = "model_usage"
    TOOL_INTENT = "tool_intent"
    TOOL_RESULT = "tool_result"
    TOOL_INTERRUPTED = "tool_interrupted"
    TOOL_REFUSED = "tool_refused"
    CONTEXT_UPDATE = "context_update"
    RUN_WAITING = "run_waiting"
    RECONCILED = "reconciled"
    CONFIG_CHANGED = "config_changed"  # a run resumed under another configuration
    EVIDENCE = "evidence"  # evidence supplied, or the reply sent back to the model, by an operator
    ELICITATION_ASKED = "elicitation_asked"  # an MCP server asked the operator a question
    ELICITATION_ANSWERED = "elicitation_answered"  # the answer sent back (or the timeout's)
    RUN_FINISHED = "run_finished"
    DEAD_LETTERED = "dead_lettered"
    REDELIVERED = "redelivered"
    DEAD_LETTERS_CLEARED = "dead_letters_cleared"
    RESTART = "restart"
    RESTART_EXHAUSTED = "restart_exhausted"
    CHECKPOINT = "checkpoint"
    RECOVERED = "recovered"
    INSTRUCTIONS_UPDATED = "instructions_updated"
    SECRET_ACCESS = "secret_access"
    REWIND = "rewind"  # the state restored; the entries it skipped stay in the journal
    FORKED = "forked"  # the first entry of a process forked from another one's history
    IMPORTED = "imported"  # the first entry of a process imported from a reference journal
    INCIDENT = "incident"  # an incident opened, changed or got a run: its snapshot after
    SHUTDOWN = "shutdown"  # a service shutdown sealed the journal: the next start takes back
    # what was queued or running (nothing after it is journaled by that process object)
    LOST = "lost"  # written by a salvage where a damaged journal lost entries (a seq range)
    SALVAGED = "salvaged"  # closes a salvage: what was rescued and what was lost, per process


@dataclass(slots=True)
class JournalEntry:
    """One durable record. ``seq`` is assigned by the journal: 1, 2, 3... per process name.

    ``process`` is the process's name, the key entries are filed under. Given only
    ``process_id`` (the spec's form, ``JournalEntry(process_id="invoice-watcher", ...)``), that
    value names the process too."""

    process: str = ""
    entry_type: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    process_id: str = ""
    run_id: str | None = None
    timestamp: float = field(default_factory=time.time)
    seq: int = 0

    def __post_init__(self) -> None:
        if not self.process and self.process_id:
            self.process = self.process_id

    @property
    def entry_id(self) -> str:
        """``<process>:<seq>``: unique in a journal, and readable in logs and commands."""
        return f"{self.process}:{self.seq}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "process": self.process,
            "process_id": self.process_id,
            "seq": self.seq,
            "timestamp": self.timestamp,
            "entry_type": self.entry_type,
            "run_id": self.run_id,
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JournalEntry:
        return cls(
            process=str(data["process"]),
            entry_type=str(data["entry_type"]),
            data=dict(data.get("data") or {}),
            process_id=str(data.get("process_id", "")),
            run_id=data.get("run_id"),
            timestamp=float(data.get("timestamp", time.time())),
            seq=int(data.get("seq", 0)),
        )

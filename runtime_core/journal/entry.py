"""JournalEntry and the entry types the runtime writes."""

from __future__ import annotations

import time
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from typing import Any

#: The entry types the entry type index holds (SQLite schema 3 on, PostgreSQL schema 3 on):
#: the rare ones whose last entry a start, a rewind or a status looks up. A query for one of
#: them must say this very term too, or the database cannot tell that the partial index covers
#: it (both backends' ``read_sql`` do). A later change to this list is a new migration.
TYPES_INDEXED = ("state_transition", "profile", "config_changed", "dead_letters_cleared",
                 "restart", "restart_exhausted", "checkpoint", "recovered",
                 "instructions_updated", "rewind", "forked", "imported", "incident", "shutdown")
TYPE_INDEXED = "entry_type IN (" + ", ".join(f"'{t}'" for t in TYPES_INDEXED) + ")"


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


@dataclass(slots=True, eq=False)
class CheckpointEntry(JournalEntry):
    """A checkpoint entry, as ``last_checkpoint`` returns it. It also reads as the state it
    holds, the dict the reference runtime's ``last_checkpoint`` returned:
    ``cp["context_state"]``, ``cp.get("invocation_count")``, ``"budget" in cp``, ``dict(cp)``
    and ``cp == {...}`` all look at ``cp.data``. It is true even when that state is empty
    (None, not an empty dict, says there is no checkpoint)."""

    @classmethod
    def of(cls, entry: JournalEntry) -> CheckpointEntry:
        """The same entry, as a CheckpointEntry."""
        return cls(entry.process, entry.entry_type, entry.data, entry.process_id, entry.run_id,
                   entry.timestamp, entry.seq)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        """``data.get``: a key of the checkpoint's state, or ``default``."""
        return self.data.get(key, default)

    def keys(self) -> KeysView[str]:
        """The state's keys (so ``dict(cp)`` is the state)."""
        return self.data.keys()

    def values(self) -> ValuesView[Any]:
        """The state's values."""
        return self.data.values()

    def items(self) -> ItemsView[str, Any]:
        """The state's items."""
        return self.data.items()

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __bool__(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.data == dict(other)
        if isinstance(other, JournalEntry):
            return (self.process, self.entry_type, self.data, self.process_id, self.run_id,
                    self.timestamp, self.seq) == (other.process, other.entry_type, other.data,
                                                  other.process_id, other.run_id,
                                                  other.timestamp, other.seq)
        return NotImplemented


def event_done(data: dict[str, Any]) -> bool:
    """Whether a ``run_finished`` entry (its ``data``) settled its event, so that the event
    leaves the queue: its ``event_done`` when written, else (schema 8 on, where it is left out
    when the state says it) whether the run succeeded."""
    done = data.get("event_done")
    return bool(done) if done is not None else data.get("state") == "succeeded"

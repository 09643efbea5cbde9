"""What crosses the control plane: plain frozen dataclasses of strings, numbers and dicts,
never a runtime object, so a widget cannot reach into a process. The rewind plan and result
(journal/rewind_plan.py) are such values too and are offered here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from runtime_core.journal.entry import EntryType
from runtime_core.journal.rewind_plan import (
    ContextChange,
    OutsideEffect,
    RewindMode,
    RewindPlan,
    RewindResult,
)

__all__ = ["ENTRY_TYPES", "AttemptView", "ContextChange", "DeadLetterView", "IncidentView",
           "JournalEntryView", "OutsideEffect", "ProcessDetail", "ProcessSummary",
           "QueuedEventView", "RewindMode", "RewindPlan", "RewindResult", "RunView", "StepView",
           "WaitingRunView", "figures_note", "preview"]

PREVIEW_CHARS = 200
#: Every type the runtime journals, in EntryType's order (its lifecycle order): what a
#: journal entry's ``entry_type`` may be (the timeline's type filter offers these).
ENTRY_TYPES: tuple[str, ...] = tuple(value for key, value in vars(EntryType).items()
                                     if key.isupper() and isinstance(value, str))
#: A process row lists at most this many of its waiting runs (``waiting_runs`` counts all).
WAITING_LISTED = 100
#: Figures another node published longer ago than this are marked as old in the views (its
#: owner publishes every second when they change, every 2 s when they do not).
STALE_AFTER_S = 5.0


@dataclass(frozen=True, slots=True)
class WaitingRunView:
    """A run waiting for an operator, as its process's row lists it: ``promptui reconcile``
    or ``promptui answer`` (or the room's detail page) settles it, on any node."""

    run_id: str
    event_id: str
    reason: str  # unknown_write_outcome, missing_completion_evidence, elicitation
    write_in_flight: str = ""  # the write whose outcome is unknown: "tool (idempotency key)"
    started_at: float | None = None  # epoch seconds


@dataclass(frozen=True, slots=True)
class ProcessSummary:
    """One row of the process table."""

    name: str
    state: str
    suspend_reason: str
    queue_depth: int
    queue_capacity: int
    active_runs: int
    invocations: int
    failure_streak: int
    restarts: int
    dead_letters: int
    waiting_runs: int
    pending_retries: int
    health: str  # "off", "ok" or "<n> anomalies"
    budget_use: float | None  # the highest share of any limit used, None when off
    mission_state: str
    last_run_at: float | None  # epoch seconds of the last finished run
    last_outcome: str
    journal_fault: str = ""  # the journal cannot be written now: events are refused
    #: A damaged journal of this process's file was moved aside (on_damage: start_fresh):
    #: where it lies and what it held, for each one, one line each.
    journal_left_behind: tuple[str, ...] = ()
    draining: bool = False  # stopping: the runs in flight (active_runs) may finish first
    node: str | None = None  # scale-out: the node that owns it (None: one box, or nobody now)
    #: The runs waiting for an operator (the first WAITING_LISTED of them).
    waiting: tuple[WaitingRunView, ...] = ()
    #: Scale-out, a process another node runs: how many seconds ago its owner last published
    #: these figures (None: read live on the node that answered, or no figures known).
    as_of_age_s: float | None = None
    #: False when no node published figures for it yet: its counts are zeros standing in.
    figures_known: bool = True
    #: While suspended: who suspended it (health, budget, operator, idle, rewind, manual)
    #: and since when (epoch seconds); ``suspension_kept``: a restart keeps it.
    suspended_by: str = ""
    suspended_since: float | None = None
    suspension_kept: bool = False


@dataclass(frozen=True, slots=True)
class StepView:
    index: int
    kind: str  # "model", "tool", "refused"
    name: str
    args: dict[str, Any]
    result: str
    ok: bool
    duration_ms: float


@dataclass(frozen=True, slots=True)
class RunView:
    run_id: str
    event_id: str
    trigger_type: str
    state: str
    reason: str
    error: str
    reply: str
    attempt: int
    started_at: float | None
    finished_at: float | None
    waiting_reason: str
    write_in_flight: str
    steps: tuple[StepView, ...] = ()
    identity: dict[str, Any] = field(default_factory=dict)  # profile, goal, policy, digest...
    config_changed: str = ""  # "started -> now" digests when resumed under another config
    missing_evidence: str = ""  # why the completion evaluator is not satisfied yet
    trace_id: str = ""  # its OpenTelemetry trace (32 hex digits) when runs are traced


@dataclass(frozen=True, slots=True)
class QueuedEventView:
    event_id: str
    trigger_type: str
    trigger_id: str
    timestamp: float
    payload_preview: str


@dataclass(frozen=True, slots=True)
class AttemptView:
    """One line of a dead letter's history: an attempt that failed (``outcome`` "failed,
    retried"), or the letter's dead-lettering (its reason), with the error and when (ISO)."""

    attempt: int
    at: str
    outcome: str
    error: str


@dataclass(frozen=True, slots=True)
class DeadLetterView:
    """A dead letter; ``history``: every attempt of its event and every time it was
    dead-lettered, newest first, across redeliveries and restarts."""

    event_id: str
    trigger_type: str
    reason: str
    error: str
    attempts: int
    dead_lettered_at: str  # ISO time
    payload_preview: str
    history: tuple[AttemptView, ...] = ()


@dataclass(frozen=True, slots=True)
class ProcessDetail:
    summary: ProcessSummary
    queued: tuple[QueuedEventView, ...]
    dead_letters: tuple[DeadLetterView, ...]
    runs: tuple[RunView, ...]  # waiting runs first, then running, then newest finished
    context: dict[str, Any]
    conversation: tuple[dict[str, Any], ...]
    governance: dict[str, Any]  # health / budget / mission / secrets / inbox / memory
    config: dict[str, Any]  # the configuration as loaded (secret references, never values)
    triggers: tuple[dict[str, Any], ...] = field(default=())
    servers: tuple[dict[str, Any], ...] = field(default=())  # MCP: state and tools with effects


@dataclass(frozen=True, slots=True)
class JournalEntryView:
    """One line of a process's timeline."""

    entry_id: str  # "<process>:<seq>"
    seq: int
    entry_type: str
    run_id: str
    timestamp: float
    summary: str
    step: int | None = None  # the run's step it records (model turns, tool intents, results)


@dataclass(frozen=True, slots=True)
class IncidentView:
    """One incident of one process. A repair action sends back the ``generation`` and
    ``version`` it was decided on, and is refused when the incident moved since."""

    process: str
    incident_id: str
    state: str  # open, resolved (by an operator), recovered (by a recovered_when event)
    generation: int
    version: int
    fingerprint: str  # the fingerprint's value, as text
    opened_at: float  # the current generation's
    last_seen: float
    occurrences: int  # in the current generation
    run_ids: tuple[str, ...]  # oldest first
    closed_at: float | None = None
    resolved_by: str = ""
    note: str = ""
    last_payload: str = ""  # a preview of the last payload seen, secrets redacted


def figures_note(row: ProcessSummary) -> str:
    """What a view says of a row's figures: "" when they are current (read here, or published
    by their owner within STALE_AFTER_S), "no figures yet" (its counts are zeros standing in),
    or "as of 12s ago" (its owner last published them then: silent, or between owners)."""
    if not row.figures_known:
        return "no figures yet"
    seconds = row.as_of_age_s
    if seconds is None or seconds < STALE_AFTER_S:
        return ""
    shown = f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f}m" \
        if seconds < 7200 else f"{seconds / 3600:.0f}h"
    return f"as of {shown} ago"


def attempt_views(history: list[dict[str, Any]], redact: Any = str) -> tuple[AttemptView, ...]:
    """A dead letter's history (delivery/dead_letters.py: history_of) as views; ``redact``
    hides secrets in the errors."""
    return tuple(AttemptView(int(h.get("attempt") or 0), str(h.get("at") or ""),
                             str(h.get("outcome") or ""), redact(str(h.get("error") or "")))
                 for h in history)


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str,
                                                            ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def step_of(data: Any) -> int | None:
    """The run step a journal entry records (its data's ``step``), when it records one."""
    step = data.get("step") if isinstance(data, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None

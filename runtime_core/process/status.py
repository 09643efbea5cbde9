"""ProcessStatus: a typed, frozen snapshot of one process, and its spec-shaped dict view.

Readers (the control plane, open mode) use the attributes, so a renamed field fails the type
check instead of a string lookup at run time; ``as_dict()`` is what ``AgentProcess.status()``
returns, with the keys the spec lists (optional ones only when their feature is on)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime_core.lifecycle import ProcessState as S
from runtime_core.process.core import PartStatus, ProcessCore, TriggerStatus

_OPTIONAL = ("servers", "recovered", "budget", "active_secrets", "inbox", "memory",
             "mission_state", "open_incidents", "health_anomalies", "health", "journal_fault",
             "journal_left_behind", "draining", "suspension")


@dataclass(frozen=True, slots=True)
class ProcessStatus:
    name: str
    process_id: str
    state: str
    suspend_reason: str | None
    execution_mode: str
    invocation_count: int
    consecutive_failures: int
    restart_count: int
    journal_enabled: bool
    trigger_count: int
    dynamic_trigger_count: int
    triggers: tuple[TriggerStatus, ...]
    custom_tool_count: int
    rebuild_count: int
    spawned_process_count: int
    conversation_messages: int
    has_memory: bool
    queue_size: int
    queue_capacity: int
    dead_letter_count: int  # the spec's: the entries in process.dead_letters
    #: Every dead letter the process has: the journal keeps those the list let go (at least
    #: dead_letter_count); redelivery and the control room's pages reach all of them.
    dead_letter_total: int
    filtered_count: int
    pending_retries: int
    uptime_seconds: float | None
    hook_count: int
    active_runs: int
    waiting_runs: int
    servers: tuple[dict[str, Any], ...] | None = None  # MCP servers: state and tools
    recovered: dict[str, Any] | None = None  # only after a journal recovery
    budget: dict[str, Any] | None = None  # remaining limits
    active_secrets: int | None = None
    inbox: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    mission_state: str | None = None
    open_incidents: int | None = None
    health_anomalies: int | None = None
    health: dict[str, Any] | None = None
    journal_fault: str | None = None  # why the journal cannot be written now (degraded)
    #: Damaged journals of its file moved aside at start (on_damage: start_fresh): one line
    #: each, where it lies and what it held.
    journal_left_behind: list[str] | None = None
    draining: dict[str, Any] | None = None  # a stop letting runs finish: runs left, deadline
    #: While suspended: by whom (health, budget, operator, idle...), why, since (epoch s),
    #: and whether a restart keeps it.
    suspension: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name, "process_id": self.process_id, "state": self.state,
            "suspend_reason": self.suspend_reason, "execution_mode": self.execution_mode,
            "invocation_count": self.invocation_count,
            "consecutive_failures": self.consecutive_failures,
            "restart_count": self.restart_count, "journal_enabled": self.journal_enabled,
            "trigger_count": self.trigger_count,
            "dynamic_trigger_count": self.dynamic_trigger_count,
            "triggers": [t.as_dict() for t in self.triggers],
            "custom_tool_count": self.custom_tool_count, "rebuild_count": self.rebuild_count,
            "spawned_process_count": self.spawned_process_count,
            "conversation_messages": self.conversation_messages, "has_memory": self.has_memory,
            "queue_size": self.queue_size, "dead_letter_count": self.dead_letter_count,
            "dead_letter_total": self.dead_letter_total,
            "filtered_count": self.filtered_count, "pending_retries": self.pending_retries,
            "uptime_seconds": self.uptime_seconds, "hook_count": self.hook_count,
            "active_runs": self.active_runs, "waiting_runs": self.waiting_runs,
        }
        for key in _OPTIONAL:
            value = getattr(self, key)
            if value is not None:
                data[key] = list(value) if key == "servers" else value
        return data


def build_status(core: ProcessCore, *, triggers: tuple[TriggerStatus, ...], trigger_count: int,
                 filtered_count: int, spawned: int,
                 servers: list[dict[str, Any]] | None) -> ProcessStatus:
    uptime = None
    if core.started_at is not None and core.state in (S.RUNNING, S.SUSPENDED, S.STARTING):
        uptime = round(core.clock.monotonic() - core.started_at, 3)
    extra = PartStatus()
    for part in core.parts:
        part.report(extra)
    delivery = core.delivery
    return ProcessStatus(
        name=core.name, process_id=core.process_id, state=core.state.value,
        suspend_reason=core.suspend_reason, execution_mode=core.config.execution_mode,
        invocation_count=core.invocation_count,
        consecutive_failures=core.consecutive_failures, restart_count=core.restart_count,
        journal_enabled=core.recorder is not None, trigger_count=trigger_count,
        dynamic_trigger_count=sum(1 for t in triggers if t.source == "dynamic"),
        triggers=triggers, custom_tool_count=0, rebuild_count=core.rebuild_count,
        spawned_process_count=spawned, conversation_messages=len(core.conversation),
        has_memory=core.config.memory.enabled, queue_size=delivery.queue_size,
        queue_capacity=core.config.queue_size, dead_letter_count=len(delivery.dead_letters),
        dead_letter_total=delivery.dead_letter_total,
        filtered_count=filtered_count, pending_retries=delivery.pending_retries,
        uptime_seconds=uptime, hook_count=len(core.hooks.own),
        active_runs=len(core.inflight), waiting_runs=len(core.waiting),
        servers=tuple(servers) if servers is not None else None, recovered=core.recovered,
        budget=extra.budget, active_secrets=extra.active_secrets, inbox=extra.inbox,
        memory=extra.memory, mission_state=extra.mission_state,
        open_incidents=extra.open_incidents, health_anomalies=extra.health_anomalies,
        health=extra.health, journal_fault=core.journal_fault,
        journal_left_behind=[kept.describe() for kept in getattr(
            core.journal, "left_behind", None) or ()] or None, draining=core.draining,
        suspension=core.suspension.as_dict() if core.suspension is not None
        and core.state is S.SUSPENDED else None)

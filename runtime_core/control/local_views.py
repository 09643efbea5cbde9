"""Views of an in-process runtime's objects: a process as a table row or a detail page, a run,
an incident, a configuration as it may be shown. Every text that could hold a secret goes
through the process's redaction first (control/redaction.py: its secret scope's values and the
credentials its configuration holds)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from runtime_core.control.redaction import redact_any, redactor, shown_config
from runtime_core.control.views import (
    WAITING_LISTED,
    DeadLetterView,
    IncidentView,
    ProcessDetail,
    ProcessSummary,
    QueuedEventView,
    RunView,
    StepView,
    WaitingRunView,
    attempt_views,
    preview,
)
from runtime_core.delivery.dead_letters import history_of
from runtime_core.incidents.book import Incident, value_text
from runtime_core.process.process import AgentProcess
from runtime_core.runs.run import Run, StepRecord
from runtime_core.triggers.base import TriggerEvent

Redact = Callable[[str], str]
__all__ = ["redact_any", "shown_config"]  # also offered here (control/__init__.pyi)


def _budget_use(remaining: dict[str, Any] | None, limits: dict[str, Any]) -> float | None:
    """The highest share used of any configured limit, from the remaining counts."""
    if remaining is None:
        return None
    shares = []
    for key, limit in limits.items():
        left = remaining.get(key)
        if isinstance(limit, int | float) and limit > 0 and isinstance(left, int | float):
            shares.append(max(0.0, (limit - left) / limit))
    return max(shares, default=0.0)


def _step_view(step: StepRecord) -> StepView:
    return StepView(step.index, step.kind, step.name, dict(step.args or {}), step.result,
                    step.ok, step.duration_ms)


def _run_view(run: Run) -> RunView:
    return RunView(run.run_id, run.event.event_id, run.event.trigger_type, run.state.value,
                   run.reason, run.error, run.reply, run.attempt, run.started_at,
                   run.finished_at, run.waiting_reason, run.write_in_flight,
                   tuple(_step_view(s) for s in run.steps),
                   run.identity.to_dict() if run.identity is not None else {},
                   run.config_changed, run.missing_evidence, run.trace_id)


def redact_run(run: RunView, redact: Redact) -> RunView:
    return replace(run, reply=redact(run.reply), error=redact(run.error),
                   identity=redact_any(run.identity, redact), steps=tuple(
        replace(s, args=redact_any(s.args, redact), result=redact(s.result))
        for s in run.steps))


def incident_view(process: str, incident: Incident, redact: Redact) -> IncidentView:
    last = incident.payload_history[-1]["payload"] if incident.payload_history else ""
    return IncidentView(
        process=process, incident_id=incident.incident_id, state=incident.state,
        generation=incident.generation, version=incident.version,
        fingerprint=redact(value_text(incident.fingerprint_value)),
        opened_at=incident.opened_at, last_seen=incident.last_seen,
        occurrences=incident.occurrences, run_ids=tuple(incident.run_ids),
        closed_at=incident.closed_at, resolved_by=incident.resolved_by,
        note=redact(incident.note),
        last_payload=preview(redact_any(last, redact)) if last != "" else "")


def summary(process: AgentProcess) -> ProcessSummary:
    """One row of the process table."""
    status = process.status_snapshot()
    runs = process.recent_runs()
    last = runs[-1] if runs else None
    outcome = ""
    if last is not None:
        outcome = last.reply if last.state.value == "succeeded" else \
            f"{last.state.value}: {last.reason or last.error}"
    health = "off"
    if status.health is not None:
        count = status.health_anomalies or 0
        health = "ok" if not count else f"{count} anomal{'y' if count == 1 else 'ies'}"
    budget_cfg = process.config.budget
    limits = {key.removeprefix("max_"): getattr(budget_cfg, key)
              for key in type(budget_cfg).model_fields if key.startswith("max_")}
    return ProcessSummary(
        name=process.name, state=status.state, suspend_reason=status.suspend_reason or "",
        queue_depth=status.queue_size, queue_capacity=status.queue_capacity,
        active_runs=status.active_runs, invocations=status.invocation_count,
        failure_streak=status.consecutive_failures, restarts=status.restart_count,
        dead_letters=status.dead_letter_total, waiting_runs=status.waiting_runs,
        pending_retries=status.pending_retries, health=health,
        budget_use=_budget_use(status.budget, limits),
        mission_state=status.mission_state or "",
        suspended_by=(status.suspension or {}).get("by", ""),
        suspended_since=(status.suspension or {}).get("since"),
        suspension_kept=bool((status.suspension or {}).get("kept_across_restarts")),
        last_run_at=last.finished_at if last is not None else None,
        last_outcome=preview(redactor(process)(outcome)),
        journal_fault=status.journal_fault or "", draining=status.draining is not None,
        journal_left_behind=tuple(kept.describe() for kept in getattr(
            process.journal, "left_behind", None) or ()),
        waiting=tuple(WaitingRunView(r.run_id, r.event.event_id, r.waiting_reason,
                                     r.write_in_flight, r.started_at)
                      for r in process.waiting_runs()[:WAITING_LISTED]))


def run_views(process: AgentProcess) -> tuple[RunView, ...]:
    """Waiting runs first, then those about to continue, running, and the newest finished."""
    waiting = process.waiting_runs()
    waiting_ids = {r.run_id for r in waiting}
    finished = [r for r in reversed(process.recent_runs()) if r.run_id not in waiting_ids]
    # A reconciled run sits in the queue before it continues: listed, so it never vanishes.
    listed = [*waiting, *process.resuming_runs(), *process.active_runs(), *finished]
    unique: dict[str, Run] = {}
    for run in listed:  # the first listing of a run wins
        unique.setdefault(run.run_id, run)
    redact = redactor(process)
    return tuple(redact_run(_run_view(r), redact) for r in unique.values())


def dead_letter_views(process: AgentProcess) -> tuple[DeadLetterView, ...]:
    """The newest dead letters, as the process lists them."""
    redact = redactor(process)
    return tuple(dead_letter_view(d["event"], d["reason"], d["error"], d["attempts"],
                                  d["dead_lettered_at"], redact)
                 for d in process.dead_letters)


def dead_letter_view(event: TriggerEvent, reason: str, error: str, attempts: int, at: str,
                     redact: Redact) -> DeadLetterView:
    # Redacted, then cut to a preview (a cut inside a secret would leave it unrecognised).
    return DeadLetterView(event.event_id, event.trigger_type, reason, redact(error), attempts,
                          at, preview(redact_any(event.payload, redact)),
                          attempt_views(history_of(event), redact))


def detail(process: AgentProcess) -> ProcessDetail:
    redact = redactor(process)
    queued = tuple(QueuedEventView(e.event_id, e.trigger_type, e.trigger_id,
                                   e.timestamp.timestamp(),
                                   preview(redact_any(e.payload, redact)))
                   for e in process.queued_events())
    status = process.status_snapshot()
    return ProcessDetail(
        summary=summary(process), queued=queued, dead_letters=dead_letter_views(process),
        runs=run_views(process),
        context=redact_any(process.context.state_snapshot(), redact),
        conversation=tuple(redact_any(m, redact) for m in process.conversation.messages()),
        governance=redact_any(_governance(process), redact),
        config=shown_config(process.config, process.redact),
        triggers=tuple(redact_any(t.as_dict(), redact) for t in status.triggers),
        servers=tuple(redact_any(s, redact) for s in status.servers or ()))


def _governance(process: AgentProcess) -> dict[str, Any]:
    status = process.status_snapshot()
    shown: dict[str, Any] = {
        "health": status.health, "health_anomalies": status.health_anomalies,
        "budget": status.budget, "mission_state": status.mission_state,
        "active_secrets": status.active_secrets, "inbox": status.inbox, "memory": status.memory}
    governance = {key: value for key, value in shown.items() if value is not None}
    if process.config.mission.enabled:
        governance["mission"] = process.checkpoint_state().get("mission", {})
    if status.execution_mode == "open":  # what the agent changed about itself
        added = [t.trigger_id for t in status.triggers if t.source == "dynamic"]
        governance["open_mode"] = {
            "dynamic_triggers": f"{len(added)}: {', '.join(added)}" if added else "0",
            "spawned_processes": ", ".join(process.spawned_processes) or "none",
            "rebuilds": status.rebuild_count}
    return governance

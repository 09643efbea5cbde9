"""Runs whose final reply waits for completion evidence, and the operator's three answers:
supply evidence (the run is judged again), send the reply back to the model with a note (the run
continues), or fail the run. A terminal run is never reopened: only a waiting run is answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime_core.journal.replay import RunRebuild, apply_evidence
from runtime_core.runs.completion import MISSING_COMPLETION_EVIDENCE, Artifact, StaleEvidenceError
from runtime_core.runs.recovery import RecoveredRun
from runtime_core.runs.run import Run, RunState


def parked(run: Run) -> RecoveredRun:
    """A live run that just went waiting for evidence, as a waiting entry."""
    point = run.pending
    assert point is not None and point.final_reply is not None
    rebuild = RunRebuild(history=list(point.history), step=point.step,
                         model_calls=point.model_calls, tool_calls=point.tool_calls,
                         output_chars=point.output_chars,
                         artifacts=[a.to_dict() for a in point.artifacts],
                         final_reply=point.final_reply, waiting_evidence=True,
                         missing=run.missing_evidence)
    return RecoveredRun(run, rebuild)


def waiting_entry(run: Run) -> dict[str, Any]:
    """The run_waiting entry's data: enough to rebuild the wait after a restart."""
    return {"reply": run.reply, "missing": run.missing_evidence}


def evidence_detail(waiting: RecoveredRun) -> dict[str, Any]:
    run, rebuild = waiting.run, waiting.rebuild
    artifacts = [Artifact.from_dict(a) for a in rebuild.artifacts]
    actions = [a for a in artifacts if a.kind == "action"]
    return {
        "run_id": run.run_id, "event_id": run.event.event_id,
        "reason": MISSING_COMPLETION_EVIDENCE, "missing": rebuild.missing,
        "reply": rebuild.final_reply or "",
        "evaluator": run.identity.evaluator if run.identity else "",
        "latest_action": actions[-1].artifact_id if actions else "",
        "artifacts": [{"id": a.artifact_id, "kind": a.kind, "tool": a.tool, "step": a.step,
                       "links": list(a.links)} for a in artifacts],
    }


@dataclass(frozen=True, slots=True)
class EvidenceDecision:
    """What an operator decided, as journaled (``action``: supplied, returned or failed)."""

    data: dict[str, Any]


def supplied(waiting: RecoveredRun, evidence: Any, *, kind: str, links: list[str] | None,
             note: str, actor: str) -> EvidenceDecision:
    """Check operator evidence; evidence for an action that is not the latest is stale."""
    artifacts = [Artifact.from_dict(a) for a in waiting.rebuild.artifacts]
    actions = [a for a in artifacts if a.kind == "action"]
    latest = actions[-1].artifact_id if actions else None
    chosen = list(links) if links is not None else ([latest] if latest else [])
    for link in chosen:
        if link != latest:
            current = latest or "none (no action was observed)"
            raise StaleEvidenceError(
                f"evidence for {link!r} is stale: the run's latest action is {current}; "
                "evidence must be linked to it")
    count = sum(1 for a in artifacts if a.tool == "operator")
    artifact = Artifact(f"{waiting.run.run_id}:evidence:{count}", kind,
                        waiting.rebuild.step + 1, "operator",
                        {"passed": True, "evidence": evidence, "note": note, "actor": actor},
                        tuple(chosen))
    return EvidenceDecision({"action": "supplied", "artifact": artifact.to_dict(),
                             "note": note, "actor": actor})


def returned(note: str, actor: str) -> EvidenceDecision:
    if not note.strip():
        raise ValueError("say what the model should do: a note is required to send a reply back")
    return EvidenceDecision({"action": "returned", "note": note, "actor": actor})


def failed(note: str, actor: str) -> EvidenceDecision:
    return EvidenceDecision({"action": "failed", "note": note or "failed by an operator",
                             "actor": actor})


def apply(waiting: RecoveredRun, decision: EvidenceDecision) -> RecoveredRun:
    """The run after the (journaled) decision: ready to continue, or marked failed."""
    apply_evidence(waiting.rebuild, decision.data)
    if decision.data["action"] != "failed":
        waiting.run.state = RunState.QUEUED
        waiting.run.waiting_reason = ""
        waiting.run.missing_evidence = ""
    return waiting

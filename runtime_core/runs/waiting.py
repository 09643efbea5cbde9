"""Runs that wait for an operator: a write whose outcome a crash left unknown, and runs whose
tool call waits for the answer to an MCP server's question (runs/server_asks.py).

They are never dispatched again on their own. An operator (or a connector that can check the
outside system) reconciles each one: applied, not applied, or failed; a question is answered:
accept, decline or cancel."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from runtime_core.events import EventNotifier, RunWaiting
from runtime_core.journal.replay import reconciled_observation
from runtime_core.runs.evidence import evidence_detail
from runtime_core.runs.recovery import RecoveredRun
from runtime_core.runs.run import Run, RunState

if TYPE_CHECKING:
    from runtime_core.runs.server_asks import Question

OUTCOMES = ("applied", "not_applied", "failed")
#: the longest a call is assumed to take when the run has no elapsed budget (max_seconds)
UNBOUNDED_CALL_S = 300.0


@dataclass(frozen=True, slots=True)
class WriterHold:
    """A write cut off by a takeover: the node that owned the process stopped beating without
    handing it over, so it may be paused and may still finish that write, until ``until``
    (its lease's end plus the longest a call may take). Until then "not applied" is refused:
    answering it would run the write a second time if the old owner's lands."""

    node_id: str
    epoch: int
    lease_ended_at: float  # time.time()
    call_timeout_s: float

    @property
    def until(self) -> float:
        return self.lease_ended_at + self.call_timeout_s

    def detail(self) -> dict[str, Any]:
        return {"previous_owner": self.node_id, "previous_epoch": self.epoch,
                "previous_lease_ended_at": round(self.lease_ended_at, 3),
                "previous_owner_may_write_until": round(self.until, 3)}


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class WaitingRuns:
    def __init__(self, process: str, notifier: EventNotifier) -> None:
        self.process = process
        self.notifier = notifier
        self._runs: dict[str, RecoveredRun] = {}
        self._questions: dict[str, Question] = {}  # run id -> the server's question it awaits
        self._holds: dict[str, WriterHold] = {}  # run id -> who may still be writing

    def __len__(self) -> int:
        return len(self._runs) + len(self._questions)

    def add(self, waiting: RecoveredRun) -> None:
        self._runs[waiting.run.run_id] = waiting
        unknown = waiting.rebuild.unknown
        self.notifier.emit(RunWaiting(
            process=self.process, run_id=waiting.run.run_id,
            event_id=waiting.run.event.event_id, reason=waiting.run.waiting_reason,
            tool=unknown.call.name if unknown else "",
        ))

    def hold_writes(self, hold: WriterHold) -> list[str]:
        """Mark every run waiting on a write's outcome now (the ones a takeover's recovery
        parked) with ``hold``; their ids."""
        held = sorted(run_id for run_id, waiting in self._runs.items()
                      if waiting.rebuild.unknown is not None)
        for run_id in held:
            self._holds[run_id] = hold
        return held

    def lift_holds(self, node_id: str) -> list[str]:
        """``node_id`` can no longer write (it stopped, or came back and stepped down): its
        holds end now; the run ids."""
        lifted = sorted(run_id for run_id, hold in self._holds.items()
                        if hold.node_id == node_id)
        for run_id in lifted:
            del self._holds[run_id]
        return lifted

    def runs(self) -> list[Run]:
        return [*(w.run for w in self._runs.values()), *(q.run for q in self._questions.values())]

    # -- questions of MCP servers (the run's tool call is open meanwhile) ---------------------
    def ask(self, question: Question) -> None:
        run = question.run
        self._questions[run.run_id] = question
        self.notifier.emit(RunWaiting(process=self.process, run_id=run.run_id,
                                      event_id=run.event.event_id, reason=run.waiting_reason,
                                      tool=question.ask.call.tool))

    def forget(self, run_id: str, question: Question) -> None:
        if self._questions.get(run_id) is question:
            del self._questions[run_id]

    def question(self, run_id: str) -> Question:
        question = self._questions.get(run_id)
        if question is None:
            if run_id in self._runs:
                raise ValueError(f"run {run_id} waits for an operator's reconciliation or "
                                 "evidence, not for the answer to a server's question")
            self._unknown(run_id)
        assert question is not None
        return question

    def questions(self) -> list[Question]:
        return list(self._questions.values())

    def _unknown(self, run_id: str) -> None:
        known = ", ".join([*self._runs, *self._questions]) or "none"
        raise KeyError(f"process {self.process!r} has no run {run_id!r} waiting "
                       f"(waiting runs: {known})")

    def pop(self, run_id: str) -> RecoveredRun:
        self._holds.pop(run_id, None)
        return self._runs.pop(run_id)

    def get(self, run_id: str) -> RecoveredRun:
        waiting = self._runs.get(run_id)
        if waiting is None:
            question = self._questions.get(run_id)
            if question is not None:
                raise KeyError(f"run {run_id} waits for the answer to a question from MCP "
                               f"server {question.ask.server!r}: answer it (accept, decline or "
                               "cancel), there is nothing to reconcile")
            self._unknown(run_id)
        assert waiting is not None
        return waiting

    def detail(self, run_id: str) -> dict[str, Any]:
        """What an operator needs to decide: the tool, its arguments and idempotency key (or,
        for a reply waiting for evidence, what is missing and the artifacts so far)."""
        question = self._questions.get(run_id)
        if question is not None:
            return question.detail()
        waiting = self.get(run_id)
        if waiting.rebuild.waiting_evidence:
            return evidence_detail(waiting)
        unknown = waiting.rebuild.unknown
        return {
            "run_id": run_id,
            "event_id": waiting.run.event.event_id,
            "reason": waiting.run.waiting_reason,
            "tool": unknown.call.name if unknown else "",
            "args": unknown.args if unknown else {},
            "step": unknown.step if unknown else 0,
            "idempotency_key": unknown.idempotency_key if unknown else "",
            **(unknown.origin if unknown else {}),
            **({"cause": unknown.cause} if unknown and unknown.cause else {}),
            **(hold.detail() if (hold := self._holds.get(run_id)) is not None else {}),
        }

    def decision(self, run_id: str, outcome: str, result: Any, note: str, actor: str
                 ) -> dict[str, Any]:
        """Check a reconciliation and return the journal entry's data (nothing changes yet)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be 'applied', 'not_applied' or 'failed', "
                             f"not {outcome!r}")
        unknown = self.get(run_id).rebuild.unknown
        assert unknown is not None
        hold = self._holds.get(run_id)
        if outcome == "not_applied" and hold is not None and time.time() < hold.until:
            raise ValueError(
                f"run {run_id}'s write ({unknown.call.name}, idempotency key "
                f"{unknown.idempotency_key}) was cut off when node {hold.node_id!r} stopped "
                f"answering (lease epoch {hold.epoch}); that node may be paused and may still "
                f"finish the write until {_utc(hold.until)} (its lease ended at "
                f"{_utc(hold.lease_ended_at)}, plus the call timeout of "
                f"{hold.call_timeout_s:g} s). 'not_applied' now could make the write run "
                "twice: check the target system and answer 'applied' if it landed or "
                "'failed', or answer 'not_applied' after that time")
        result_text = "" if result is None else (
            result if isinstance(result, str) else json.dumps(result, default=str))
        return {"step": unknown.step, "tool": unknown.call.name, "call_id": unknown.call.call_id,
                "outcome": outcome, "result": result_text, "note": note, "actor": actor}

    def settle(self, run_id: str, decision: dict[str, Any]) -> RecoveredRun:
        """Apply a journaled decision: the run leaves the waiting list, ready to continue (or,
        for "failed", marked with the operator's reason)."""
        waiting = self.pop(run_id)
        if decision["outcome"] == "failed":
            waiting.rebuild.failed_by_operator = decision["note"] or "the write failed"
            return waiting
        unknown = waiting.rebuild.unknown
        assert unknown is not None
        waiting.rebuild.history.append({
            "role": "tool", "tool_call_id": unknown.call.call_id, "name": unknown.call.name,
            "content": reconciled_observation(decision),
        })
        waiting.rebuild.unknown = None
        waiting.run.state = RunState.QUEUED
        waiting.run.waiting_reason = ""
        return waiting

"""A Run: one bounded execution of the agent for one event, its states and failure reasons, its
steps, and the point a recovered run resumes from."""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime_core import ids
from runtime_core.agent.model import ToolCall
from runtime_core.context import Message
from runtime_core.journal.left_out import fence_tag, payload_text, render_goal
from runtime_core.runs.completion import Artifact
from runtime_core.triggers.base import TriggerEvent

if TYPE_CHECKING:
    from runtime_core.journal.replay import UnknownWrite
    from runtime_core.runs.identity import RunIdentity


class RunState(str, enum.Enum):
    """A run's state (spec: run lifecycle): ``queued``, ``running``, ``waiting`` (an operator
    must reconcile a write whose outcome is unknown, or supply missing completion evidence),
    and the terminal ``succeeded`` (its completion contract was met), ``failed`` (with a
    FailureReason) and ``cancelled``. A terminal run is never reopened."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value


TERMINAL_RUN_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED})


class FailureReason(str, enum.Enum):
    """Stable reasons a run failed."""

    MODEL = "model"
    POLICY = "policy"
    VALIDATION = "validation"
    STEP = "step"
    BUDGET = "budget"
    PERSISTENCE = "persistence"

    def __str__(self) -> str:
        return self.value


@dataclass(slots=True)
class StepRecord:
    index: int
    kind: str  # "model", "tool", "refused"
    name: str = ""
    args: dict[str, Any] | None = None
    result: str = ""
    ok: bool = True
    duration_ms: float = 0.0


@dataclass(slots=True)
class Run:
    """One bounded execution of a process for one event (spec: run lifecycle): its state and
    why, the steps it took (model turns and tool calls), its counters against the run budget,
    the artifacts it made as completion evidence and, while ``waiting``, why and where it
    would continue."""

    process: str
    event: TriggerEvent
    attempt: int = 1
    run_id: str = field(default_factory=lambda: ids.token_hex(8))
    state: RunState = RunState.QUEUED
    reason: str = ""
    error: str = ""
    reply: str = ""
    steps: list[StepRecord] = field(default_factory=list)
    model_calls: int = 0
    tool_calls: int = 0
    output_chars: int = 0
    queued_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    messages: list[Message] = field(default_factory=list)  # what it added to the conversation
    waiting_reason: str = ""
    write_in_flight: str = ""  # "tool (idempotency key)" while a write tool runs
    identity: RunIdentity | None = None  # frozen when the run starts
    config_changed: str = ""  # "old -> new" digest when resumed under another configuration
    artifacts: list[Artifact] = field(default_factory=list)  # completion evidence, step order
    missing_evidence: str = ""  # why the completion evaluator is not satisfied yet
    pending: ResumePoint | None = None  # where a waiting run (evidence, a write) would continue
    last_step: int = 0
    trace_id: str = ""  # the OpenTelemetry trace of its execution, when traced
    span_id: str = ""  # its first span in that trace (a resumed run's span is its child)

    @property
    def duration_ms(self) -> float:
        if self.started_at is None or self.finished_at is None:
            return 0.0
        return (self.finished_at - self.started_at) * 1000.0

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "event_id": self.event.event_id,
            "trigger_type": self.event.trigger_type,
            "attempt": self.attempt,
            "state": self.state.value,
            "reason": self.reason,
            "error": self.error,
            "reply": self.reply,
            "steps": len(self.steps),
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "output_chars": self.output_chars,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


@dataclass(slots=True)
class ResumePoint:
    """Where a recovered run picks up: the history it had made durable, its counters, and the
    tool calls of its last model turn that had not started."""

    history: list[Message]
    step: int
    model_calls: int
    tool_calls: int
    output_chars: int
    remaining: list[ToolCall]
    artifacts: list[Artifact] = field(default_factory=list)
    final_reply: str | None = None  # the reply that waited for evidence
    note: str | None = None  # an operator's note sending that reply back to the model
    unknown: UnknownWrite | None = None  # the write a live run parked on, its outcome unknown


class RunFailure(Exception):
    def __init__(self, reason: FailureReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def render_event_message(event: TriggerEvent, run_id: str | None = None) -> str:
    """The user message for an event (run by ``run_id``). The payload sits in a block tagged
    with fresh random hex so text inside it cannot pose as instructions or close the block:
    the run's own (the start of its random id, which nobody outside sees before the run
    starts), else new."""
    # The renderer is the journal's: a run's start leaves a standard goal out (its tag when it
    # is the run's) and renders it again on read (journal.left_out).
    return render_goal(event.trigger_type, event.trigger_id, event.event_id,
                       event.timestamp.isoformat(timespec="seconds"),
                       fence_tag(run_id) or ids.token_hex(4), payload_text(event.payload))


def assistant_tool_message(reply: str | None, calls: tuple[ToolCall, ...] | list[ToolCall]
                           ) -> Message:
    return {
        "role": "assistant",
        "content": reply or "",
        "tool_calls": [{"id": c.call_id, "name": c.name, "args": c.args} for c in calls],
    }


def time_left(max_seconds: float | None, started: float) -> float | None:
    """Seconds left of a run's elapsed budget (``started`` on the loop clock); None when
    unlimited. RunFailure once it is used up."""
    if max_seconds is None:
        return None
    remaining = max_seconds - (asyncio.get_running_loop().time() - started)
    if remaining <= 0:
        raise RunFailure(FailureReason.BUDGET, f"elapsed budget of {max_seconds:g} s used up")
    return remaining

"""A write whose answer a live run never got: the connection was lost, the server died or the
call timed out (``OutcomeUnknown``). The effect may have happened, so the run waits with
``unknown_write_outcome`` exactly as after a crash: the invocation is never dispatched again, and
an operator (or a connector that can check) reconciles it (runs/waiting.py, process/operator.py).

A read cut off the same way is only reported to the model as interrupted; it may ask again.
"""

from __future__ import annotations

from typing import Any

from runtime_core.agent.model import ToolCall
from runtime_core.journal.replay import ORIGIN_KEYS, RunRebuild, UnknownWrite
from runtime_core.runs.recovery import UNKNOWN_WRITE_OUTCOME, RecoveredRun
from runtime_core.runs.run import ResumePoint, Run, RunState


class WriteOutcomeUnknown(Exception):
    """Raised out of a tool step: the run parks on ``unknown``. ``remaining`` is set by the
    executor: the calls of the same model turn after it, which run once it is reconciled."""

    def __init__(self, unknown: UnknownWrite) -> None:
        super().__init__(unknown.cause)
        self.unknown = unknown
        self.remaining: list[ToolCall] = []


def unknown_write(call: ToolCall, step: int, idempotency_key: str, info: dict[str, Any],
                  cause: str) -> WriteOutcomeUnknown:
    origin = {key: info[key] for key in ORIGIN_KEYS if key in info}
    return WriteOutcomeUnknown(UnknownWrite(step, call, dict(call.args), idempotency_key,
                                            origin, cause))


def interrupted_read(cause: str) -> str:
    """What the model reads for a read that got no answer."""
    return f"interrupted: {cause}; call the tool again if you still need it"


def park(run: Run, parked: WriteOutcomeUnknown, history: list[Any]) -> None:
    """The run waits: its durable history so far, counters and the calls left of its turn."""
    run.state = RunState.WAITING
    run.waiting_reason = UNKNOWN_WRITE_OUTCOME
    run.write_in_flight = ""
    run.pending = ResumePoint(list(history), parked.unknown.step, run.model_calls,
                              run.tool_calls, run.output_chars, list(parked.remaining),
                              list(run.artifacts), unknown=parked.unknown)


def parked(run: Run) -> RecoveredRun:
    """A live run that just parked on a write, as a waiting entry (as recovery makes one)."""
    point = run.pending
    assert point is not None and point.unknown is not None
    rebuild = RunRebuild(history=list(point.history), step=point.step,
                         model_calls=point.model_calls, tool_calls=point.tool_calls,
                         output_chars=point.output_chars, remaining=list(point.remaining),
                         unknown=point.unknown,
                         artifacts=[a.to_dict() for a in point.artifacts])
    return RecoveredRun(run, rebuild)


def waiting_entry(run: Run) -> dict[str, Any]:
    """The run_waiting entry's data: the call, its arguments, key and why, for the journal."""
    point = run.pending
    assert point is not None and point.unknown is not None
    unknown = point.unknown
    return {"call_id": unknown.call.call_id, "args": unknown.args,
            "idempotency_key": unknown.idempotency_key, "cause": unknown.cause,
            **unknown.origin}

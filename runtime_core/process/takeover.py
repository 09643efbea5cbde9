"""What a scale-out node does to a process around a change of owner (cluster/host.py).

The node that loses a process's lease cuts its runs in flight at once (their calls must not go
on once another node may run the process); the node that takes a process over from a node
that stopped beating holds "not applied" on the writes that node left open, until it cannot
write any more (runs/waiting.py ``WriterHold``).
"""

from __future__ import annotations

from runtime_core.process.core import ProcessCore
from runtime_core.runs.waiting import UNBOUNDED_CALL_S, WriterHold

__all__ = ["Takeover"]


class Takeover:
    """AgentProcess.takeover: the process's side of a change of owner."""

    def __init__(self, core: ProcessCore) -> None:
        self._core = core

    def cut_runs_now(self) -> int:
        """Cancel the runs in flight at once, without waiting for them, and take nothing more
        off the queue: a node that lost this process's lease must not let a call in flight go
        on (its new owner recovers the runs from the journal). Make the journal refuse every
        append first, so nothing more is written. How many runs were cut."""
        return self._core.delivery.cut_runs()

    def hold_unknown_writes(self, node_id: str, epoch: int, lease_ended_at: float
                            ) -> tuple[WriterHold, list[str]]:
        """This node took the process over from ``node_id`` (lease ``epoch``, ended at
        ``lease_ended_at``, time.time()) without a hand-over: every run now waiting on a
        write's outcome refuses "not applied" until that lease's end plus the longest a call
        may take (the run's elapsed budget, ``run_budget.max_seconds``; 300 s when unset), as
        the old owner may be paused mid-call. Call it right after start(). The hold, and the
        ids of the runs it holds."""
        budget = self._core.config.run_budget.max_seconds
        hold = WriterHold(node_id, epoch, lease_ended_at,
                          budget if budget is not None else UNBOUNDED_CALL_S)
        return hold, self._core.waiting.hold_writes(hold)

    def lift_write_holds(self, node_id: str) -> list[str]:
        """End the holds for ``node_id`` (it can no longer write: it stopped, or it came back
        and stepped down); the run ids."""
        return self._core.waiting.lift_holds(node_id)

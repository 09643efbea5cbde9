"""What a process emits, recorded for a test to read."""

from __future__ import annotations

from runtime_core import AgentProcess, RuntimeEvent


def record(process: AgentProcess) -> list[RuntimeEvent]:
    """Every event the process emits from now on, in order."""
    events: list[RuntimeEvent] = []
    process.notifier.add_callback(events.append)
    return events

"""Shared test helpers: poll for a condition with a timeout instead of sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from runtime_core import AgentProcess, FakeClock, RuntimeEvent


async def wait_for(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    """Yield to the loop until ``predicate()`` is true; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or predicate}")
        await asyncio.sleep(0.002)


async def settle(rounds: int = 20) -> None:
    """Let already-scheduled callbacks and tasks run (no wall-clock waiting)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def record(process: AgentProcess) -> list[RuntimeEvent]:
    """Every event the process emits from now on, in order."""
    events: list[RuntimeEvent] = []
    process.notifier.add_callback(events.append)
    return events

"""The mission through AgentProcess: a success check over the context state completes it and
stops the process on purpose; limits fail it; its state survives a restart."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runtime_core import AgentProcess, ProcessConfig, ProcessState, ToolContext, TriggerEvent
from runtime_core.journal import MemoryJournal
from tests.conftest import wait_for


def book(ctx: ToolContext) -> int:
    booked = int(ctx.get("booked", 0)) + 1
    ctx.set("booked", booked)
    return booked


def config(**mission: object) -> ProcessConfig:
    return ProcessConfig(
        model={"provider": "scripted", "turns": [{"tool_calls": [{"name": "book"}]},
                                                 {"reply": "booked"}]},
        mission={"enabled": True, "objective": "Book three invoices", **mission},
        restart_policy="always",
        journal={"level": "checkpoint", "backend": "memory"},
    )


async def feed(process: AgentProcess, n: int) -> None:
    for _ in range(n):
        if process.state is not ProcessState.RUNNING:
            return
        before = process.invocation_count
        await process.inject(TriggerEvent("t", "manual", {}))
        await wait_for(lambda b=before: process.invocation_count > b)  # type: ignore[misc]


async def test_the_success_check_completes_the_mission_and_stops_for_good() -> None:
    process = AgentProcess("m", config(success_check="state.booked >= 3"), tools=[book],
                           journal=MemoryJournal())
    sub = process.notifier.subscribe(kinds=["mission.progress", "mission.complete"])
    await process.start()
    assert process.status()["mission_state"] == "active"
    await feed(process, 3)
    await wait_for(lambda: process.state is ProcessState.STOPPED)
    assert process.status()["mission_state"] == "completed"
    assert [e.kind for e in sub.drain()] == ["mission.progress", "mission.progress",
                                             "mission.complete"]
    assert process.restart_count == 0


async def test_limits_fail_the_mission_and_the_prompt_names_the_objective() -> None:
    process = AgentProcess("m", config(success_check="state.booked >= 99", max_invocations=2),
                           tools=[book], journal=MemoryJournal())
    sub = process.notifier.subscribe(kinds=["mission.failed"])
    await process.start()
    await feed(process, 2)
    await wait_for(lambda: process.state is ProcessState.STOPPED)
    failed = sub.drain()
    assert len(failed) == 1 and "not achieved within 2 runs" in failed[0].to_dict()["reason"]
    assert process.status()["mission_state"] == "failed"


async def test_mission_state_survives_a_restart() -> None:
    journal = MemoryJournal()
    first = AgentProcess("m", config(success_check="state.booked >= 3"), tools=[book],
                         journal=journal)
    await first.start()
    await feed(first, 1)
    await first.stop()
    second = AgentProcess("m", config(success_check="state.booked >= 3"), tools=[book],
                          journal=journal)
    await second.start()
    assert second.recovered is not None and second.recovered["mission_restored"] is True
    await feed(second, 2)  # booked reaches 3 across the restart
    await wait_for(lambda: second.state is ProcessState.STOPPED)
    assert second.status()["mission_state"] == "completed"


def test_a_bad_success_check_is_refused_with_its_column() -> None:
    with pytest.raises(ValidationError, match="column 1: unknown name 'payload'"):
        ProcessConfig(mission={"enabled": True, "success_check": "payload.x > 1"})

"""The mission through AgentProcess: a success check over the context state completes it and
stops the process on purpose; limits fail it; its state survives a restart."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from runtime_core import (
    AgentProcess,
    EventBus,
    ProcessConfig,
    ProcessState,
    ToolContext,
    TriggerEvent,
)
from runtime_core.journal import InMemoryJournal
from tests.helpers.events import record
from tests.helpers.polling import wait_for


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
        # the judge of the run before may complete the mission and stop the process after
        # this event was accepted: then it stays queued and never runs here
        await wait_for(lambda b=before: process.invocation_count > b  # type: ignore[misc]
                       or process.state is not ProcessState.RUNNING)


async def test_the_success_check_completes_the_mission_and_stops_for_good() -> None:
    process = AgentProcess("m", config(success_check="state.booked >= 3"), tools=[book],
                           journal=InMemoryJournal())
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
                           tools=[book], journal=InMemoryJournal())
    sub = process.notifier.subscribe(kinds=["mission.failed"])
    await process.start()
    await feed(process, 2)
    await wait_for(lambda: process.state is ProcessState.STOPPED)
    failed = sub.drain()
    assert len(failed) == 1 and "not achieved within 2 runs" in failed[0].to_dict()["reason"]
    assert process.status()["mission_state"] == "failed"


async def test_mission_state_survives_a_restart() -> None:
    journal = InMemoryJournal()
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


def verdict(achieved: bool, confidence: float, reasoning: str) -> dict[str, str]:
    return {"reply": json.dumps({"achieved": achieved, "confidence": confidence,
                                 "reasoning": reasoning, "progress_summary": reasoning})}


def judged(turns: list[dict[str, str]], **mission: object) -> ProcessConfig:
    return config(eval_model={"provider": "scripted", "turns": turns}, **mission)


async def test_a_model_judge_completes_the_mission_when_it_says_achieved() -> None:
    turns = [verdict(False, 0.9, "one of three"), verdict(False, 0.9, "two of three"),
             {"reply": "```json\n" + json.dumps({"achieved": True, "confidence": 0.95,
                                                  "reasoning": "three booked"}) + "\n```"}]
    process = AgentProcess("m", judged(turns), tools=[book])
    events = record(process)
    await process.start()
    await feed(process, 5)
    await wait_for(lambda: process.state is ProcessState.STOPPED)
    assert process.invocation_count == 3 and process.status()["mission_state"] == "completed"
    progress = [e.to_dict() for e in events if e.kind.startswith("mission.")]
    assert [(p["kind"], p["confidence"]) for p in progress] == [
        ("mission.progress", 0.9), ("mission.progress", 0.9), ("mission.complete", 0.95)]
    assert progress[-1]["reason"] == "three booked"


async def test_an_unsure_judge_pauses_the_mission_and_escalates() -> None:
    bus = EventBus()
    alerts: list[dict[str, Any]] = []
    bus.subscribe("ops.mission", alerts.append)
    process = AgentProcess("m", judged([verdict(False, 0.3, "cannot tell from the state")],
                                       escalation={"event_type": "ops.mission"}),
                           tools=[book], event_bus=bus)
    await process.start()
    await feed(process, 2)
    await wait_for(lambda: bool(alerts))
    assert alerts[0]["data"]["type"] == "low_confidence"
    assert alerts[0]["data"]["confidence"] == 0.3
    assert process.status()["mission_state"] == "paused"
    assert process.state is ProcessState.RUNNING  # the agent keeps working; the judge waits
    assert len(alerts) == 1  # a paused mission is not judged again
    process.resume_mission()
    assert process.status()["mission_state"] == "active"
    await process.fail_mission("the operator gave up")
    await wait_for(lambda: process.state is ProcessState.STOPPED)
    assert process.status()["mission_state"] == "failed"


async def test_a_judge_that_answers_nonsense_or_fails_does_not_fail_the_run() -> None:
    process = AgentProcess("m", judged([{"reply": "I think so?"}], confidence_threshold=0.4),
                           tools=[book])
    events = record(process)
    await process.start()
    await feed(process, 1)
    await wait_for(lambda: any(e.kind == "mission.progress" for e in events))
    evaluation = process.checkpoint_state()["mission"]["evaluations"][0]
    assert evaluation["confidence"] == 0.5 and "unreadable" in evaluation["reasoning"]
    assert process.recent_runs()[0].state.value == "succeeded"
    await process.stop()


async def test_the_judge_sees_the_evidence_but_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime_core.governance import mission_judge

    monkeypatch.setenv("MISSION_TOKEN", "s3cr3t-value-123")
    seen: list[str] = []
    real_judge = mission_judge.judge

    async def spy(model: Any, evidence: str, invocation: int, **kw: Any) -> Any:
        seen.append(evidence)
        return await real_judge(model, evidence, invocation, **kw)

    monkeypatch.setattr("runtime_core.process.parts.mission.judge", spy)
    base = judged([verdict(True, 1.0, "done")], success_criteria="three booked")
    cfg = ProcessConfig(model=base.model, mission=base.mission, secrets={
        "enabled": True, "secrets": {"token": "${MISSION_TOKEN}"}})
    process = AgentProcess("m", cfg, tools=[book])
    await process.start()
    process.context.put("note", "token is s3cr3t-value-123", source="operator")
    await feed(process, 1)
    await wait_for(lambda: bool(seen))
    assert "[Objective] Book three invoices" in seen[0]
    assert "[Success criteria] three booked" in seen[0]
    assert "book(" in seen[0] and '"booked": 1' in seen[0]
    assert "s3cr3t-value-123" not in seen[0] and "[secret:token]" in seen[0]
    await process.stop()


def test_judge_config_is_checked() -> None:
    with pytest.raises(ValidationError, match="unknown model"):
        ProcessConfig(mission={"enabled": True, "objective": "x", "eval_model": "gpt"})
    with pytest.raises(ValidationError, match="needs an objective"):
        ProcessConfig(mission={"enabled": True, "eval_model": "echo"})

"""The autonomy budget through AgentProcess: checked before each tool call, per run and per
day, warnings at 80 %, on_exceeded actions, and daily counters that survive a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime_core import (
    AgentProcess,
    EventBus,
    FakeClock,
    ModelRequest,
    ModelTurn,
    ProcessConfig,
    ProcessState,
    RunState,
    TriggerEvent,
)
from runtime_core.journal import InMemoryJournal
from runtime_core.manifest.loader import ManifestError, parse_manifest
from tests.helpers.polling import wait_for

CALLS: list[str] = []


def act(name: str) -> str:
    CALLS.append(name)
    return f"did {name}"


def three_calls() -> dict[str, Any]:
    return {"provider": "scripted", "turns": [
        {"tool_calls": [{"name": "act", "args": {"name": n}} for n in ("a", "b", "c")]},
        {"reply": "done"}]}


def make(budget: dict[str, Any], *, clock: FakeClock | None = None, model: Any = None,
         **extra: Any) -> AgentProcess:
    CALLS.clear()
    config = ProcessConfig(model=model or three_calls(),
                           budget={"enabled": True, **budget}, **extra)
    return AgentProcess("spender", config, tools=[act], clock=clock)


async def run(process: AgentProcess) -> Any:
    before = len(process.recent_runs()) + len(process.dead_letters)
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: len(process.recent_runs()) + len(process.dead_letters) > before)
    return process.recent_runs()[-1] if process.recent_runs() else None


async def test_a_call_over_the_per_run_limit_is_not_executed_and_pauses() -> None:
    process = make({"max_tool_calls_per_run": 2})
    sub = process.notifier.subscribe(kinds=["budget.exceeded"])
    await process.start()
    result = await run(process)
    assert CALLS == ["a", "b"]
    refused = [s for s in result.steps if s.kind == "refused"]
    assert len(refused) == 1 and "max_tool_calls_per_run reached (limit 2)" in refused[0].result
    assert "tool call 'act' was not executed" in refused[0].result
    assert result.state is RunState.SUCCEEDED  # the model was told and answered
    await wait_for(lambda: process.state is ProcessState.SUSPENDED)
    assert process.suspend_reason == "budget"
    exceeded = sub.drain()
    assert len(exceeded) == 1 and exceeded[0].to_dict()["limit_type"] == "max_tool_calls_per_run"
    await process.stop()


async def test_cost_weights_and_irreversible_calls_count_per_day() -> None:
    process = make({"max_cost_per_day": 12, "tool_costs": {"act": {"cost_weight": 5}},
                    "on_exceeded": "pause"})
    await process.start()
    await run(process)
    assert CALLS == ["a", "b"]  # 5 + 5 fits, a third would make 15 > 12
    assert process.status()["budget"]["cost_per_day"] == 2
    await process.stop()
    irreversible = make({"max_irreversible_per_day": 1,
                         "tool_costs": {"act": {"irreversible": True}}})
    await irreversible.start()
    await run(irreversible)
    assert CALLS == ["a"]
    await irreversible.stop()


async def test_runs_per_day_dead_letter_the_extra_event_until_the_next_day() -> None:
    clock = FakeClock(wall_start=1_767_225_600.0 + 3600)  # 2026-01-01 01:00 UTC
    process = make({"max_runs_per_day": 1}, clock=clock,
                   model={"provider": "scripted", "turns": [{"reply": "ok"}]})
    await process.start()
    await run(process)
    await run(process)
    assert process.invocation_count == 1
    letter = process.dead_letters[-1]
    assert letter["reason"] == "budget exceeded" and "max_runs_per_day" in letter["error"]
    assert process.state is ProcessState.SUSPENDED and process.suspend_reason == "budget"
    clock.advance(24 * 3600)  # a new day: the counters start again
    await process.resume()
    assert await process.redeliver_dead_letters() == 1
    await wait_for(lambda: process.invocation_count == 2)
    await process.stop()


async def test_a_warning_at_80_percent_then_the_model_call_limit() -> None:
    process = make({"max_tool_calls_per_day": 4, "on_exceeded": "pause"})
    sub = process.notifier.subscribe(kinds=["budget.warning"])
    await process.start()
    await run(process)  # 3 of 4 calls: below 80 %
    assert sub.drain() == []
    await run(process)  # the 4th call crosses 80 %, the 5th is refused
    warnings = sub.drain()
    assert len(warnings) == 1 and warnings[0].to_dict()["limit_type"] == "max_tool_calls_per_day"
    await process.stop()
    limited = make({"max_model_calls_per_run": 1})
    await limited.start()
    result = await run(limited)
    assert result.state is RunState.FAILED and result.reason == "budget"
    assert "max_model_calls_per_run" in result.error
    await limited.stop()


async def test_the_prompt_shows_what_remains() -> None:
    seen: list[str] = []

    class Spy:
        name = "spy"

        async def complete(self, request: ModelRequest) -> ModelTurn:
            seen.extend(m["content"] for m in request.messages if m["role"] == "system")
            return ModelTurn(reply="ok")

    process = AgentProcess("p", ProcessConfig(budget={"enabled": True,
                                                      "max_tool_calls_per_day": 10}),
                           model=Spy())
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1)
    assert any(line.startswith("[Budget Remaining] ") and "tool_calls_per_day=10" in line
               for line in seen)
    await process.stop()


async def test_stop_and_escalate_actions() -> None:
    stopper = make({"max_tool_calls_per_run": 1, "on_exceeded": "stop"},
                   restart_policy="always")
    await stopper.start()
    await run(stopper)
    await wait_for(lambda: stopper.state is ProcessState.STOPPED)
    bus = EventBus()
    got: list[dict[str, Any]] = []
    bus.subscribe("ops.budget", got.append)
    CALLS.clear()
    escalator = AgentProcess("esc", ProcessConfig(model=three_calls(), budget={
        "enabled": True, "max_tool_calls_per_run": 1, "on_exceeded": "escalate",
        "escalation": {"event_type": "ops.budget"}}), tools=[act], event_bus=bus)
    await escalator.start()
    await run(escalator)
    await wait_for(lambda: escalator.state is ProcessState.SUSPENDED and bool(got))
    assert got[0]["data"]["type"] == "budget_violation"
    assert got[0]["data"]["violation"]["limit_name"] == "max_tool_calls_per_run"
    assert got[0]["data"]["violation"]["tool_name"] == "act"
    await escalator.stop()


async def test_daily_counters_survive_a_restart() -> None:
    journal = InMemoryJournal()
    clock = FakeClock()
    config = ProcessConfig(model=three_calls(), budget={"enabled": True,
                                                        "max_tool_calls_per_day": 4},
                           journal={"level": "checkpoint", "backend": "memory"})
    first = AgentProcess("spender", config, tools=[act], journal=journal, clock=clock)
    CALLS.clear()
    await first.start()
    await run(first)
    await first.stop()
    second = AgentProcess("spender", config, tools=[act], journal=journal, clock=clock)
    await second.start()
    assert second.status()["budget"]["tool_calls_per_day"] == 1
    await run(second)
    assert CALLS == ["a", "b", "c", "a"]  # a restart did not hand out a fresh day
    await second.stop()


def test_manifest_budget_is_strict() -> None:
    manifest = parse_manifest("name: a\nbudget: {enabled: true, max_runs_per_day: 5}\n",
                              Path("a.agent"))
    assert manifest.config.budget.max_runs_per_day == 5 and manifest.warnings == []
    with pytest.raises(ManifestError, match="unknown BudgetConfig key"):
        parse_manifest("name: a\nbudget: {max_runs_per_dya: 5}\n", Path("a.agent"))

"""Open mode through AgentProcess with the scripted model: the agent adds a trigger that fires,
removes it, hits its limits (refusals are observations), spawns a child that runs, and updates its
own instructions; meta-tool calls are journaled writes under budget and policy."""

from __future__ import annotations

from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.config import TriggerConfig
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from runtime_core.runtime import AgentRuntime
from runtime_core.triggers.registry import trigger_id_for
from tests.helpers.polling import wait_for

TICK = {"type": "interval", "seconds": 0.05}
TICK_ID = trigger_id_for(TriggerConfig.model_validate(TICK))


def call(tool_name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool_name, "args": args}]}


def open_config(scripts: dict[str, list[dict[str, Any]]], **extra: Any) -> ProcessConfig:
    return ProcessConfig(
        model={"provider": "scripted", "turns": [{"reply": "tick"}], "scripts": scripts,
               "select": {"by_payload_field": "script"}},
        execution_mode="open", journal={"level": "full", "backend": "memory"}, **extra)


async def ask(process: AgentProcess, script: str, **payload: Any) -> Any:
    before = process.invocation_count
    await process.inject(TriggerEvent("op", "manual", {"script": script, **payload}))
    await wait_for(lambda: any(r.event.payload.get("script") == script
                               for r in process.recent_runs()) and
                   process.invocation_count > before, 10)
    return next(r for r in reversed(process.recent_runs())
                if r.event.payload.get("script") == script)


async def test_the_agent_adds_a_trigger_that_fires_then_removes_it() -> None:
    process = AgentProcess("p", open_config({
        "add": [call("add_trigger", **TICK), {"reply": "added"}],
        "remove": [call("remove_trigger", trigger_id=TICK_ID), {"reply": "removed"}],
    }))
    async with process:
        run = await ask(process, "add")
        assert run.steps[1].ok and f"trigger {TICK_ID} added" in run.steps[1].result
        status = process.status()
        assert status["execution_mode"] == "open"
        assert (status["trigger_count"], status["dynamic_trigger_count"]) == (0, 1)
        assert {"id": TICK_ID, "type": "interval", "source": "dynamic"}.items() <= \
            status["triggers"][0].items()
        await wait_for(lambda: sum(r.event.trigger_type == "interval"
                                   for r in process.recent_runs()) >= 2, 10,
                       "the agent's interval trigger to fire")
        await ask(process, "remove")
        assert process.status()["dynamic_trigger_count"] == 0
        # Every meta-tool call is a journaled write.
        intents = await process.journal.read(  # type: ignore[union-attr]
            ReadFilter(process="p", entry_type=EntryType.TOOL_INTENT))
        assert {(i.data["tool"], i.data["effect"]) for i in intents} == {
            ("add_trigger", "write"), ("remove_trigger", "write")}


async def test_limits_and_disallowed_types_are_refused_as_observations() -> None:
    process = AgentProcess("p", open_config({
        "two": [{"tool_calls": [{"name": "add_trigger", "args": TICK},
                                {"name": "add_trigger", "args": {"type": "interval",
                                                                 "seconds": 60}},
                                {"name": "add_trigger", "args": {"type": "webhook"}},
                                {"name": "remove_trigger", "args": {"trigger_id": "cron-x"}}]},
                {"reply": "tried"}],
    }, open_mode={"max_dynamic_triggers": 1}))
    async with process:
        run = await ask(process, "two")
        assert run.state.value == "succeeded"
        tools = [s for s in run.steps if s.kind == "tool"]
        assert [s.ok for s in tools] == [True, False, False, False]
        assert "the limit of 1 dynamic triggers is reached" in tools[1].result
        assert "trigger type 'webhook' is not allowed" in tools[2].result
        assert "not a trigger this process added" in tools[3].result
        assert process.status()["dynamic_trigger_count"] == 1


async def test_stop_drops_agent_added_triggers_and_start_does_not_restore_them() -> None:
    process = AgentProcess("p", open_config({"add": [call("add_trigger", **TICK),
                                                     {"reply": "added"}]}))
    await process.start()
    await ask(process, "add")
    assert process.status()["dynamic_trigger_count"] == 1
    await process.stop()
    await process.start()
    try:
        status = process.status()
        assert status["dynamic_trigger_count"] == 0 and status["triggers"] == []
    finally:
        await process.close()


async def test_a_spawned_child_runs_and_the_spawn_limit_holds() -> None:
    runtime = AgentRuntime()
    child_triggers = [TICK]
    parent = runtime.add_process("parent", open_config({
        "spawn": [call("spawn_process", name="helper", instructions="Help out.",
                       triggers=child_triggers),
                  call("spawn_process", name="helper2", instructions="Also help."),
                  {"reply": "spawned"}],
    }, open_mode={"allow_process_spawn": True, "max_spawned_processes": 1}))
    async with runtime:  # starts every process
        run = await ask(parent, "spawn")
        first, second = [s for s in run.steps if s.kind == "tool"]
        assert first.ok and first.result == "process helper started"
        assert not second.ok and "the limit of 1 spawned processes is reached" in second.result
        assert parent.status()["spawned_process_count"] == 1
        assert parent.spawned_processes == ["helper"]
        child = runtime.get_process("helper")
        assert child.config.execution_mode == "strict"
        await wait_for(lambda: child.invocation_count >= 1, 10, "the child to run")


async def test_spawning_is_off_unless_allowed() -> None:
    runtime = AgentRuntime()
    parent = runtime.add_process("parent", open_config({
        "spawn": [call("spawn_process", name="helper", instructions="x"), {"reply": "no"}]}))
    async with runtime:  # starts every process
        run = await ask(parent, "spawn")
        assert "spawning processes is not allowed" in run.steps[1].result
        assert "helper" not in runtime.processes


async def test_the_agent_updates_its_instructions_for_the_next_run() -> None:
    process = AgentProcess("p", open_config({
        "rewrite": [call("update_instructions", text="Be terse."), {"reply": "ok"}],
        "after": [{"reply": "done"}],
    }, instructions="Be verbose."))
    async with process:
        await ask(process, "rewrite")
        assert process.status()["rebuild_count"] == 1 and process.instructions == "Be terse."
        await ask(process, "after")
        usage = await process.journal.read(  # type: ignore[union-attr]
            ReadFilter(process="p", entry_type=EntryType.MODEL_USAGE))
        assert usage[-1].data["prompt"][0] == {"role": "system", "content": "Be terse."}


async def test_meta_tools_obey_policy_and_budget_and_strict_mode_has_none() -> None:
    policed = AgentProcess("p", open_config({
        "add": [call("add_trigger", **TICK), {"reply": "tried"}]},
        allowed_tools=["list_triggers"]))
    async with policed:
        run = await ask(policed, "add")
        assert run.steps[1].kind == "refused" and "not in allowed_tools" in run.steps[1].result
        assert policed.status()["dynamic_trigger_count"] == 0
    strict = AgentProcess("s", ProcessConfig(model={"provider": "scripted", "turns": [
        call("add_trigger", **TICK), {"reply": "tried"}]}))
    async with strict:
        await strict.inject(TriggerEvent("op", "manual", {}))
        await wait_for(lambda: strict.invocation_count == 1, 10)
        step = strict.recent_runs()[-1].steps[1]
        assert step.kind == "refused" and "unknown tool 'add_trigger'" in step.result
        assert strict.status()["execution_mode"] == "strict"


def test_open_mode_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="max_dynamic_triggers"):
        ProcessConfig(execution_mode="open", open_mode={"max_dynamic_triggers": -1})
    with pytest.raises(ValueError, match="execution_mode"):
        ProcessConfig(execution_mode="loose")

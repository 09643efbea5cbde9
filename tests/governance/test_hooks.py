"""Hooks through AgentProcess: session start/end, refusing a run, blocking or rewriting a tool
call, post-tool and run-end, accepted events, and the runtime's shared hooks running last."""

from __future__ import annotations

from typing import Any

import pytest

from runtime_core import AgentProcess, AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.governance.hooks import HookBlocked, HookContext, HookEvent, HookManager
from tests.helpers.polling import wait_for

SEEN: list[Any] = []


def echo_args(text: str) -> str:
    SEEN.append(text)
    return f"got {text}"


def config() -> ProcessConfig:
    return ProcessConfig(model={"provider": "scripted", "turns": [
        {"tool_calls": [{"name": "echo_args", "args": {"text": "original"}}]},
        {"reply": "done"}]})


async def test_hooks_see_the_whole_life_of_a_process() -> None:
    SEEN.clear()
    process = AgentProcess("hooked", config(), tools=[echo_args])
    order: list[str] = []

    async def record(ctx: HookContext) -> None:
        order.append(ctx.event.value)
        if ctx.event is HookEvent.SESSION_START:
            assert ctx.data["restart"] is False
        if ctx.event is HookEvent.PRE_TOOL:
            ctx.data["args"] = {"text": "rewritten"}

    for event in HookEvent:
        process.hooks.register(event, record)
    assert process.status()["hook_count"] == len(HookEvent)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1)
    await process.stop()
    assert SEEN == ["rewritten"]
    assert order == ["session_start", "task_created", "user_prompt_submit", "pre_tool",
                     "post_tool", "run_end", "session_end"]


async def test_a_hook_can_refuse_a_run_or_block_a_tool() -> None:
    SEEN.clear()
    process = AgentProcess("guarded", config(), tools=[echo_args])

    @process.hooks.on(HookEvent.USER_PROMPT_SUBMIT)
    async def refuse_secret_payloads(ctx: HookContext) -> None:
        if ctx.data["event"]["payload"].get("classified"):
            raise HookBlocked("classified payloads are not processed")

    @process.hooks.on(HookEvent.PRE_TOOL)
    async def no_echo(ctx: HookContext) -> None:
        raise HookBlocked("echo is disabled today")

    await process.start()
    await process.inject(TriggerEvent("t", "manual", {"classified": True}))
    await wait_for(lambda: len(process.dead_letters) == 1)
    letter = process.dead_letters[0]
    assert letter["reason"] == "blocked by hook"
    assert letter["error"] == "classified payloads are not processed"
    assert process.status()["consecutive_failures"] == 0
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1)
    assert SEEN == []
    step = process.recent_runs()[-1].steps[1]
    assert step.kind == "refused" and "blocked by hook: echo is disabled today" in step.result
    await process.stop()


async def test_shared_runtime_hooks_run_after_the_process_hooks() -> None:
    runtime = AgentRuntime()
    order: list[str] = []

    async def shared(ctx: HookContext) -> None:
        order.append(f"shared:{ctx.process}")

    async def own(ctx: HookContext) -> None:
        order.append("own")

    runtime.hooks.register(HookEvent.SESSION_START, shared)
    process = runtime.add_process("p", ProcessConfig())
    process.hooks.register(HookEvent.SESSION_START, own)
    await runtime.start_all()
    assert order == ["own", "shared:p"]
    await runtime.close()


async def test_a_failing_hook_is_logged_not_fatal_and_sync_hooks_are_refused() -> None:
    manager = HookManager()

    async def broken(ctx: HookContext) -> None:
        raise RuntimeError("hook bug")

    manager.register(HookEvent.RUN_END, broken)
    result = await manager.dispatch(HookEvent.RUN_END, process="p", data={})
    assert not result.blocked and result.errors[0][1].args == ("hook bug",)

    def sync_hook(ctx: HookContext) -> None:
        return None

    with pytest.raises(TypeError, match="must be an async function"):
        manager.register(HookEvent.RUN_END, sync_hook)  # type: ignore[arg-type]
    once_id = manager.register(HookEvent.SESSION_END, broken, once=True)
    await manager.dispatch(HookEvent.SESSION_END, process="p", data={})
    assert once_id not in manager.registered()

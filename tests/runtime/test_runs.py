"""Runs: the step loop, budgets, policy rejection, tool errors, cancellation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime_core import (
    AgentProcess,
    ModelRequest,
    ModelTurn,
    ProcessConfig,
    RunState,
    ToolCall,
    ToolContext,
    TriggerEvent,
    tool,
)
from tests.helpers.polling import wait_for


def scripted(*turns: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"provider": "scripted", "turns": list(turns), **extra}


async def run_one(
    process: AgentProcess, payload: dict[str, Any] | None = None, trigger_type: str = "manual"
) -> Any:
    before = len(process.recent_runs())
    if process.state.value == "created":
        await process.start()
    await process.inject(TriggerEvent("t", trigger_type, payload or {}))
    await wait_for(lambda: len(process.recent_runs()) > before, what="the run to finish")
    return process.recent_runs()[-1]


async def test_reply_only_run_succeeds_and_commits_conversation() -> None:
    process = AgentProcess("p", ProcessConfig(model=scripted({"reply": "hello"})))
    run = await run_one(process, {"x": 1})
    assert run.state is RunState.SUCCEEDED
    assert run.reply == "hello"
    assert run.model_calls == 1 and run.tool_calls == 0
    messages = process.conversation.messages()
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert '"x": 1' in messages[0]["content"]
    assert messages[1]["content"] == "hello"
    await process.stop()


async def test_tool_calls_run_sequentially_in_order_and_feed_the_next_turn() -> None:
    seen: list[str] = []
    observed: list[list[dict[str, Any]]] = []

    async def first(x: int) -> str:
        seen.append(f"first:{x}")
        return "one"

    def second(y: str = "d") -> dict[str, str]:
        seen.append(f"second:{y}")
        return {"two": y}

    class Recorder:
        name = "recorder"

        async def complete(self, request: ModelRequest) -> ModelTurn:
            observed.append(list(request.messages))
            if request.turn == 0:
                return ModelTurn(tool_calls=(ToolCall("first", {"x": 1}, "a"),
                                             ToolCall("second", {}, "b")))
            return ModelTurn(reply="done")

    process = AgentProcess("p", ProcessConfig(), model=Recorder(),
                           tools=[tool(first, effect="read"), second])
    run = await run_one(process)
    assert run.state is RunState.SUCCEEDED
    assert seen == ["first:1", "second:d"]
    tool_messages = [m for m in observed[1] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["one", '{"two": "d"}']
    assert [s.kind for s in run.steps] == ["model", "tool", "tool", "model"]
    await process.stop()


async def test_tool_that_raises_becomes_an_observation_and_the_run_goes_on() -> None:
    def broken() -> str:
        raise RuntimeError("disk on fire")

    process = AgentProcess(
        "p",
        ProcessConfig(model=scripted({"tool_calls": [{"name": "broken"}]}, {"reply": "coped"})),
        tools=[broken],
    )
    run = await run_one(process)
    assert run.state is RunState.SUCCEEDED
    tool_step = run.steps[1]
    assert tool_step.kind == "tool" and not tool_step.ok
    assert "RuntimeError: disk on fire" in tool_step.result
    assert process.status()["consecutive_failures"] == 0
    await process.stop()


async def test_tool_refused_by_policy_is_an_observation_and_never_runs() -> None:
    ran: list[str] = []

    def dangerous() -> str:
        ran.append("dangerous")
        return "boom"

    def safe() -> str:
        ran.append("safe")
        return "ok"

    process = AgentProcess(
        "p",
        ProcessConfig(
            model=scripted(
                {"tool_calls": [{"name": "dangerous"}, {"name": "safe"}]}, {"reply": "done"}
            ),
            allowed_tools=["safe"],
        ),
        tools=[dangerous, safe],
    )
    run = await run_one(process)
    assert run.state is RunState.SUCCEEDED
    assert ran == ["safe"]
    kinds = [(s.kind, s.name) for s in run.steps]
    assert kinds == [("model", "scripted"), ("refused", "dangerous"), ("tool", "safe"),
                     ("model", "scripted")]
    assert "refused by policy" in run.steps[1].result
    assert run.tool_calls == 1
    await process.stop()


async def test_unknown_tool_and_bad_arguments_are_observations() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    process = AgentProcess(
        "p",
        ProcessConfig(model=scripted(
            {"tool_calls": [{"name": "nope"}, {"name": "add", "args": {"a": "x"}}]},
            {"reply": "done"},
        )),
        tools=[add],
    )
    run = await run_one(process)
    assert run.state is RunState.SUCCEEDED
    assert "unknown tool 'nope'" in run.steps[1].result
    assert "invalid arguments for tool 'add'" in run.steps[2].result
    assert "b" in run.steps[2].result  # the missing field is named
    await process.stop()


async def test_model_error_fails_the_run_with_reason_model() -> None:
    process = AgentProcess("p", ProcessConfig(model=scripted({"raise": "rate limited"})))
    run = await run_one(process)
    assert run.state is RunState.FAILED
    assert run.reason == "model"
    assert "rate limited" in run.error
    await process.stop()


@pytest.mark.parametrize(
    ("budget", "turns", "fragment"),
    [
        ({"max_model_calls": 3},
         [{"tool_calls": [{"name": "noop"}], "repeat": "forever"}], "model-call budget of 3"),
        ({"max_tool_calls": 2},
         [{"tool_calls": [{"name": "noop"}], "repeat": "forever"}], "tool-call budget of 2"),
        ({"max_output_chars": 10}, [{"reply": "x" * 11}], "output budget of 10"),
        ({"max_seconds": 0.05}, [{"sleep": 5, "reply": "late"}], "elapsed budget"),
    ],
)
async def test_each_run_budget_is_enforced_independently(
    budget: dict[str, Any], turns: list[dict[str, Any]], fragment: str
) -> None:
    def noop() -> str:
        return ""

    limits = {"max_model_calls": None, "max_tool_calls": None, "max_output_chars": None,
              "max_seconds": None, **budget}
    process = AgentProcess(
        "p", ProcessConfig(model=scripted(*turns), run_budget=limits), tools=[noop]
    )
    run = await run_one(process)
    assert run.state is RunState.FAILED
    assert run.reason == "budget"
    assert fragment in run.error
    await process.stop()


async def test_budget_counts_are_exact() -> None:
    def noop() -> str:
        return ""

    process = AgentProcess(
        "p",
        ProcessConfig(
            model=scripted({"tool_calls": [{"name": "noop"}], "repeat": "forever"}),
            run_budget={"max_model_calls": 4, "max_tool_calls": None},
        ),
        tools=[noop],
    )
    run = await run_one(process)
    assert run.model_calls == 4
    assert run.tool_calls == 4
    await process.stop()


async def test_tool_context_carries_idempotency_key_and_applies_updates_on_success() -> None:
    keys: list[str] = []

    def count(ctx: ToolContext) -> int:
        keys.append(ctx.idempotency_key)
        total = int(ctx.get("count", 0)) + 1
        ctx.set("count", total)
        return total

    process = AgentProcess(
        "p",
        ProcessConfig(model=scripted({"tool_calls": [{"name": "count"}, {"name": "count"}]},
                                     {"reply": "ok"})),
        tools=[count],
    )
    run = await run_one(process)
    assert process.context.get("count") == 2
    assert keys == [f"{run.run_id}:2", f"{run.run_id}:3"]
    assert "ctx" not in tool(count).parameters.get("properties", {})
    await process.stop()


async def test_scripted_model_restarts_each_run_and_selects_scripts() -> None:
    model = {
        "provider": "scripted",
        "turns": [{"reply": "default-1"}],
        "scripts": {"nightly": [{"reply": "cron script"}], "alert": [{"reply": "alert script"}]},
        "select": {"by_payload_field": "kind", "by_trigger_type": {"cron": "nightly"}},
    }
    process = AgentProcess("p", ProcessConfig(model=model))
    assert (await run_one(process)).reply == "default-1"
    assert (await run_one(process)).reply == "default-1"  # every run starts at turn one
    assert (await run_one(process, trigger_type="cron")).reply == "cron script"
    assert (await run_one(process, {"kind": "alert"}, "cron")).reply == "alert script"
    await process.stop()


async def test_script_that_runs_out_fails_clearly() -> None:
    process = AgentProcess(
        "p", ProcessConfig(model=scripted({"tool_calls": [{"name": "missing"}]}))
    )
    run = await run_one(process)
    assert run.state is RunState.FAILED and run.reason == "model"
    assert "has 1 turn(s)" in run.error and "end the script with a reply" in run.error
    await process.stop()


async def test_payload_substitution_in_scripted_tool_arguments() -> None:
    got: list[Any] = []

    def echo(path: str, event: str) -> str:
        got.append((path, event))
        return "ok"

    process = AgentProcess(
        "p",
        ProcessConfig(model=scripted(
            {"tool_calls": [{"name": "echo", "args": {"path": "$payload.file.path",
                                                       "event": "$event_id"}}]},
            {"reply": "done"},
        )),
        tools=[echo],
    )
    run = await run_one(process, {"file": {"path": "/tmp/a.txt"}})
    assert got == [("/tmp/a.txt", run.event.event_id)]
    await process.stop()


async def test_concurrent_runs_do_not_interleave_conversation_messages() -> None:
    process = AgentProcess(
        "p",
        ProcessConfig(model=scripted({"sleep": 0.01, "reply": "r"}), concurrency=4,
                      context={"conversation_max_messages": 50}),
    )
    await process.start()
    for i in range(12):
        await process.inject(TriggerEvent("t", "manual", {"i": i}))
    await wait_for(lambda: process.invocation_count == 12)
    messages = process.conversation.messages()
    assert len(messages) == 24
    assert [m["role"] for m in messages] == ["user", "assistant"] * 12
    await process.stop()


async def test_stop_cancels_the_run_in_flight() -> None:
    process = AgentProcess("p", ProcessConfig(model=scripted({"sleep": 30, "reply": "never"})))
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: len(process.active_runs()) == 1)
    await process.stop()
    run = process.recent_runs()[-1]
    assert run.state is RunState.CANCELLED
    letter = process.dead_letters[-1]
    assert letter["reason"] == "process stopped" and letter["error"] == "run cancelled"


async def test_instructions_update_applies_from_the_next_run() -> None:
    seen: list[str] = []

    class Spy:
        name = "spy"

        async def complete(self, request: ModelRequest) -> ModelTurn:
            seen.append(request.messages[0]["content"])
            return ModelTurn(reply="ok")

    process = AgentProcess("p", ProcessConfig(instructions="old"), model=Spy())
    await run_one(process)
    process.update_instructions("new")
    await run_one(process)
    assert seen == ["old", "new"]
    await process.stop()


async def test_echo_is_the_offline_default_model() -> None:
    process = AgentProcess("p", ProcessConfig())
    run = await run_one(process, {"ping": True})
    assert run.state is RunState.SUCCEEDED
    assert run.reply.startswith("Handled manual ")
    assert '"ping": true' in run.reply
    await process.stop()


async def test_model_object_overrides_config_and_bad_turn_type_fails() -> None:
    class Bad:
        name = "bad"

        async def complete(self, request: ModelRequest) -> Any:
            return "not a turn"

    process = AgentProcess("p", ProcessConfig(), model=Bad())
    run = await run_one(process)
    assert run.state is RunState.FAILED and run.reason == "model"
    assert "not a ModelTurn" in run.error
    await process.stop()


async def test_sync_tool_runs_off_the_event_loop() -> None:
    import threading

    loop_thread = threading.get_ident()
    threads: list[int] = []

    def where() -> str:
        threads.append(threading.get_ident())
        return "ok"

    process = AgentProcess(
        "p", ProcessConfig(model=scripted({"tool_calls": [{"name": "where"}]}, {"reply": "x"})),
        tools=[where],
    )
    await run_one(process)
    assert threads and threads[0] != loop_thread
    await process.stop()
    await asyncio.sleep(0)


async def test_a_run_cancelled_during_a_write_says_its_outcome_is_unknown() -> None:
    started = asyncio.Event()

    async def slow_write(ctx: ToolContext) -> str:
        started.set()
        await asyncio.sleep(30)
        return "written"

    process = AgentProcess(
        "p", ProcessConfig(model=scripted({"tool_calls": [{"name": "slow_write"}]},
                                          {"reply": "ok"})),
        tools=[tool(slow_write, effect="write")],
    )
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await asyncio.wait_for(started.wait(), 5)
    await process.stop()
    error = process.dead_letters[-1]["error"]
    assert error.startswith("run cancelled while write tool slow_write (")
    assert "outcome is unknown" in error

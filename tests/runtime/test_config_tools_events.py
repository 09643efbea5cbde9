"""Config validation, tool schemas, scripted model files, the event notifier, the runtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runtime_core import (
    AgentProcess,
    AgentRuntime,
    EventNotifier,
    ProcessConfig,
    ProcessState,
    TriggerConfig,
    TriggerEvent,
    tool,
)
from runtime_core.agent.scripted import ScriptedModel, load_script_file
from runtime_core.agent.tools import ToolError, load_tool
from runtime_core.events import ProcessStopped, RunQueued
from tests.helpers.polling import wait_for

STATUS_KEYS = {
    "name", "process_id", "state", "suspend_reason", "execution_mode", "invocation_count",
    "consecutive_failures", "restart_count", "journal_enabled", "trigger_count",
    "dynamic_trigger_count", "triggers", "custom_tool_count", "rebuild_count",
    "spawned_process_count", "conversation_messages", "has_memory", "queue_size",
    "dead_letter_count", "filtered_count", "pending_retries", "uptime_seconds", "hook_count",
}


# -- config ------------------------------------------------------------------------------------
def test_unknown_keys_are_rejected_with_their_path() -> None:
    with pytest.raises(ValidationError) as err:
        ProcessConfig.model_validate({"concurency": 2})
    assert "concurency" in str(err.value)
    with pytest.raises(ValidationError) as err:
        ProcessConfig.model_validate({"trigger_delivery": {"max_retry": 1}})
    assert "trigger_delivery.max_retry" in str(err.value).replace("\n", ".").replace(" ", "")


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"restart_policy": "sometimes"}, "restart_policy"),
        ({"model": "gpt-5"}, "unknown model"),
        ({"model": {"provider": "scripted"}}, "needs 'turns' or 'scripts'"),
        ({"model": {"turns": [{"reply": "a", "raise": "b"}]}}, "not reply, raise"),
        ({"model": {"turns": [{"reply": "a"}], "select": {"by_trigger_type": {"cron": "x"}}}},
         "names script 'x'"),
        ({"tools": ["no_colon"]}, "package.module:function"),
        ({"triggers": [{"type": "telepathy"}]}, "unknown trigger type"),
        ({"triggers": [{"type": "interval"}]}, "needs 'seconds'"),
    ],
)
def test_bad_config_says_what_to_fix(data: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError) as err:
        ProcessConfig.model_validate(data)
    assert fragment in str(err.value)


def test_defaults_match_the_spec() -> None:
    config = ProcessConfig()
    assert config.concurrency == 1
    assert config.queue_size == 1000
    assert config.trigger_delivery.max_retries == 0
    assert config.trigger_delivery.dead_letter_size == 100
    assert config.restart_policy == "never"
    assert config.max_consecutive_failures == 3
    assert config.model == "echo"


# -- tools ---------------------------------------------------------------------------------------
def test_tool_schema_comes_from_the_signature() -> None:
    def search(query: str, limit: int = 5, tags: list[str] | None = None) -> list[str]:
        """Search the archive.

        More detail that the model does not need."""
        return []

    wrapped = tool(search, effect="read")
    assert wrapped.name == "search"
    assert wrapped.description == "Search the archive."
    assert wrapped.effect == "read"
    params = wrapped.parameters
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["properties"]["limit"]["type"] == "integer"
    assert params["properties"]["limit"]["default"] == 5


def test_undeclared_effect_is_a_write() -> None:
    assert tool(lambda: None, name="anon").effect == "write"


def test_tool_rejects_varargs_and_bad_effects() -> None:
    def many(*args: int) -> None:
        return None

    with pytest.raises(ToolError, match=r"\*args"):
        tool(many)
    with pytest.raises(ToolError, match="effect"):
        tool(lambda: None, name="x", effect="maybe")  # type: ignore[arg-type]


def test_load_tool_by_import_path_and_errors() -> None:
    loaded = load_tool("json:dumps", effect="read")
    assert loaded.name == "dumps"
    with pytest.raises(ToolError, match="cannot import module"):
        load_tool("no_such_module_xyz:fn")
    with pytest.raises(ToolError, match="has no attribute"):
        load_tool("json:no_such_fn")


async def test_tools_declared_in_config_are_loaded_at_start() -> None:
    process = AgentProcess(
        "p",
        ProcessConfig(
            model={"turns": [{"tool_calls": [{"name": "dumps", "args": {"obj": [1, 2]}}]},
                             {"reply": "ok"}]},
            tools=[{"path": "json:dumps", "effect": "read"}],
        ),
    )
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1)
    assert process.recent_runs()[-1].steps[1].result == "[1, 2]"
    await process.stop()


async def test_start_with_a_missing_tool_module_fails_and_raises() -> None:
    process = AgentProcess("p", ProcessConfig(tools=["nowhere_xyz.mod:fn"]))
    with pytest.raises(ToolError, match="nowhere_xyz"):
        await process.start()
    assert process.state is ProcessState.FAILED


# -- scripted model files ------------------------------------------------------------------------
def test_script_file_errors_name_the_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("turns:\n  - reply: hi\n    colour: blue\n")
    with pytest.raises(Exception, match=r"bad\.yaml: turns\.0\.colour"):
        load_script_file(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("turns: [\n")
    with pytest.raises(Exception, match="not valid YAML"):
        load_script_file(broken)
    with pytest.raises(Exception, match="cannot read model script"):
        load_script_file(tmp_path / "missing.yaml")


async def test_scripted_model_from_a_file_relative_to_base_dir(tmp_path: Path) -> None:
    (tmp_path / "script.yaml").write_text("- reply: from file\n")
    process = AgentProcess("p", ProcessConfig(model="scripted:script.yaml"), base_dir=tmp_path)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1)
    assert process.recent_runs()[-1].reply == "from file"
    await process.stop()
    assert isinstance(ScriptedModel.from_file(tmp_path / "script.yaml"), ScriptedModel)


# -- events --------------------------------------------------------------------------------------
def test_slow_subscriber_drops_oldest_and_counts() -> None:
    notifier = EventNotifier()
    slow = notifier.subscribe(maxsize=3)
    fast = notifier.subscribe(maxsize=100)
    for i in range(10):
        notifier.emit(RunQueued(process="p", event_id=str(i), trigger_type="manual"))
    kept = slow.drain()
    assert [e.event_id for e in kept] == ["7", "8", "9"]  # type: ignore[attr-defined]
    assert slow.dropped == 7
    assert len(fast.drain()) == 10 and fast.dropped == 0


def test_subscription_filters_by_kind_and_serialises() -> None:
    notifier = EventNotifier()
    sub = notifier.subscribe(kinds=["process.stopped"])
    notifier.emit(RunQueued(process="p", event_id="1", trigger_type="manual"))
    notifier.emit(ProcessStopped(process="p", process_id="x"))
    events = sub.drain()
    assert [e.kind for e in events] == ["process.stopped"]
    data = events[0].to_dict()
    assert data["kind"] == "process.stopped" and data["severity"] == "info"
    assert data["process"] == "p"


async def test_subscription_get_waits_for_the_next_event() -> None:
    import asyncio

    notifier = EventNotifier()
    sub = notifier.subscribe()
    getter = asyncio.create_task(sub.get())
    await asyncio.sleep(0)
    notifier.emit(ProcessStopped(process="p", process_id="x"))
    event = await asyncio.wait_for(getter, 1)
    assert event.kind == "process.stopped"
    sub.close()
    with pytest.raises(EOFError):
        await sub.get()


async def test_events_cover_a_run_from_queue_to_finish() -> None:
    process = AgentProcess("p", ProcessConfig(model={"turns": [{"reply": "ok"}]}))
    sub = process.notifier.subscribe()
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1)
    await process.stop()
    kinds = [e.kind for e in sub.drain()]
    for expected in ("process.state", "process.started", "run.queued", "run.started",
                     "run.step", "run.finished", "queue.depth", "process.stopped"):
        assert expected in kinds
    assert kinds.index("run.queued") < kinds.index("run.started") < kinds.index("run.finished")


# -- status and runtime --------------------------------------------------------------------------
async def test_status_has_every_key_and_is_json_serialisable() -> None:
    import json

    process = AgentProcess("p", ProcessConfig())
    status = process.status()
    assert set(status) >= STATUS_KEYS
    assert status["uptime_seconds"] is None and status["state"] == "created"
    assert "recovered" not in status
    await process.start()
    status = process.status()
    assert status["uptime_seconds"] is not None
    json.dumps(status)
    await process.stop()
    assert process.status()["uptime_seconds"] is None


async def test_runtime_manages_processes_and_shares_bus_broker_notifier() -> None:
    runtime = AgentRuntime()
    sub = runtime.notifier.subscribe()
    on_event = runtime.add_process(
        "on-event",
        ProcessConfig(triggers=[TriggerConfig(type="event", event_type="deploy.done")]),
    )
    on_message = runtime.add_process(
        "on-message", ProcessConfig(triggers=[{"type": "message", "topic": "reports.*"}])
    )
    with pytest.raises(ValueError, match="already exists"):
        runtime.add_process("on-event", ProcessConfig())
    await runtime.start_all()
    assert [p["state"] for p in runtime.list_processes()] == ["running", "running"]
    assert runtime.event_bus.emit("deploy.done", {"v": 2}, source="ci") == 1
    assert runtime.broker.publish("reports.daily", "hello", sender="cron") == 1
    await wait_for(lambda: on_event.invocation_count == 1 and on_message.invocation_count == 1)
    assert on_event.recent_runs()[-1].event.payload["data"] == {"v": 2}
    assert on_message.recent_runs()[-1].event.payload["content"] == "hello"
    status = runtime.status()
    assert status["process_count"] == 2
    assert status["processes"]["on-event"]["trigger_count"] == 1
    await runtime.stop_all()
    assert {e.process for e in sub.drain()} == {"on-event", "on-message"}
    await runtime.remove_process("on-event")
    assert [p["name"] for p in runtime.list_processes()] == ["on-message"]
    with pytest.raises(KeyError, match="no process named"):
        runtime.get_process("on-event")


async def test_interval_trigger_fires_on_the_injected_clock() -> None:
    from runtime_core import FakeClock

    clock = FakeClock()
    process = AgentProcess(
        "p", ProcessConfig(triggers=[{"type": "interval", "seconds": 30}]), clock=clock
    )
    await process.start()
    trigger_id = process.status()["triggers"][0]["id"]
    assert trigger_id.startswith("interval-")
    await wait_for(lambda: clock.sleepers >= 1)
    assert process.invocation_count == 0
    clock.advance(30)
    await wait_for(lambda: process.invocation_count == 1)
    clock.advance(30)
    await wait_for(lambda: process.invocation_count == 2)
    assert process.recent_runs()[-1].event.payload["tick"] == 2
    await process.stop()


def test_trigger_ids_are_stable_per_config() -> None:
    from runtime_core.triggers.registry import trigger_id_for

    a = TriggerConfig(type="event", event_type="x")
    b = TriggerConfig(type="event", event_type="x")
    c = TriggerConfig(type="event", event_type="y")
    assert trigger_id_for(a) == trigger_id_for(b) != trigger_id_for(c)


async def test_events_received_by_a_trigger_at_stop_are_dead_lettered_not_lost() -> None:
    runtime = AgentRuntime()
    process = runtime.add_process(
        "p",
        ProcessConfig(model={"turns": [{"sleep": 30, "reply": "slow"}]},
                      triggers=[{"type": "event", "event_type": "ping"}], queue_size=1),
    )
    await process.start()
    for _ in range(4):
        runtime.event_bus.emit("ping", {})
    await wait_for(lambda: len(process.active_runs()) == 1 and process.status()["queue_size"] == 1)
    await process.stop()
    # one cancelled run, one queued, one held by the listener, one still inside the trigger
    assert len(process.dead_letters) == 4
    assert {d["reason"] for d in process.dead_letters} == {"process stopped"}

"""Code written for the reference runtime's Python API runs here, where the shapes do not
conflict with the spec (an awaitable that also works unawaited, a keyword alias, a thin
wrapper); where a name has no equivalent, it fails with a message that says what to write.

One test per point of issue 35's list: ``await lifecycle.transition(...)``, the
ConversationBuffer's method names, the trigger classes' arguments, ``journal.read("name")``,
``last_checkpoint()`` read as a dict, ``await runtime.add_process(...)``,
``EventNotifier(sinks=[CallbackSink(...)])``, the trigger registry under
``runtime_core.triggers``, and ``RuntimeConfig``, ``BudgetState``, ``escalate``."""

from __future__ import annotations

import asyncio
import importlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import runtime_core
from runtime_core import (
    AgentProcess,
    AgentRuntime,
    BudgetState,
    CallbackSink,
    ConversationBuffer,
    EscalationTarget,
    EventBus,
    EventNotifier,
    InMemoryJournal,
    JournalEntry,
    MessageBroker,
    ProcessConfig,
    ProcessLifecycle,
    ProcessState,
    RuntimeConfig,
    RuntimeEvent,
    SQLiteJournal,
    StateError,
    escalate,
)
from runtime_core.events import ProcessFailed
from runtime_core.journal import ReadFilter
from runtime_core.triggers import (
    CronTrigger,
    EventTrigger,
    FileWatchTrigger,
    MessageTrigger,
    TriggerConfig,
    WebhookTrigger,
)
from tests.helpers.polling import wait_for

SCRIPTED = {"provider": "scripted", "turns": [{"reply": "done"}]}


# -- ProcessLifecycle.transition: awaitable, and not ------------------------------------------
async def test_a_transition_may_be_awaited_or_not() -> None:
    lifecycle = ProcessLifecycle()
    awaited = await lifecycle.transition(ProcessState.STARTING, reason="start() called")
    assert awaited.to_state is ProcessState.STARTING and awaited.reason == "start() called"
    plain = lifecycle.transition(ProcessState.RUNNING)  # unawaited, as our own code calls it
    assert plain.from_state is ProcessState.STARTING and lifecycle.state is ProcessState.RUNNING
    with pytest.raises(StateError, match="Allowed targets"):
        await lifecycle.transition(ProcessState.CREATED)
    assert [t.to_state for t in lifecycle.history] == [ProcessState.STARTING,
                                                       ProcessState.RUNNING]


# -- ConversationBuffer: the reference's method names -----------------------------------------
async def test_the_conversation_buffer_answers_to_the_reference_s_methods() -> None:
    buffer = ConversationBuffer(max_messages=3)
    buffer.append({"role": "user", "content": "one"})
    buffer.extend([{"role": "assistant", "content": "two"}, {"role": "user", "content": "3"}])
    await buffer.async_append({"role": "assistant", "content": "four"})  # evicts the oldest
    got = buffer.get_messages()
    assert [m["content"] for m in got] == ["two", "3", "four"] and len(buffer) == 3
    got.clear()  # a copy
    assert len(await buffer.async_snapshot()) == 3
    await buffer.async_replace([{"role": "user", "content": "again"}])
    again = ConversationBuffer.from_dict(buffer.to_dict())
    assert again.to_dict() == {"max_messages": 3, "enabled": True,
                               "messages": [{"role": "user", "content": "again"}]}
    buffer.clear()
    assert buffer.get_messages() == [] and buffer.messages() == []


# -- the trigger classes take the reference's arguments ---------------------------------------
def test_trigger_classes_take_the_reference_s_arguments(tmp_path: Path) -> None:
    cron = CronTrigger(cron_expression="*/5 * * * *", timezone="Europe/Paris")
    assert cron.cron_expression == "*/5 * * * *" and cron.timezone == "Europe/Paris"
    assert cron.trigger_id.startswith("cron-") and len(cron.trigger_id) == len("cron-") + 8
    named = CronTrigger("0 9 * * 1-5", trigger_id="weekday-9")
    assert (named.trigger_id, named.expression, named.timezone) == ("weekday-9", "0 9 * * 1-5",
                                                                    "UTC")
    ours = CronTrigger("cron-1", "*/5 * * * *", None, runtime_core.FakeClock())
    assert (ours.trigger_id, ours.expression) == ("cron-1", "*/5 * * * *")
    with pytest.raises(TypeError, match="cron_expression="):
        CronTrigger()
    with pytest.raises(ValueError, match="invalid cron expression"):
        CronTrigger(cron_expression="every minute")

    bus, broker = EventBus(), MessageBroker()
    event = EventTrigger(bus, "order.created", source_filter="shop", trigger_id="orders")
    assert (event.trigger_id, event.event_type, event.source_filter) == (
        "orders", "order.created", "shop")
    assert EventTrigger(bus, "order.created").trigger_id.startswith("event-")
    message = MessageTrigger(broker, "alerts.*")
    assert message.topic == "alerts.*" and message.trigger_id.startswith("message-")
    with pytest.raises(TypeError, match="topic"):
        MessageTrigger(broker, 42)  # type: ignore[arg-type]

    watch = FileWatchTrigger(str(tmp_path), patterns=["*.pdf"], events=["created"],
                             recursive=False, debounce_seconds=0.2, poll_interval=2.0)
    assert watch.trigger_id == f"file_watch-{tmp_path}" and watch.patterns == ["*.pdf"]
    assert watch.watch_events == frozenset({"added"}) and watch.recursive is False
    assert watch.debounce_ms == 200
    config = TriggerConfig(type="file_watch", watch_path=str(tmp_path))
    assert FileWatchTrigger("fw-1", config).trigger_id == "fw-1"


async def test_a_reference_shaped_event_trigger_fires() -> None:
    bus = EventBus()
    trigger = EventTrigger(bus, "order.created", source_filter="shop")
    await trigger.start()
    bus.emit("order.created", {"id": 1}, source="elsewhere")  # filtered out
    bus.emit("order.created", {"id": 2}, source="shop")
    got = await asyncio.wait_for(trigger.wait_for_next(), 5)
    assert got.payload["data"] == {"id": 2} and got.trigger_id == trigger.trigger_id
    await trigger.stop()


# -- journal.read("name") and last_checkpoint() as a dict -------------------------------------
@pytest.fixture(params=["memory", "sqlite"])
async def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    made = InMemoryJournal() if request.param == "memory" else SQLiteJournal(tmp_path / "j.db")
    await made.open()
    yield made
    await made.close()


async def test_read_takes_a_process_name_and_the_reference_s_keywords(journal: Any) -> None:
    for n in range(3):
        await journal.append(JournalEntry(process_id="watcher", entry_type="context_update",
                                          data={"key": "n", "value": n}))
    await journal.append(JournalEntry(process_id="other", entry_type="context_update"))
    await journal.checkpoint("watcher", {"context_state": {"n": 2}})
    entries = await journal.read("watcher")
    assert [e.entry_type for e in entries] == ["context_update"] * 3 + ["checkpoint"]
    assert len(await journal.read("watcher", entry_type="context_update", limit=2)) == 2
    assert await journal.read("watcher", since=datetime(2999, 1, 1, tzinfo=UTC)) == []
    assert len(await journal.read(ReadFilter(process="watcher"))) == 4
    with pytest.raises(TypeError, match="inside the ReadFilter"):
        await journal.read(ReadFilter(process="watcher"), limit=1)


async def test_last_checkpoint_reads_as_the_reference_s_dict(journal: Any) -> None:
    assert await journal.last_checkpoint("watcher") is None
    state = {"context_state": {"invoices_processed": 40}, "lifecycle_state": "running"}
    await journal.checkpoint("watcher", state)
    checkpoint = await journal.last_checkpoint("watcher")
    assert checkpoint["context_state"] == {"invoices_processed": 40}
    assert checkpoint.get("invocation_count", 0) == 0 and "lifecycle_state" in checkpoint
    assert dict(checkpoint) == state and checkpoint == state
    assert checkpoint.entry_type == "checkpoint" and checkpoint.data == state  # still an entry
    await journal.checkpoint("empty", {})
    assert await journal.last_checkpoint("empty")  # an empty state is still a checkpoint


# -- await runtime.add_process(...) -----------------------------------------------------------
async def test_add_process_may_be_awaited_or_not() -> None:
    runtime = AgentRuntime()
    awaited = await runtime.add_process("one", ProcessConfig(model=SCRIPTED))
    plain = runtime.add_process("two", ProcessConfig(model=SCRIPTED))
    assert isinstance(awaited, AgentProcess) and isinstance(plain, AgentProcess)
    assert runtime.get_process("one") is awaited and awaited.name == "one"
    await runtime.close()


# -- EventNotifier(sinks=[CallbackSink(...)]) -------------------------------------------------
async def test_a_notifier_takes_callback_sinks() -> None:
    seen: list[RuntimeEvent] = []
    heard: list[str] = []

    async def later(event: RuntimeEvent) -> None:
        heard.append(event.event_type)

    notifier = EventNotifier(sinks=[
        CallbackSink(seen.append, events=["process.started", "process.stopped"]),
        CallbackSink(later, min_severity="warning"),
    ])
    process = AgentProcess("p", ProcessConfig(model=SCRIPTED), event_notifier=notifier)
    await process.start()
    await process.stop()
    assert [e.event_type for e in seen] == ["process.started", "process.stopped"]
    assert seen[0].agent_id == "p" and seen[0].data["process_id"] == process.process_id
    assert heard == []  # nothing at warning or above
    notifier.emit(ProcessFailed(process="p", process_id="x", reason="test"))
    await wait_for(lambda: heard == ["process.failed"])
    with pytest.raises(TypeError, match="CallbackSink"):
        EventNotifier(sinks=[print])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="min_severity"):
        CallbackSink(print, min_severity="loud")


async def test_an_async_callback_sink_runs_on_the_loop() -> None:
    heard: list[str] = []

    async def later(event: RuntimeEvent) -> None:
        heard.append(event.event_type)

    notifier = EventNotifier([CallbackSink(later)])
    process = AgentProcess("q", ProcessConfig(model=SCRIPTED), event_notifier=notifier)
    await process.start()
    await wait_for(lambda: "process.started" in heard)
    await process.stop()


# -- the registry under runtime_core.triggers, and the new names -----------------------------
@pytest.mark.parametrize("name", ["register_trigger_type", "registered_trigger_types",
                                  "unregister_trigger_type", "CronTrigger", "TriggerConfig"])
def test_the_trigger_registry_imports_from_runtime_core_triggers(name: str) -> None:
    module = importlib.import_module("runtime_core.triggers")
    assert getattr(module, name) is getattr(runtime_core, name, getattr(module, name))
    assert name in module.__all__


def test_runtime_config_adds_its_processes() -> None:
    config = RuntimeConfig(processes={"watcher": ProcessConfig(model=SCRIPTED)})
    assert RuntimeConfig.from_dict(config.to_dict()).processes.keys() == {"watcher"}
    runtime = AgentRuntime(config)
    assert list(runtime.processes) == ["watcher"]
    assert runtime.get_process("watcher").state is ProcessState.CREATED
    with pytest.raises(ValidationError, match="promptui serve --cluster"):
        RuntimeConfig(distributed={"enabled": True})


def test_budget_state_says_what_to_use() -> None:
    with pytest.raises(TypeError, match=r"BudgetConfig.*status\(\)\['budget'\]"):
        BudgetState(runtime_core.BudgetConfig(enabled=True))


async def test_escalate_emits_on_the_bus_and_never_raises() -> None:
    bus = EventBus()
    got: list[dict[str, Any]] = []
    bus.subscribe("ops.page", got.append)
    outcome = await escalate(EscalationTarget(event_type="ops.page"), {"type": "low_confidence"},
                             event_bus=bus)
    assert outcome.delivered and got and got[0]["data"] == {"type": "low_confidence"}
    nowhere = await escalate(EscalationTarget(webhook_url="https://127.0.0.1/hook"), {"x": 1})
    assert not nowhere.delivered and "webhook" in nowhere.error


def test_a_webhook_trigger_takes_the_reference_s_arguments() -> None:
    hook = WebhookTrigger("/orders", 0, "127.0.0.1", "s3cret", signature_scheme="github")
    assert (hook.trigger_id, hook.path, hook.port, hook.signature_header) == (
        "webhook-0/orders", "/orders", 0, "X-Hub-Signature-256")
    named = WebhookTrigger(path="/in", port=8081, trigger_id="in", max_body_bytes=1024)
    assert (named.trigger_id, named.port, named.max_body_bytes) == ("in", 8081, 1024)
    with pytest.raises(TypeError, match="filter_expression"):
        WebhookTrigger(path="/in", event_filter=lambda event: True)
    ours = WebhookTrigger("webhook-a", TriggerConfig(type="webhook", webhook_path="/a"))
    assert ours.trigger_id == "webhook-a" and ours.path == "/a"
    with pytest.raises(TypeError, match="from the config"):
        WebhookTrigger("webhook-a", TriggerConfig(type="webhook"), port=1)

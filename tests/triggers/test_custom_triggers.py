"""Custom trigger types (register_trigger_type): the registry, the config (custom_config), and a
custom trigger's events taking the built-ins' road in: filter_expression, journaled (a durable
SQLite journal) before acknowledged, dead letters."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import runtime_core
from runtime_core import (
    AgentProcess,
    ProcessConfig,
    TriggerConfig,
    TriggerEvent,
    register_trigger_type,
    registered_trigger_types,
    unregister_trigger_type,
)
from runtime_core.journal import SQLiteJournal
from runtime_core.triggers.base import AcceptFn, AcceptResult
from tests.helpers.polling import wait_for


class ListTrigger:
    """The reference's BaseTrigger shape: wait_for_next() hands over one event at a time."""

    def __init__(self, config: TriggerConfig) -> None:
        self.trigger_id = f"list-{config.custom_config.get('name', 'x')}"
        self._todo: asyncio.Queue[TriggerEvent] = asyncio.Queue()
        for item in config.custom_config.get("items", []):
            self._todo.put_nowait(TriggerEvent(self.trigger_id, "list", item))
        self.started = self.stopped = False

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    async def wait_for_next(self) -> TriggerEvent:
        return await self._todo.get()


class IteratorTrigger:
    """An async iterator of events."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def __aiter__(self) -> AsyncIterator[TriggerEvent]:
        for item in self.items:
            yield TriggerEvent("", payload=item)


class PushSource:
    """A push trigger: acknowledges its source only when the process has the event durably."""

    instances: list[PushSource] = []

    def __init__(self, config: TriggerConfig) -> None:
        self.db = Path(config.custom_config["db"])
        self.accept: AcceptFn | None = None
        self.acked: list[tuple[AcceptResult, str, bool]] = []
        PushSource.instances.append(self)

    async def start(self, accept: AcceptFn) -> None:
        self.accept = accept

    async def stop(self) -> None:
        self.accept = None

    async def deliver(self, payload: dict[str, Any]) -> None:
        assert self.accept is not None
        event = TriggerEvent("", payload=payload)
        result, reason = await self.accept(event)
        self.acked.append((result, reason, _journaled(self.db, event.event_id)))


def _journaled(db: Path, event_id: str) -> bool:
    """Read the journal file as another program would: is the event durable there?"""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT data FROM entries WHERE entry_type = 'event_accepted'"
                            ).fetchall()
    return any(json.loads(data).get("event_id") == event_id for (data,) in rows)


@pytest.fixture(autouse=True)
def custom_types() -> Iterator[None]:
    register_trigger_type("list", lambda config, **_: ListTrigger(config))
    register_trigger_type("iterate", lambda config, **_: IteratorTrigger(
        config.custom_config["items"]))
    register_trigger_type("push", lambda config, *, event_bus=None, broker=None:
                          PushSource(config))
    yield
    for name in ("list", "iterate", "push"):
        unregister_trigger_type(name)
    PushSource.instances.clear()


def _journal(tmp_path: Path) -> dict[str, Any]:
    return {"level": "checkpoint", "path": str(tmp_path / "journal.db")}


# -- the registry and the config ---------------------------------------------------------------
def test_the_registry() -> None:
    assert {"list", "iterate", "push", "cron", "webhook"} <= set(registered_trigger_types())
    assert registered_trigger_types() == sorted(registered_trigger_types())
    with pytest.raises(ValueError, match=r"already registered\. Pass overwrite=True"):
        register_trigger_type("list", ListTrigger)
    register_trigger_type("list", ListTrigger, overwrite=True)
    with pytest.raises(ValueError, match="is a built-in trigger type"):
        register_trigger_type("cron", ListTrigger)
    with pytest.raises(ValueError, match="must start with a letter"):
        register_trigger_type("9 lives", ListTrigger)
    with pytest.raises(TypeError, match="must be callable"):
        register_trigger_type("nope", "not a factory")  # type: ignore[arg-type]
    unregister_trigger_type("never-registered")  # nothing happens
    with pytest.raises(ValueError, match="cannot be unregistered"):
        unregister_trigger_type("webhook")
    assert runtime_core.registered_trigger_types is registered_trigger_types


def test_custom_config_belongs_to_custom_types() -> None:
    config = TriggerConfig(type="list", custom_config={"items": [{"n": 1}]},
                           filter_expression="n > 0")
    assert config.custom_config == {"items": [{"n": 1}]}
    with pytest.raises(ValidationError, match="custom_config does not apply to a 'cron'"):
        TriggerConfig(type="cron", cron_expression="* * * * *", custom_config={"a": 1})
    with pytest.raises(ValidationError, match="seconds does not apply to a custom 'list'"):
        TriggerConfig(type="list", seconds=3)
    with pytest.raises(ValidationError, match="custom_config must be JSON data"):
        TriggerConfig(type="list", custom_config={"when": object()})
    with pytest.raises(ValidationError, match=r"unknown trigger type 'sqs'; choose from .*list"
                                              r".*register_trigger_type\(\)"):
        TriggerConfig(type="sqs")


async def test_a_factory_that_returns_no_trigger_fails_the_start() -> None:
    register_trigger_type("broken", lambda config, **_: object())
    try:
        process = AgentProcess("p", ProcessConfig(triggers=[{"type": "broken"}]))
        with pytest.raises(TypeError, match="returned object, which is not a trigger"):
            await process.start()
        assert process.state.value == "failed"
        await process.stop()
    finally:
        unregister_trigger_type("broken")


# -- through a process ---------------------------------------------------------------------------
async def test_a_custom_pull_trigger_is_filtered_journaled_and_runs(tmp_path: Path) -> None:
    items = [{"kind": "keep", "n": 1}, {"kind": "skip", "n": 2}, {"kind": "keep", "n": 3}]
    config = ProcessConfig(model="echo", journal=_journal(tmp_path), triggers=[
        {"type": "list", "custom_config": {"name": "a", "items": items},
         "filter_expression": "kind == 'keep'"}])
    process = AgentProcess("puller", config)
    await process.start()
    await wait_for(lambda: process.invocation_count == 2, what="two runs")
    status = process.status()
    assert status["filtered_count"] == 1
    assert status["triggers"][0]["type"] == "list"
    await process.stop()
    journal = SQLiteJournal(tmp_path / "journal.db")
    await journal.open()
    try:
        from runtime_core.journal import EntryType, ReadFilter

        accepted = await journal.read(ReadFilter(process="puller",
                                                 entry_type=EntryType.EVENT_ACCEPTED))
    finally:
        await journal.close()
    assert [e.data["trigger_type"] for e in accepted] == ["list", "list"]
    assert [e.data.get("trigger_id") for e in accepted] == ["list-a", "list-a"]


async def test_an_async_iterator_trigger_runs_each_event() -> None:
    process = AgentProcess("iter", ProcessConfig(model="echo", triggers=[
        {"type": "iterate", "custom_config": {"items": [{"n": 1}, {"n": 2}]}}]))
    await process.start()
    await wait_for(lambda: process.invocation_count == 2, what="two runs")
    assert [r.event.trigger_type for r in process.recent_runs()] == ["iterate", "iterate"]
    await process.stop()


async def test_a_custom_push_trigger_is_acknowledged_only_once_durable(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    config = ProcessConfig(
        model={"turns": [{"raise": "model down"}]}, journal=_journal(tmp_path),
        max_consecutive_failures=5,
        triggers=[{"type": "push", "custom_config": {"db": str(db)},
                   "filter_expression": "payload.priority is not None"}])
    process = AgentProcess("pusher", config)
    await process.start()
    source = PushSource.instances[-1]
    await source.deliver({"priority": "high"})
    await source.deliver({"other": 1})
    assert source.acked[0] == (AcceptResult.ACCEPTED, "accepted", True)  # durable when acked
    assert source.acked[1][:2] == (AcceptResult.FILTERED, "filtered")
    assert source.acked[1][2] is False  # a filtered event is never journaled as accepted
    # the run fails (the model raises) and the event goes to the dead letters, durably
    await wait_for(lambda: len(process.dead_letters) == 1, what="a dead letter")
    assert process.dead_letters[0]["reason"] == "retries exhausted"
    await process.suspend()
    await process.stop()
    assert source.accept is None  # stopped with its process
    journal = SQLiteJournal(db)
    await journal.open()
    try:
        stored = await journal.dead_letters("pusher")
    finally:
        await journal.close()
    assert [(d.reason, d.event["payload"]) for d in stored] == [
        ("retries exhausted", {"priority": "high"})]
    assert stored[0].event["trigger_type"] == "push"


async def test_a_failed_process_refuses_a_push_trigger_event(tmp_path: Path) -> None:
    config = ProcessConfig(model={"turns": [{"raise": "boom"}]}, max_consecutive_failures=1,
                           journal=_journal(tmp_path),
                           triggers=[{"type": "push", "custom_config": {"db": str(
                               tmp_path / "journal.db")}}])
    process = AgentProcess("refuser", config)
    await process.start()
    source = PushSource.instances[-1]
    await source.deliver({"n": 1})
    await wait_for(lambda: process.state.value == "failed", what="failed")
    await source.deliver({"n": 2})
    assert source.acked[1][:2] == (AcceptResult.UNAVAILABLE, "process failed")
    await process.stop()

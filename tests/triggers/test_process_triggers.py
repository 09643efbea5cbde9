"""Triggers driving real processes: a webhook whose 202 means durable, filters counted, live
add/remove on running and suspended processes, file watches and cron through a process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_core import AgentProcess, FakeClock, ProcessConfig, TriggerEvent
from runtime_core.journal import EntryType, InMemoryJournal, ReadFilter
from tests.helpers.polling import wait_for


def webhook_config(**extra: Any) -> ProcessConfig:
    trigger = {"type": "webhook", "webhook_port": 0, "webhook_path": "/alerts", **extra}
    return ProcessConfig(model={"turns": [{"reply": "handled"}]}, triggers=[trigger],
                         journal={"level": "checkpoint", "backend": "memory"})


def port_of(process: AgentProcess) -> int:
    return int(process.status()["triggers"][0]["port"])


async def test_webhook_202_means_the_event_is_journaled_and_runs() -> None:
    journal = InMemoryJournal()
    process = AgentProcess("hooks", webhook_config(), journal=journal)
    await process.start()
    async with httpx.AsyncClient() as client:
        response = await client.post(f"http://127.0.0.1:{port_of(process)}/alerts",
                                     json={"severity": "high"})
    assert response.status_code == 202
    event_id = response.json()["event_id"]
    accepted = await journal.read(ReadFilter(process="hooks",
                                             entry_type=EntryType.EVENT_ACCEPTED))
    assert [e.data["event_id"] for e in accepted] == [event_id]
    await wait_for(lambda: process.invocation_count == 1)
    assert process.recent_runs()[-1].event.payload == {"severity": "high"}
    await process.stop()


async def test_webhook_filter_answers_ignored_and_counts() -> None:
    process = AgentProcess("hooks", webhook_config(
        filter_expression='payload.severity in ["high", "critical"]'))
    await process.start()
    async with httpx.AsyncClient() as client:
        url = f"http://127.0.0.1:{port_of(process)}/alerts"
        low = await client.post(url, json={"severity": "low"})
        high = await client.post(url, json={"severity": "critical"})
    assert low.status_code == 200 and low.json()["status"] == "ignored"
    assert high.status_code == 202
    assert process.status()["filtered_count"] == 1
    await wait_for(lambda: process.invocation_count == 1)
    await process.stop()


async def test_webhook_503_when_the_queue_is_full_or_the_process_failed() -> None:
    config = webhook_config()
    config.queue_size = 1
    process = AgentProcess("hooks", config)
    await process.start()
    await process.suspend()
    async with httpx.AsyncClient() as client:
        url = f"http://127.0.0.1:{port_of(process)}/alerts"
        assert (await client.post(url, json={"n": 1})).status_code == 202
        await asyncio.sleep(0)
        statuses = [(await client.post(url, json={"n": i})).status_code for i in range(2, 5)]
        full = [s for s in statuses if s == 503]
        assert full, statuses  # the queue holds one (plus one in a suspended worker's hand)
        response = await client.post(url, json={"n": 9})
        assert response.status_code == 503 and response.headers["retry-after"] == "30"
    assert process.dead_letters == []  # a 503 leaves the event with its sender
    await process.stop()


async def test_add_and_remove_triggers_live() -> None:
    clock = FakeClock()
    process = AgentProcess("live", ProcessConfig(), clock=clock)
    with pytest.raises(ValueError, match="needs 'seconds'"):
        await process.add_trigger({"type": "interval"})
    offline = await process.add_trigger({"type": "interval", "seconds": 10})
    assert offline.startswith("interval-")
    assert process.status()["triggers"][0]["active"] is False  # starts with the process
    await process.start()
    assert process.status()["triggers"][0]["active"] is True
    await process.suspend()
    event_trigger = await process.add_trigger({"type": "message", "topic": "t"})
    assert process.status()["trigger_count"] == 2
    # while suspended its events queue
    process.broker.publish("t", "hello")
    await wait_for(lambda: process.status()["queue_size"] == 1)
    with pytest.raises(KeyError, match="no trigger 'nope'"):
        await process.remove_trigger("nope")
    await process.remove_trigger(event_trigger)
    assert process.status()["trigger_count"] == 1
    with pytest.raises(ValueError, match="already has trigger"):
        await process.add_trigger({"type": "interval", "seconds": 10})
    await process.resume()
    await wait_for(lambda: process.invocation_count == 1)
    await process.stop()


async def test_events_held_by_a_removed_trigger_are_dead_lettered() -> None:
    process = AgentProcess(
        "held", ProcessConfig(model={"turns": [{"sleep": 30, "reply": "slow"}]}, queue_size=1))
    await process.start()
    trigger_id = await process.add_trigger({"type": "message", "topic": "jobs"})
    for i in range(4):
        process.broker.publish("jobs", i)
    await wait_for(lambda: len(process.active_runs()) == 1
                   and process.status()["queue_size"] == 1)
    await process.remove_trigger(trigger_id)
    reasons = [d["reason"] for d in process.dead_letters]
    assert reasons == ["trigger removed", "trigger removed"]  # held by the listener + buffered
    await process.stop()


async def test_file_watch_through_a_process(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    process = AgentProcess("files", ProcessConfig(triggers=[{
        "type": "file_watch", "watch_path": str(inbox), "patterns": ["*.csv"],
        "debounce": 0.05}]))
    await process.start()
    await asyncio.sleep(0.3)  # let the OS watch settle before the first write
    (inbox / "a.csv").write_text("1,2\n")
    (inbox / "ignored.txt").write_text("x")
    await wait_for(lambda: process.invocation_count >= 1, timeout=10)
    payload = process.recent_runs()[0].event.payload
    assert payload["path"] == "a.csv" and payload["change"] == "added"
    assert "file_watch" in process.status()["triggers"][0]["type"]
    assert "dropped_events" in process.status()["triggers"][0]
    await process.stop()


async def test_cron_through_a_process_with_an_injected_clock() -> None:
    clock = FakeClock(wall_start=1_767_225_600.0)  # 2026-01-01T00:00:00Z
    process = AgentProcess("nightly", ProcessConfig(triggers=[{
        "type": "cron", "cron_expression": "*/5 * * * *"}]), clock=clock)
    await process.start()
    for _ in range(11):
        await wait_for(lambda: clock.sleepers >= 1)
        clock.advance(30)
        await asyncio.sleep(0.01)
    await wait_for(lambda: process.invocation_count == 1)
    assert process.recent_runs()[0].event.payload["scheduled_time"].startswith(
        "2026-01-01T00:05:00")
    await process.stop()


async def test_inject_is_the_manual_trigger() -> None:
    process = AgentProcess("m", ProcessConfig(triggers=[{"type": "manual"}]))
    await process.start()
    assert process.status()["triggers"][0]["type"] == "manual"
    await process.inject(TriggerEvent("by-hand", "manual", {"x": 1}))
    await wait_for(lambda: process.invocation_count == 1)
    await process.stop()


async def test_two_processes_talk_over_the_bus_and_the_broker() -> None:
    from runtime_core import AgentRuntime, ToolContext, tool

    def announce(ctx: ToolContext) -> str:
        ctx.emit("build.finished", {"build": 7})
        ctx.publish("reports.daily", "all green")
        return "announced"

    runtime = AgentRuntime()
    runtime.add_process("builder", ProcessConfig(model={"turns": [
        {"tool_calls": [{"name": "announce"}]}, {"reply": "built"}]}),
        tools=[tool(announce, effect="write")])
    listener = runtime.add_process("listener", ProcessConfig(triggers=[
        {"type": "event", "event_type": "build.finished"}]))
    reader = runtime.add_process("reader", ProcessConfig(triggers=[
        {"type": "message", "topic": "reports.*"}]))
    await runtime.start_all()
    await runtime.get_process("builder").inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: listener.invocation_count == 1 and reader.invocation_count == 1)
    event_payload = listener.recent_runs()[0].event.payload
    assert event_payload["data"] == {"build": 7} and event_payload["source"] == "builder"
    message = reader.recent_runs()[0].event.payload
    assert message["content"] == "all green" and message["sender"] == "builder"
    await runtime.close()

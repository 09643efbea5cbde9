"""Behavioral health through AgentProcess: the process feeds the monitor, announces anomalies
and recoveries, acts on on_anomaly once, and keeps the history across a restart."""

from __future__ import annotations

from typing import Any

from runtime_core import AgentProcess, EventBus, ProcessConfig, ProcessState, TriggerEvent, tool
from runtime_core.journal import InMemoryJournal
from tests.helpers.polling import wait_for

STUCK = {"provider": "scripted", "turns": [{"reply": "fine"}],
         "scripts": {"stuck": [{"tool_calls": [{"name": "poll", "args": {"q": "jobs"}}],
                                "repeat": 3}, {"reply": "gave up"}],
                     "broken": [{"raise": "boom"}]},
         "select": {"by_payload_field": "script"}}


def poll_jobs(q: str) -> str:
    return "still busy"


POLL = tool(poll_jobs, name="poll")  # the tool the stuck model keeps calling


def make(on_anomaly: str = "pause", **health: Any) -> AgentProcess:
    config = ProcessConfig(model=STUCK, health={"enabled": True, "on_anomaly": on_anomaly,
                                                "stuck_threshold": 3, **health})
    return AgentProcess("watcher", config, tools=[POLL])


async def run(process: AgentProcess, script: str = "ok") -> None:
    before = len(process.recent_runs())
    await process.inject(TriggerEvent("t", "manual", {"script": script}))
    await wait_for(lambda: len(process.recent_runs()) > before)


async def test_a_stuck_run_pauses_the_process_once() -> None:
    process = make("pause")
    sub = process.notifier.subscribe(kinds=["health.anomaly", "health.recovered"])
    await process.start()
    await run(process, "stuck")
    await wait_for(lambda: process.state is ProcessState.SUSPENDED)
    assert process.suspend_reason == "health"
    events = sub.drain()
    assert [e.kind for e in events] == ["health.recovered", "health.anomaly"]  # same run
    assert events[1].to_dict()["anomaly_type"] == "stuck"
    status = process.status()
    assert status["health_anomalies"] == 1 and status["health"]["anomaly_count"] == 1
    await process.resume()
    await run(process, "stuck")  # the same anomaly within the cooldown: not acted on again
    assert process.state is ProcessState.RUNNING
    assert [e.kind for e in sub.drain()] == []
    await process.stop()


async def test_log_keeps_running_and_stop_stops_for_good() -> None:
    logged = make("log")
    await logged.start()
    await run(logged, "stuck")
    assert logged.state is ProcessState.RUNNING and logged.status()["health_anomalies"] == 1
    await logged.stop()
    stopper = AgentProcess("s", ProcessConfig(model=STUCK, restart_policy="always", health={
        "enabled": True, "on_anomaly": "stop", "stuck_threshold": 3}), tools=[POLL])
    await stopper.start()
    await run(stopper, "stuck")
    await wait_for(lambda: stopper.state is ProcessState.STOPPED)
    assert stopper.restart_count == 0


async def test_escalate_emits_on_the_bus_then_suspends() -> None:
    bus = EventBus()
    got: list[dict[str, Any]] = []
    bus.subscribe("ops.health", got.append)
    process = AgentProcess("watcher", ProcessConfig(model=STUCK, health={
        "enabled": True, "on_anomaly": "escalate", "stuck_threshold": 3,
        "escalation": {"event_type": "ops.health"}}), tools=[POLL], event_bus=bus)
    await process.start()
    await run(process, "stuck")
    await wait_for(lambda: process.state is ProcessState.SUSPENDED and bool(got))
    assert len(got) == 1
    assert got[0]["data"]["type"] == "health_anomaly"
    assert got[0]["data"]["anomaly_type"] == "stuck"
    assert got[0]["data"]["process_name"] == "watcher"
    assert got[0]["data"]["details"]["consecutive_count"] == 3
    await process.stop()


async def test_high_error_rate_is_acted_on_when_the_failure_is_recorded() -> None:
    process = make("pause", error_window=2, error_rate_threshold=0.5)
    process.config.max_consecutive_failures = 100
    await process.start()
    await run(process, "ok")
    assert process.state is ProcessState.RUNNING
    await run(process, "broken")
    await wait_for(lambda: process.state is ProcessState.SUSPENDED)
    assert process.status()["health"]["anomaly_count"] == 1
    await process.stop()


async def test_health_history_survives_a_restart_through_the_journal() -> None:
    journal = InMemoryJournal()
    config = ProcessConfig(model=STUCK, journal={"level": "checkpoint", "backend": "memory"},
                           health={"enabled": True, "stuck_threshold": 3})
    first = AgentProcess("watcher", config, tools=[POLL], journal=journal)
    await first.start()
    await run(first, "stuck")
    await first.stop()
    second = AgentProcess("watcher", config, tools=[POLL], journal=journal)
    await second.start()
    assert second.status()["health_anomalies"] == 1
    await run(second, "stuck")  # still within the cooldown after the restart: not reported
    assert second.status()["health_anomalies"] == 1
    await second.stop()


async def test_disabled_health_adds_nothing() -> None:
    process = AgentProcess("plain", ProcessConfig())
    assert "health" not in process.status() and "health_anomalies" not in process.status()

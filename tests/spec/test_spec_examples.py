"""Every code example of the four spec files (/work/shared/spec/*.md), run against runtime_core.

Each example is run as written, with ``promptise.runtime`` replaced by ``runtime_core`` and
``model="openai:gpt-5-mini"`` replaced by a scripted (offline, deterministic) model; what the
spec's text says about it is asserted. Changes beyond that are named in a comment where they
are made: sleeps become polls with a timeout, journals go under ``tmp_path``, a webhook binds
port 0 on 127.0.0.1, ``servers=`` is dropped where the example's point is not MCP.

Processes are closed at the end of each test (``close()``: memory and secrets too); that
``stop()`` alone lets a program exit is ``test_program_that_stops_a_journaled_process_exits``.

run-lifecycle-and-recovery.md has no code example (prose and a state table only).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from runtime_core import (
    AgentProcess,
    AgentRuntime,
    BudgetConfig,
    EscalationTarget,
    FakeClock,
    HealthConfig,
    HealthMonitor,
    HookEvent,
    JournalConfig,
    MissionConfig,
    ProcessConfig,
    ProcessState,
    RuntimeEvent,
    SecretScopeConfig,
    ToolContext,
    ToolCostAnnotation,
    TriggerConfig,
    TriggerEvent,
)
from runtime_core.events import (
    HealthAnomaly,
    ProcessFailed,
    ProcessRestarted,
    ProcessStateChanged,
)
from runtime_core.journal import InMemoryJournal, JournalEntry, ReplayEngine, SQLiteJournal
from runtime_core.journal.provider import ReadFilter
from tests.helpers.polling import settle, wait_for

SPEC = Path("/work/shared/spec")


# -- helpers -----------------------------------------------------------------------------------
def scripted(*turns: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A scripted model setting (the offline stand-in for ``"openai:gpt-5-mini"``)."""
    return {"provider": "scripted", "turns": list(turns), **extra}


REPLY = scripted({"reply": "All services are healthy."})


def record(process: AgentProcess) -> list[RuntimeEvent]:
    events: list[RuntimeEvent] = []
    process.notifier.add_callback(events.append)
    return events


def manual(**payload: Any) -> TriggerEvent:
    return TriggerEvent(trigger_id="manual", trigger_type="manual", payload=payload)


def bump(ctx: ToolContext) -> int:
    """Count one more run in the context key ``counter``."""
    counter = int(ctx.get("counter", 0)) + 1
    ctx.set("counter", counter)
    return counter


def search(query: str) -> list[str]:
    """A read tool a stuck agent keeps calling."""
    return []


# One run: call bump, then reply. The conversation gets 2 messages per run.
COUNTING = scripted({"tool_calls": [{"name": "bump"}]}, {"reply": "counted"})
# One run that calls search('pipelines') three times in a row, then replies (not empty).
STUCK = scripted({"tool_calls": [{"name": "search", "args": {"query": "pipelines"}}],
                  "repeat": 3}, {"reply": "Pipelines look fine today."})


@pytest.fixture
async def closing() -> AsyncIterator[Callable[[AgentProcess], AgentProcess]]:
    """Register a process to be closed when the test ends (its journal too)."""
    made: list[AgentProcess] = []

    def keep(process: AgentProcess) -> AgentProcess:
        made.append(process)
        return process

    yield keep
    for process in reversed(made):
        await process.close()


def test_the_spec_files_are_the_ones_these_tests_were_written_for() -> None:
    """The four spec files exist and still contain the first line of each example."""
    if not SPEC.is_dir():
        pytest.skip(f"the spec is not at {SPEC}")
    firsts = {
        "agent-processes.md": [
            "from promptise.runtime import AgentProcess, ProcessConfig, TriggerConfig, "
            "TriggerEvent",
            "await process.suspend()  # e.g. during a maintenance window",
            "from promptise.runtime import AgentProcess, JournalConfig, ProcessConfig",
            'ProcessConfig(model="openai:gpt-5-mini", concurrency=3)',
            "for entry in process.dead_letters:",
            'restart_policy="on_failure",',
            'trigger_id = await process.add_trigger({"type": "cron", "cron_expression": '
            '"0 * * * *"})',
            "@process.hooks.on(HookEvent.SESSION_START)",
            'plan = await process.rewind_plan(entry_id, mode="both")',
            "    BudgetConfig, HealthConfig, JournalConfig, MissionConfig, ProcessConfig,",
        ],
        "behavioral-health.md": [
            "from promptise.runtime import ProcessConfig, HealthConfig\n",
            "from promptise.runtime import ProcessConfig, HealthConfig, EscalationTarget",
            "name: pipeline-monitor",
            '"type": "health_anomaly",',
            'process.status()["health"]',
            "async with OrchestrationClient(",
            "class LoopGuard:",
        ],
        "journal-and-replay.md": [
            "from promptise.runtime.journal import FileJournal, JournalEntry, ReplayEngine",
            "from promptise.runtime.config import JournalConfig",
        ],
        "run-lifecycle-and-recovery.md": ["Generic Run states"],
    }
    for name, lines in firsts.items():
        text = (SPEC / name).read_text(encoding="utf-8")
        for line in lines:
            assert line in text, f"{name} no longer contains {line!r}"


# == agent-processes.md ========================================================================
async def test_quick_start_runs_once_per_injected_event(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, the opening example (``import asyncio`` ... ``async def main()``):
    a process on a cron schedule, run once now with inject(); prints ``running 1``."""
    process = closing(AgentProcess(
        name="health-checker",
        config=ProcessConfig(
            model=REPLY,
            instructions="You monitor infrastructure health.",
            triggers=[TriggerConfig(type="cron", cron_expression="*/5 * * * *")],
        ),
    ))
    await process.start()  # runs on the cron schedule from now on

    # Run it once now, without waiting for the schedule
    await process.inject(TriggerEvent(
        trigger_id="manual", trigger_type="manual", payload={"reason": "ad-hoc check"},
    ))
    # The spec sleeps 5 s; poll for the run instead.
    await wait_for(lambda: process.status()["invocation_count"] >= 1, what="one run")

    status = process.status()
    assert (status["state"], status["invocation_count"]) == ("running", 1)
    json.dumps(status)  # "a JSON-serializable dict"
    assert [(t["type"], t["source"]) for t in status["triggers"]] == [("cron", "config")]
    assert status["trigger_count"] == 1
    await process.stop()
    assert process.status()["state"] == "stopped"
    assert process.status()["uptime_seconds"] is None


async def test_suspend_pauses_and_resume_runs_the_queue_in_order(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "suspend() and resume()": ``await process.suspend()  # e.g. during a
    maintenance window`` / ``print(process.suspend_reason)  # "manual"`` / ``await
    process.resume()``. Events wait in the queue in arrival order; resume() runs them in
    that order."""
    process = closing(AgentProcess("maintenance", ProcessConfig(model=REPLY)))
    await process.start()

    await process.suspend()  # e.g. during a maintenance window
    assert process.suspend_reason == "manual"
    assert process.state is ProcessState.SUSPENDED
    events = [manual(n=n) for n in range(3)]
    for event in events:
        await process.inject(event)
    assert process.status()["queue_size"] == 3
    assert process.invocation_count == 0  # nothing runs while suspended

    await process.resume()
    await wait_for(lambda: process.invocation_count == 3, what="the queued runs")
    assert process.state is ProcessState.RUNNING
    assert process.suspend_reason is None
    assert [run.event.event_id for run in process.recent_runs()] == \
        [event.event_id for event in events]


async def test_a_new_process_object_recovers_from_the_journal(
        tmp_path: Path, closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Recovery on start": ``from promptise.runtime import AgentProcess,
    JournalConfig, ProcessConfig`` ... ``print(process.recovered)``. A first object ran once
    (setting ``counter``) and stopped cleanly; a new one with the same name continues."""
    config = ProcessConfig(
        model=COUNTING,
        # level given: the spec's JournalConfig(path=...) alone keeps no journal here, see
        # test_journal_config_with_only_a_path_journals_at_checkpoint_level
        journal=JournalConfig(path=str(tmp_path / "journal"), level="checkpoint"),
    )
    first = closing(AgentProcess("pipeline-watcher", config, tools=[bump]))
    await first.start()
    assert first.recovered is None  # nothing was restored: a fresh journal
    await first.inject(manual())
    await wait_for(lambda: first.invocation_count == 1, what="the first run")
    await first.close()

    process = closing(AgentProcess("pipeline-watcher", config, tools=[bump]))
    await process.start()
    recovered = process.recovered
    assert recovered is not None
    expected = {'lifecycle_state': 'stopped', 'context_keys': ['counter'],
                'mission_restored': False, 'budget_restored': False,
                'conversation_messages': 2, 'invocation_count': 1}
    assert {key: recovered.get(key) for key in expected} == expected
    assert process.context.get("counter") == 1
    status = process.status()
    assert status["invocation_count"] == 1
    assert status["conversation_messages"] == 2
    assert status["recovered"] == recovered


async def test_recovery_after_a_clean_stop_replays_one_entry(
        tmp_path: Path, closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Recovery on start": the printed dict's ``'entries_replayed': 1``."""
    config = ProcessConfig(
        model=COUNTING,
        journal=JournalConfig(path=str(tmp_path / "journal"), level="checkpoint"),
    )
    first = closing(AgentProcess("pipeline-watcher", config, tools=[bump]))
    await first.start()
    await first.inject(manual())
    await wait_for(lambda: first.invocation_count == 1, what="the first run")
    await first.close()
    process = closing(AgentProcess("pipeline-watcher", config, tools=[bump]))
    await process.start()
    assert process.recovered is not None
    assert process.recovered["entries_replayed"] == 1


async def test_journal_config_with_only_a_path_journals_at_checkpoint_level(
        tmp_path: Path, closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Recovery on start": ``journal=JournalConfig(path=
    ".promptise/journal"),  # level="checkpoint"`` (and the Governance example's
    ``journal=JournalConfig(path="./pipeline-journal")``): a path alone journals at the
    default "checkpoint" level; "ProcessConfig has no journal by default (level="none")"."""
    assert ProcessConfig().journal.level == "none"
    assert JournalConfig(path=str(tmp_path / "journal")).level == "checkpoint"
    config = ProcessConfig(model=COUNTING, journal=JournalConfig(path=str(tmp_path / "j")))
    first = closing(AgentProcess("pipeline-watcher", config, tools=[bump]))
    await first.start()
    assert first.status()["journal_enabled"] is True
    await first.inject(manual())
    await wait_for(lambda: first.invocation_count == 1, what="the first run")
    await first.close()
    process = closing(AgentProcess("pipeline-watcher", config, tools=[bump]))
    await process.start()
    assert process.recovered is not None
    assert process.recovered["context_keys"] == ["counter"]


@pytest.mark.slow
def test_program_that_stops_a_journaled_process_exits(tmp_path: Path) -> None:
    """agent-processes.md, the opening example's ``await process.stop()`` ending
    ``asyncio.run(main())``, with the journal of "Recovery on start" added: once main() has
    returned, no thread may be left that keeps the interpreter from exiting."""
    code = textwrap.dedent(f"""
        import asyncio, os, threading
        from runtime_core import AgentProcess, JournalConfig, ProcessConfig, TriggerEvent

        async def main():
            process = AgentProcess("health-checker", ProcessConfig(
                model={REPLY!r},
                journal=JournalConfig(path={str(tmp_path / "journal")!r}, level="checkpoint")))
            await process.start()
            await process.inject(TriggerEvent("manual", "manual", {{}}))
            while process.invocation_count < 1:
                await asyncio.sleep(0.01)
            await process.stop()

        asyncio.run(main())
        left = [t.name for t in threading.enumerate()
                if t is not threading.main_thread() and not t.daemon]
        print(left)
        os._exit(1 if left else 0)  # exit now either way: never hang the test
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, f"threads left: {done.stdout.strip()} {done.stderr[-2000:]}"


@pytest.mark.parametrize("concurrency", [3, None], ids=["concurrency=3", "default"])
async def test_concurrency_three_runs_in_parallel(
        concurrency: int | None, closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Trigger events and the queue": ``ProcessConfig(model=...,
    concurrency=3)  # up to 3 runs in parallel``; with concurrency=1 (the default) runs never
    overlap."""
    slow = scripted({"sleep": 0.2, "reply": "done"})
    config = ProcessConfig(model=slow) if concurrency is None else \
        ProcessConfig(model=slow, concurrency=concurrency)
    expected = concurrency or 1
    process = closing(AgentProcess("parallel", config))
    running, peak = 0, 0

    def track(event: RuntimeEvent) -> None:
        nonlocal running, peak
        if event.kind == "run.started":
            running += 1
            peak = max(peak, running)
        elif event.kind == "run.finished":
            running -= 1

    process.notifier.add_callback(track)
    await process.start()
    for n in range(4):
        await process.inject(manual(n=n))
    await wait_for(lambda: len(process.active_runs()) == expected,
                   what=f"{expected} runs at once")
    assert process.status()["queue_size"] == 4 - expected
    await wait_for(lambda: process.invocation_count == 4, what="all four runs")
    assert peak == expected, f"{peak} runs overlapped"


async def test_dead_letters_are_listed_redelivered_and_cleared(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Dead letters": ``for entry in process.dead_letters:`` ...
    ``requeued = await process.redeliver_dead_letters()  # or event_ids=[...]`` /
    ``process.clear_dead_letters()``. Events queued at stop() are dead-lettered ("process
    stopped"), oldest first, with event, reason, error, attempts and dead_lettered_at."""
    process = closing(AgentProcess("pipeline", ProcessConfig(model=REPLY)))
    await process.start()
    await process.suspend()  # so the events are still queued when stop() comes
    first, second, third = manual(n=1), manual(n=2), manual(n=3)
    for event in (first, second, third):
        await process.inject(event)
    await process.stop()

    seen = [(entry["reason"], entry["event"].payload) for entry in process.dead_letters]
    assert seen == [("process stopped", {"n": 1}), ("process stopped", {"n": 2}),
                    ("process stopped", {"n": 3})]
    for entry in process.dead_letters:
        assert {"event", "reason", "error", "attempts", "dead_lettered_at"} <= set(entry)
        assert isinstance(entry["event"], TriggerEvent)
    assert process.status()["dead_letter_count"] == 3

    await process.start()
    requeued = await process.redeliver_dead_letters(event_ids=[first.event_id])
    assert requeued == 1
    await wait_for(lambda: process.invocation_count == 1, what="the redelivered run")
    assert [entry["event"].event_id for entry in process.dead_letters] == \
        [second.event_id, third.event_id]
    assert await process.redeliver_dead_letters(event_ids=[second.event_id]) == 1
    await wait_for(lambda: process.invocation_count == 2, what="the second redelivery")
    assert process.clear_dead_letters() == 1
    assert process.dead_letters == []
    assert process.status()["dead_letter_count"] == 0


async def test_restart_policy_on_failure_restarts_with_backoff(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Restart policies": ``ProcessConfig(..., restart_policy=
    "on_failure", max_restarts=5, restart_backoff=2.0, max_consecutive_failures=3)``. After 3
    failed events in a row the process is FAILED; it restarts after 2 s, then 4 s; a
    successful run resets the attempt count; context and process_id are kept. (A FakeClock
    stands in for the wall clock, so the backoff costs no time.)"""
    clock = FakeClock()
    model = scripted({"reply": "ok"}, scripts={"bad": [{"raise": "upstream said no"}]},
                     select={"by_payload_field": "script"})
    process = closing(AgentProcess("flaky", ProcessConfig(
        model=model,
        restart_policy="on_failure",
        max_restarts=5,
        restart_backoff=2.0,          # 2 s, 4 s, 8 s, ... (max 60 s)
        max_consecutive_failures=3,
    ), clock=clock))
    events = record(process)
    await process.start()
    process.context.put("cursor", 7)
    process_id = process.process_id

    async def fail_three_times() -> None:
        for _ in range(3):
            await process.inject(manual(script="bad"))
        await wait_for(lambda: process.state is ProcessState.FAILED, what="FAILED")

    def restarted() -> list[ProcessRestarted]:
        return [e for e in events if isinstance(e, ProcessRestarted)]

    await fail_three_times()
    assert any(isinstance(e, ProcessFailed) for e in events)
    clock.advance(2.0 - 1 / 64)
    await settle(50)
    assert process.state is ProcessState.FAILED  # not before restart_backoff
    clock.advance(1 / 64)
    await wait_for(lambda: process.state is ProcessState.RUNNING, what="the first restart")
    assert [(e.attempt, e.max_restarts) for e in restarted()] == [(1, 5)]
    assert process.restart_count == 1
    assert process.status()["consecutive_failures"] == 0  # a fresh streak

    await fail_three_times()  # the second attempt in a row waits twice as long
    clock.advance(4.0 - 1 / 64)
    await settle(50)
    assert process.state is ProcessState.FAILED
    clock.advance(1 / 64)
    await wait_for(lambda: process.state is ProcessState.RUNNING, what="the second restart")
    assert [(e.attempt, e.max_restarts) for e in restarted()] == [(1, 5), (2, 5)]

    await process.inject(manual(script="good"))
    await wait_for(lambda: process.restart_count == 0, what="the count reset by a success")
    assert process.process_id == process_id
    assert process.context.get("cursor") == 7


async def test_live_triggers_are_added_and_removed(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Live triggers": ``trigger_id = await process.add_trigger({"type":
    "cron", "cron_expression": "0 * * * *"})`` / ``await process.remove_trigger(trigger_id)``.
    IDs are stable (``<type>-<digest>``); an invalid config raises ValueError, an unknown ID
    KeyError; on a process that is not up the trigger starts with the next start()."""
    config = ProcessConfig(model=REPLY, triggers=[{"type": "interval", "seconds": 3600}])
    process = closing(AgentProcess("watcher", config))
    await process.start()
    (kept,) = [t["id"] for t in process.status()["triggers"]]

    trigger_id = await process.add_trigger({"type": "cron", "cron_expression": "0 * * * *"})
    assert re.fullmatch(r"cron-[0-9a-f]{8}", trigger_id)
    status = process.status()
    assert status["trigger_count"] == 2
    added = next(t for t in status["triggers"] if t["id"] == trigger_id)
    assert (added["type"], added["source"], added["active"]) == ("cron", "config", True)

    await process.remove_trigger(trigger_id)
    assert [t["id"] for t in process.status()["triggers"]] == [kept]  # the other keeps its ID
    with pytest.raises(KeyError):
        await process.remove_trigger(trigger_id)
    with pytest.raises(ValueError):
        await process.add_trigger({"type": "cron", "cron_expression": "every hour"})
    assert process.status()["trigger_count"] == 1  # nothing was added

    # The same config gets the same ID on another process object; added before start(),
    # the trigger starts with the next start().
    other = closing(AgentProcess("other", ProcessConfig(model=REPLY)))
    same = await other.add_trigger({"type": "cron", "cron_expression": "0 * * * *"})
    assert same == trigger_id
    await other.start()
    (started,) = other.status()["triggers"]
    assert (started["id"], started["active"]) == (trigger_id, True)


async def test_session_start_hook_sees_the_restart_flag(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Instructions, messages and hooks": a hook registered with
    ``@process.hooks.on(HookEvent.SESSION_START)`` runs when the process starts, with
    ``ctx.data["restart"]`` (False for your own start())."""
    process = closing(AgentProcess("hooked", ProcessConfig(model=REPLY)))
    calls: list[Any] = []

    @process.hooks.on(HookEvent.SESSION_START)
    async def announce(ctx: Any) -> None:
        calls.append(ctx.data["restart"])

    assert process.status()["hook_count"] == 1
    await process.start()
    assert calls == [False]


async def test_session_start_hook_example_prints_process_id(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Instructions, messages and hooks": ``@process.hooks.on(
    HookEvent.SESSION_START)`` / ``async def announce(ctx):`` / ``print(ctx.process_id,
    "started; restart:", ctx.data["restart"])``."""
    process = closing(AgentProcess("hooked", ProcessConfig(model=REPLY)))
    printed: list[tuple[Any, ...]] = []

    @process.hooks.on(HookEvent.SESSION_START)
    async def announce(ctx: Any) -> None:
        printed.append((ctx.process_id, "started; restart:", ctx.data["restart"]))

    await process.start()
    assert printed == [(process.process_id, "started; restart:", False)]


async def test_rewind_plan_previews_and_rewind_restores(
        tmp_path: Path, closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Rewind": ``plan = await process.rewind_plan(entry_id, mode=
    "both")`` / ``print(plan.entries_affected)`` / ``result = await process.rewind(entry_id,
    mode="both")``. The plan changes nothing; the rewind restores context and conversation to
    just before the entry, suspends a running process ("rewind") meanwhile and resumes it,
    and keeps the history. Without a journal both raise RuntimeError."""
    process = closing(AgentProcess("rewinder", ProcessConfig(
        model=COUNTING, journal=JournalConfig(path=str(tmp_path / "journal"),
                                              level="checkpoint")), tools=[bump]))
    await process.start()
    await process.inject(manual(n=1))
    await wait_for(lambda: process.invocation_count == 1, what="run 1")
    second = manual(n=2)
    await process.inject(second)
    await wait_for(lambda: process.invocation_count == 2, what="run 2")
    assert process.context.get("counter") == 2
    assert process.status()["conversation_messages"] == 4

    journal = process.journal
    assert journal is not None
    await journal.flush()
    accepted = [e for e in await journal.read(ReadFilter(process="rewinder",
                                                         entry_type="event_accepted"))
                if e.data["event_id"] == second.event_id]
    assert accepted, "the second event's event_accepted entry"
    entry_id = accepted[0].entry_id
    entries_before = len(await journal.read(ReadFilter(process="rewinder")))

    plan = await process.rewind_plan(entry_id, mode="both")
    assert plan.entries_affected > 0
    assert plan.target_entry_id == entry_id
    assert [(c.key, c.before, c.after) for c in plan.context_changes] == [("counter", 2, 1)]
    assert plan.messages_dropped == 2
    assert process.context.get("counter") == 2  # a plan changes nothing

    events = record(process)
    result = await process.rewind(entry_id, mode="both")
    assert result.context_state == {"counter": 1}
    assert process.context.get("counter") == 1
    assert process.status()["conversation_messages"] == 2
    assert process.state is ProcessState.RUNNING
    moves = [(e.to_state, e.reason) for e in events if isinstance(e, ProcessStateChanged)]
    assert moves[0][0] == "suspended" and "rewind" in moves[0][1]  # suspend_reason "rewind"
    assert moves[-1][0] == "running"
    assert len(await journal.read(ReadFilter(process="rewinder"))) > entries_before  # kept

    plain = closing(AgentProcess("no-journal", ProcessConfig(model=REPLY)))
    await plain.start()
    with pytest.raises(RuntimeError):
        await plain.rewind_plan("no-journal:1")
    with pytest.raises(RuntimeError):
        await plain.rewind("no-journal:1", mode="both")


def governance_config(journal_path: str) -> ProcessConfig:
    """agent-processes.md, "Governance", as written (model swapped, journal path given)."""
    return ProcessConfig(
        model=REPLY,
        instructions="Monitor the data pipeline and respond to incidents.",
        servers={"tools": {"type": "http", "url": "http://localhost:8000/mcp"}},
        triggers=[
            TriggerConfig(type="webhook", webhook_path="/alerts", webhook_port=9090),
            TriggerConfig(type="cron", cron_expression="*/5 * * * *"),
        ],
        concurrency=2,
        restart_policy="on_failure",
        journal=JournalConfig(path=journal_path),
        budget=BudgetConfig(
            enabled=True,
            max_tool_calls_per_run=20,
            max_cost_per_day=50.0,
            on_exceeded="pause",
            tool_costs={"restart_service": ToolCostAnnotation(cost_weight=5.0,
                                                              irreversible=True)},
        ),
        health=HealthConfig(enabled=True, stuck_threshold=3, on_anomaly="escalate"),
        mission=MissionConfig(
            enabled=True,
            objective="Keep all services above 99.9% uptime.",
            success_criteria="No unresolved P1 incidents for more than 15 minutes.",
            eval_every=10,
        ),
        secrets=SecretScopeConfig(
            enabled=True,
            secrets={"api_key": "${MONITORING_API_KEY}"},
            default_ttl=3600,
        ),
    )


async def test_governance_example_config_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Governance": ``from promptise.runtime import (BudgetConfig,
    HealthConfig, JournalConfig, MissionConfig, ProcessConfig, SecretScopeConfig,
    ToolCostAnnotation, TriggerConfig,)`` / ``config = ProcessConfig(...)``. Each subsystem is
    on; the status shows budget, health, mission and secrets."""
    config = governance_config(str(tmp_path / "pipeline-journal"))
    assert (config.budget.enabled, config.health.enabled, config.mission.enabled,
            config.secrets.enabled) == (True, True, True, True)
    assert config.budget.tool_costs["restart_service"].irreversible is True
    # The constructor checks config.servers; this http entry is usable (nothing connects yet).
    AgentProcess("pipeline-monitor", config)

    # To start it offline: servers dropped (this example is not about MCP), the webhook on
    # port 0 of 127.0.0.1, and the secret's environment variable set.
    monkeypatch.setenv("MONITORING_API_KEY", "k-123")
    triggers = [config.triggers[0].model_copy(update={"webhook_port": 0}), config.triggers[1]]
    runnable = config.model_copy(update={"servers": {}, "triggers": triggers})
    process = closing(AgentProcess("pipeline-monitor", runnable))
    await process.start()
    status = process.status()
    assert status["state"] == "running"
    assert status["trigger_count"] == 2
    assert "budget" in status and "mission_state" in status
    assert status["health"]["is_healthy"] is True and status["health_anomalies"] == 0
    assert status["active_secrets"] == 1
    await process.inject(manual())
    await wait_for(lambda: process.invocation_count == 1, what="a governed run")


async def test_governance_is_off_by_default(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """agent-processes.md, "Start with governance disabled" / "Forgetting enabled=True":
    every governance config defaults to enabled=False, and ``SecretScopeConfig(secrets=
    {...})`` without enabled=True resolves no secrets; the optional status keys are absent."""
    for config in (BudgetConfig(), HealthConfig(), MissionConfig(), SecretScopeConfig()):
        assert config.enabled is False
    process = closing(AgentProcess("plain", ProcessConfig(
        model=REPLY, secrets=SecretScopeConfig(secrets={"api_key": "${NOT_SET_ANYWHERE}"}))))
    await process.start()  # an unset variable does not matter: nothing is resolved
    status = process.status()
    for key in ("budget", "health", "health_anomalies", "mission_state", "active_secrets"):
        assert key not in status, key


# == behavioral-health.md ======================================================================
async def test_health_pause_example_suspends_a_stuck_process(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """behavioral-health.md, the opening example: ``from promptise.runtime import
    ProcessConfig, HealthConfig`` / ``config = ProcessConfig(..., health=HealthConfig(
    enabled=True, on_anomaly="pause"))``. A run that calls the same tool with the same
    arguments 3 times is stuck: health.anomaly is emitted and the process is suspended
    ("health"); it does not resume by itself, its events queue until resume()."""
    config = ProcessConfig(
        model=STUCK,
        instructions="Monitor data pipelines.",
        health=HealthConfig(enabled=True, on_anomaly="pause"),
    )
    process = closing(AgentProcess("pipeline-monitor", config, tools=[search]))
    events = record(process)
    await process.start()
    await process.inject(manual())
    await wait_for(lambda: process.state is ProcessState.SUSPENDED, what="the health pause")
    assert process.suspend_reason == "health"
    anomalies = [e for e in events if isinstance(e, HealthAnomaly)]
    assert [(a.anomaly_type, a.details) for a in anomalies] == \
        [("stuck", {"tool_name": "search", "consecutive_count": 3})]

    await process.inject(manual())  # queues; a health suspension waits for resume()
    await settle(50)
    assert process.state is ProcessState.SUSPENDED
    assert process.status()["queue_size"] == 1
    await process.resume()
    await wait_for(lambda: process.invocation_count == 2, what="the queued run")


async def test_health_status_reports_the_stuck_anomaly(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """behavioral-health.md, "Reading health status": ``process.status()["health"]`` shows
    is_healthy False, anomaly_count 1, anomalies_by_type, and the latest anomaly's type,
    description and ISO timestamp; ``process.status()["health_anomalies"]  # 1``."""
    process = closing(AgentProcess("pipeline-monitor", ProcessConfig(
        model=STUCK, health=HealthConfig(enabled=True)), tools=[search]))
    await process.start()
    await process.inject(manual())
    await wait_for(lambda: process.invocation_count == 1, what="the stuck run")

    health = process.status()["health"]
    latest = health.pop("latest_anomaly")
    assert health == {
        "is_healthy": False,
        "anomaly_count": 1,
        "anomalies_by_type": {"stuck": 1, "loop": 0, "empty_response": 0,
                              "high_error_rate": 0},
    }
    assert latest["type"] == "stuck"
    assert latest["description"] == \
        "Agent stuck: tool 'search' called 3 times consecutively with identical arguments"
    assert datetime.fromisoformat(latest["timestamp"]).utcoffset() is not None
    assert process.status()["health_anomalies"] == 1
    assert process.state is ProcessState.RUNNING  # on_anomaly="log" (the default) keeps going


def full_health_config() -> ProcessConfig:
    """behavioral-health.md, "Configuration", as written (model swapped)."""
    return ProcessConfig(
        model=STUCK,
        instructions="Monitor data pipelines.",
        health=HealthConfig(
            enabled=True,
            stuck_threshold=3,        # 3 identical calls in a row = stuck
            loop_window=20,           # check the last 20 tool calls for loops
            loop_min_repeats=2,       # a sequence repeated 2+ times = loop
            empty_threshold=3,        # 3 trivial final replies in a row = anomaly
            empty_max_chars=10,       # a reply of at most 10 chars is trivial
            error_window=10,          # error rate over the last 10 runs
            error_rate_threshold=0.5,  # 50%+ failed runs = anomaly
            on_anomaly="escalate",    # "log", "pause", "escalate" or "stop"
            cooldown=300,             # 5 min before the same anomaly is reported again
            escalation=EscalationTarget(
                webhook_url="https://hooks.slack.com/...",
            ),
        ),
    )


async def test_health_configuration_example_escalates_and_suspends(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """behavioral-health.md, "Configuration": ``from promptise.runtime import ProcessConfig,
    HealthConfig, EscalationTarget`` / ``config = ProcessConfig(..., health=HealthConfig(
    enabled=True, stuck_threshold=3, ..., on_anomaly="escalate", cooldown=300, escalation=
    EscalationTarget(webhook_url=...)))``. On an anomaly the escalation is sent, then the
    process is suspended; the escalation carries the spec's JSON shape ({"type":
    "health_anomaly", "process_id", "process_name", "anomaly_type", "details"})."""
    config = full_health_config()
    health = config.health
    assert (health.stuck_threshold, health.loop_window, health.loop_min_repeats,
            health.empty_threshold, health.empty_max_chars, health.error_window,
            health.error_rate_threshold, health.on_anomaly, health.cooldown) == \
        (3, 20, 2, 3, 10, 10, 0.5, "escalate", 300.0)
    assert health.escalation is not None
    assert health.escalation.webhook_url == "https://hooks.slack.com/..."

    # Offline: the Slack URL is swapped for the other target the spec offers, an
    # escalation.event_type event on the runtime's bus.
    runnable = config.model_copy(update={"health": health.model_copy(update={
        "escalation": EscalationTarget(event_type="pipeline.escalation")})})
    runtime = AgentRuntime()
    received: list[dict[str, Any]] = []
    runtime.event_bus.subscribe("pipeline.escalation", received.append)
    process = runtime.add_process("pipeline-monitor", runnable, tools=[search])
    try:
        await runtime.start_all()
        await process.inject(manual())
        await wait_for(lambda: process.state is ProcessState.SUSPENDED, what="the pause")
        assert process.suspend_reason == "health"
        assert len(received) == 1
        assert received[0]["data"] == {
            "type": "health_anomaly",
            "process_id": process.process_id,
            "process_name": "pipeline-monitor",
            "anomaly_type": "stuck",
            "details": {"tool_name": "search", "consecutive_count": 3},
        }
    finally:
        await runtime.close()


HEALTH_MANIFEST = """\
name: pipeline-monitor
health:
  enabled: true
  stuck_threshold: 3
  loop_window: 20
  error_window: 10
  on_anomaly: escalate
  cooldown: 300
  escalation:
    webhook_url: "https://hooks.slack.com/..."
"""


def test_health_manifest_example(tmp_path: Path) -> None:
    """behavioral-health.md, "Or in a .agent manifest": ``name: pipeline-monitor`` /
    ``health: ...``. It loads; an unknown key under health: is rejected in a manifest; in
    Python, HealthConfig ignores it with a FutureWarning."""
    from runtime_core.manifest.loader import ManifestError, load_manifest

    path = tmp_path / "pipeline-monitor.agent"
    path.write_text(HEALTH_MANIFEST, encoding="utf-8")
    manifest = load_manifest(path)
    assert manifest.name == "pipeline-monitor"
    health = manifest.config.health
    assert (health.enabled, health.stuck_threshold, health.loop_window, health.error_window,
            health.on_anomaly, health.cooldown) == (True, 3, 20, 10, "escalate", 300.0)
    assert health.escalation is not None
    assert health.escalation.webhook_url == "https://hooks.slack.com/..."

    path.write_text(HEALTH_MANIFEST.replace("  cooldown: 300\n",
                                            "  cooldown: 300\n  stuck_treshold: 4\n"),
                    encoding="utf-8")
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    (problem,) = caught.value.problems
    assert problem.path.startswith("health") and "stuck_treshold" in problem.message

    with pytest.warns(FutureWarning, match="stuck_treshold"):
        ignored = HealthConfig(enabled=True, stuck_treshold=4)  # type: ignore[call-arg]
    assert ignored.stuck_threshold == 3


@pytest.mark.slow
async def test_update_health_over_the_http_api(
        closing: Callable[[AgentProcess], AgentProcess]) -> None:
    """behavioral-health.md, "Changing the configuration while it runs": ``async with
    OrchestrationClient("http://127.0.0.1:9100", token=TOKEN) as client:`` / ``await
    client.update_health("pipeline-monitor", error_window=20, on_anomaly="pause")``, here
    through runtime_core's HTTP client (RemoteControl) and PATCH /api/v1/processes/{name}/
    health on port 0. The change is live; an unknown field is refused (422)."""
    import httpx

    from runtime_core.control import ControlError, RemoteControl
    from tests.helpers.serving import TOKEN, served

    runtime = AgentRuntime()
    process = runtime.add_process("pipeline-monitor", ProcessConfig(
        model=REPLY, health=HealthConfig(enabled=True)))
    async with served(runtime) as url:
        await runtime.start_all()
        client = RemoteControl(url, token=TOKEN)
        try:
            await client.update_health("pipeline-monitor",
                                       {"error_window": 20, "on_anomaly": "pause"})
            assert (process.config.health.error_window, process.config.health.on_anomaly) \
                == (20, "pause")
            with pytest.raises(ControlError):
                await client.update_health("pipeline-monitor", {"error_windw": 5})
            assert process.config.health.error_window == 20
        finally:
            await client.close()
        async with httpx.AsyncClient(base_url=url,
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            answer = await http.patch("/api/v1/processes/pipeline-monitor/health",
                                      json={"cooldown": 60})
            assert answer.status_code == 200
            body = answer.json()
            assert {k: body[k] for k in ("name", "health_updated", "live", "effective_from")} \
                == {"name": "pipeline-monitor", "health_updated": True, "live": True,
                    "effective_from": "immediate"}
            refused = await http.patch("/api/v1/processes/pipeline-monitor/health",
                                       json={"nope": 1})
            assert refused.status_code == 422
    assert process.config.health.cooldown == 60


@pytest.mark.slow
async def test_orchestration_client_example_as_written() -> None:
    """behavioral-health.md, "Changing the configuration while it runs", as written:
    ``async with OrchestrationClient("http://127.0.0.1:9100", token=TOKEN) as client:`` /
    ``await client.update_health("pipeline-monitor", error_window=20, on_anomaly="pause")``
    (the server on port 0). A wrong token is refused on entering the block."""
    from runtime_core import OrchestrationClient
    from runtime_core.control import ControlError
    from tests.helpers.serving import TOKEN, served

    runtime = AgentRuntime()
    process = runtime.add_process("pipeline-monitor", ProcessConfig(
        model=REPLY, health=HealthConfig(enabled=True)))
    async with served(runtime) as url:
        await runtime.start_all()
        async with OrchestrationClient(url, token=TOKEN) as client:
            await client.update_health("pipeline-monitor", error_window=20, on_anomaly="pause")
        assert (process.config.health.error_window, process.config.health.on_anomaly) \
            == (20, "pause")
        with pytest.raises(ControlError, match="refused the token"):
            async with OrchestrationClient(url, token="wrong"):
                pass


class LoopGuard:
    """behavioral-health.md, "As an in-run guard", as written: blocks a tool call while the
    agent is repeating itself."""

    def __init__(self) -> None:
        # cooldown=0: report every call that continues the anomaly
        self.monitor = HealthMonitor(
            HealthConfig(enabled=True, stuck_threshold=3, cooldown=0),
            process_id="my-agent",
        )

    async def pre_tool(self, tool_name: str, args: Any, state: Any) -> Any:
        anomaly = await self.monitor.record_tool_call(tool_name, args)
        if anomaly:
            raise RuntimeError(
                f"{anomaly.description}. The result will not change in this run: "
                "stop calling it and continue with what you have."
            )
        return args


async def test_loop_guard_blocks_every_repeat_with_cooldown_zero() -> None:
    """behavioral-health.md, "As an in-run guard": ``class LoopGuard:``. With cooldown=0 the
    third identical call and every later one is blocked, with the anomaly's description; a
    different call passes; begin_invocation() starts a new run. (runtime_core has no
    PromptGraphEngine to pass ``hooks=[LoopGuard()]`` to; the guard is driven directly.)"""
    guard = LoopGuard()
    args = {"query": "pipelines"}
    assert await guard.pre_tool("search", args, {}) == args
    assert await guard.pre_tool("search", args, {}) == args
    for times in (3, 4):  # the third call and the fourth: both blocked
        with pytest.raises(RuntimeError) as blocked:
            await guard.pre_tool("search", args, {})
        assert str(blocked.value) == (
            f"Agent stuck: tool 'search' called {times} times consecutively with identical "
            "arguments. The result will not change in this run: stop calling it and "
            "continue with what you have.")
    assert await guard.pre_tool("read", {"path": "a"}, {}) == {"path": "a"}

    guard.monitor.begin_invocation()  # a new run: its calls start afresh
    assert await guard.pre_tool("search", args, {}) == args


async def test_with_the_default_cooldown_the_guard_blocks_only_once() -> None:
    """behavioral-health.md, "As an in-run guard": "With the default cooldown,
    record_tool_call() returns the anomaly only the first time, so the guard would block the
    third identical call and let every later one through"."""
    monitor = HealthMonitor(HealthConfig(enabled=True, stuck_threshold=3), process_id="x")
    found = [await monitor.record_tool_call("search", {"q": 1}) for _ in range(5)]
    assert [a is not None for a in found] == [False, False, True, False, False]


# == journal-and-replay.md =====================================================================
async def replay_example(journal: Any) -> dict[str, Any]:
    """journal-and-replay.md, "Deterministic agent replay in practice", the body of main()."""
    # --- Normal operation: record work as it happens ---
    await journal.append(JournalEntry(
        process_id="invoice-watcher",
        entry_type="state_transition",
        data={"from_state": "created", "to_state": "running"},
    ))

    # Snapshot the last-known-good state after a completed cycle.
    await journal.checkpoint("invoice-watcher", {
        "context_state": {"invoices_processed": 40},
        "lifecycle_state": "running",
    })

    # More work happens *after* the checkpoint...
    await journal.append(JournalEntry(
        process_id="invoice-watcher",
        entry_type="context_update",
        data={"key": "invoices_processed", "value": 41},
    ))
    # --- CRASH: the process is killed right here ---

    # --- Restart: rebuild state straight from the journal ---
    engine = ReplayEngine(journal)
    recovered: dict[str, Any] = await engine.recover("invoice-watcher")
    return recovered


def assert_recovered_as_the_spec_prints(recovered: dict[str, Any]) -> None:
    assert recovered["lifecycle_state"] == "running"
    assert recovered["context_state"] == {"invoices_processed": 41}
    assert recovered["entries_replayed"] == 1
    # "recover() returns a dict with context_state, lifecycle_state, last_entry_type, and
    # entries_replayed"
    assert recovered["last_entry_type"] == "context_update"


async def test_replay_example_with_the_in_memory_journal() -> None:
    """journal-and-replay.md, "Deterministic agent replay in practice": ``from
    promptise.runtime.journal import FileJournal, JournalEntry, ReplayEngine``, with
    InMemoryJournal (the spec's test backend, same protocol) for FileJournal. Prints
    ``running`` / ``{'invoices_processed': 41}`` / ``1``."""
    journal = InMemoryJournal()
    recovered = await replay_example(journal)
    assert_recovered_as_the_spec_prints(recovered)
    await journal.close()


async def test_replay_example_with_the_sqlite_file_journal(tmp_path: Path) -> None:
    """journal-and-replay.md, "Deterministic agent replay in practice", with runtime_core's
    on-disk backend, SQLiteJournal, for FileJournal: given the same journal, recovery always
    rebuilds the same state, also from a new journal object after the "crash"."""
    path = tmp_path / "journal"  # FileJournal(base_path=".promptise/journal")
    journal = SQLiteJournal(path)
    await journal.open()  # SQLiteJournal must be opened first; the spec's FileJournal not
    try:
        recovered = await replay_example(journal)
    finally:
        await journal.close()
    assert_recovered_as_the_spec_prints(recovered)

    after_crash = SQLiteJournal(path)
    await after_crash.open()
    try:
        again = await ReplayEngine(after_crash).recover("invoice-watcher")
    finally:
        await after_crash.close()
    assert_recovered_as_the_spec_prints(again)
    assert again["context_state"] == recovered["context_state"]


async def test_replay_example_as_written_with_file_journal(tmp_path: Path) -> None:
    """journal-and-replay.md, "Deterministic agent replay in practice", as written:
    ``journal = FileJournal(base_path=".promptise/journal")``."""
    from runtime_core.journal import FileJournal

    journal = FileJournal(base_path=str(tmp_path / "journal"))
    assert_recovered_as_the_spec_prints(await replay_example(journal))
    await journal.close()


def count(entries: list[JournalEntry], entry_type: str) -> int:
    return sum(1 for entry in entries if entry.entry_type == entry_type)


async def test_journal_config_examples_checkpoint_every_cycle(tmp_path: Path) -> None:
    """journal-and-replay.md, "Wiring a FileJournal checkpoint into a live process": ``from
    promptise.runtime.config import JournalConfig`` / ``JournalConfig(level="checkpoint",
    backend="file", path=".promptise/journal")`` / ``JournalConfig(level="full",
    backend="file")``. Under AgentRuntime a checkpoint is written after every trigger ->
    invoke -> result cycle; on restart the replay engine runs before new triggers are
    accepted, so counters come back; "full" records every tool call, model response and
    context mutation."""
    from runtime_core.config import JournalConfig as ConfigJournalConfig

    assert ConfigJournalConfig is JournalConfig
    # Production: checkpoint level, durable file backend.
    production = JournalConfig(level="checkpoint", backend="file",
                               path=str(tmp_path / "journal"))
    # Debugging: capture every side effect for fine-grained replay.
    debugging = JournalConfig(level="full", backend="file")
    assert (production.level, debugging.level) == ("checkpoint", "full")
    assert production.backend == debugging.backend != "memory"  # both durable, on disk

    await journal_two_cycles("invoice-watcher", production)
    full = await journal_two_cycles("debugger", debugging.model_copy(update={
        "path": str(tmp_path / "debug-journal")}))
    # "full": every side effect: each tool call (intent and result), each model response,
    # and each context mutation (a tool's updates are journaled with its result).
    assert count(full, "tool_intent") == 2
    assert [e.data["updates"] for e in full if e.entry_type == "tool_result"] == \
        [{"counter": 1}, {"counter": 2}]
    replies = [e.data.get("reply") for e in full if e.entry_type == "model_usage"]
    assert replies.count("counted") == 2, replies


async def journal_two_cycles(name: str, journal_config: JournalConfig) -> list[JournalEntry]:
    """Two trigger -> invoke -> result cycles under an AgentRuntime, each checkpointed; then a
    new runtime on the same journal takes the state back before any new event. Returns the
    journal's entries after the two cycles."""
    config = ProcessConfig(model=COUNTING, journal=journal_config)
    runtime = AgentRuntime()
    process = runtime.add_process(name, config, tools=[bump])
    journal = process.journal
    assert journal is not None

    async def durable_cycles() -> int:
        await journal.flush()
        return len(await journal.read(ReadFilter(process=name, entry_type="run_finished")))

    try:
        await runtime.start_all()
        for cycle in (1, 2):
            await process.inject(manual(cycle=cycle))
            deadline = time.monotonic() + 5
            # Each cycle is durable when it ends; a checkpoint follows every
            # journal.checkpoint_every runs (50) and recovery replays what came after it.
            while await durable_cycles() < cycle:
                assert time.monotonic() < deadline, f"cycle {cycle} never became durable"
                await asyncio.sleep(0.005)
        entries = await journal.read(ReadFilter(process=name))
    finally:
        await runtime.close()
    assert count(entries, "run_finished") == 2

    restarted = AgentRuntime()
    again = restarted.add_process(name, config, tools=[bump])
    try:
        await restarted.start_all()
        assert again.invocation_count == 2
        assert again.context.get("counter") == 2
        assert again.recovered is not None
        assert again.recovered["lifecycle_state"] == "stopped"
    finally:
        await restarted.close()
    return entries

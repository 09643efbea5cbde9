"""Restart policies: never / on_failure / always, backoff, attempt counting, exhaustion, stop(),
failing starts, max_lifetime recycling, what a restart keeps and what a failure dead-letters.

Everything runs on a FakeClock: a test advances time by hand, so a 60 s backoff takes no time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime_core import (
    AgentProcess,
    FakeClock,
    ProcessConfig,
    ProcessState,
    RuntimeEvent,
    StateError,
    TriggerEvent,
)
from runtime_core.agent.tools import ToolError
from runtime_core.events import ProcessFailed, ProcessRestarted, ProcessStarted, RestartExhausted
from tests.helpers.events import record
from tests.helpers.polling import settle, wait_for

S = ProcessState
EPS = 1 / 64  # exactly representable, so "deadline - EPS" never rounds onto the deadline

# "ok" for every event, except those whose payload says {"script": "bad"}: those raise.
MIXED_MODEL: dict[str, Any] = {
    "provider": "scripted",
    "turns": [{"reply": "ok"}],
    "scripts": {"bad": [{"raise": "boom"}]},
    "select": {"by_payload_field": "script"},
}
SLOW_MODEL: dict[str, Any] = {"provider": "scripted", "turns": [{"sleep": 0.05, "reply": "ok"}]}

DEFAULTS: dict[str, Any] = {
    "model": MIXED_MODEL,
    "max_consecutive_failures": 1,
    "restart_policy": "on_failure",
    "restart_backoff": 2.0,
    "max_restarts": 3,
    # Keep the heartbeat's own sleep far away, so the only near deadline is the one under test.
    "heartbeat_interval": 1000.0,
}

Factory = Callable[..., AgentProcess]


def good() -> TriggerEvent:
    return TriggerEvent("t", "manual", {"script": "good"})


def bad() -> TriggerEvent:
    return TriggerEvent("t", "manual", {"script": "bad"})


@pytest.fixture
async def make(clock: FakeClock) -> AsyncIterator[Factory]:
    """Build processes on the shared FakeClock; every one is stopped at teardown."""
    made: list[AgentProcess] = []

    def factory(**overrides: Any) -> AgentProcess:
        process = AgentProcess("p", ProcessConfig(**{**DEFAULTS, **overrides}), clock=clock)
        made.append(process)
        return process

    yield factory
    for process in made:
        await process.stop()


def of_kind(events: list[RuntimeEvent], kind: str) -> list[Any]:
    return [e for e in events if e.kind == kind]


def states(events: list[RuntimeEvent]) -> list[str]:
    return [e.to_state for e in of_kind(events, "process.state")]  # type: ignore[attr-defined]


async def fail(process: AgentProcess) -> None:
    """Inject a failing event and wait until the process is FAILED."""
    await process.inject(bad())
    await wait_for(lambda: process.state is S.FAILED, what="the process to fail")


async def run_good(process: AgentProcess) -> None:
    before = process.invocation_count
    await process.inject(good())
    await wait_for(lambda: process.invocation_count > before, what="a good run")


async def restart_after(clock: FakeClock, process: AgentProcess, wait: float) -> None:
    """Check that a FAILED process restarts exactly ``wait`` seconds later, not a moment before."""
    # A failed process has no heartbeat, so the one sleeper is the restart timer.
    await wait_for(lambda: clock.sleepers >= 1, what="the restart timer")
    clock.advance(wait - EPS)
    await settle(50)
    assert process.state is S.FAILED, f"restarted before the {wait} s backoff was over"
    clock.advance(EPS)
    await wait_for(lambda: process.state is S.RUNNING, what=f"the restart after {wait} s")


# -- policies -------------------------------------------------------------------------------------
async def test_never_policy_stays_failed(clock: FakeClock, make: Factory) -> None:
    process = make(restart_policy="never")
    events = record(process)
    await process.start()
    await fail(process)

    for _ in range(5):
        clock.advance(100.0)
        await settle(50)
    assert process.state is S.FAILED
    assert of_kind(events, "process.restarted") == []
    assert of_kind(events, "process.restart_exhausted") == []
    assert process.restart_count == 0
    assert len(of_kind(events, "process.failed")) == 1


async def test_on_failure_restarts_after_exactly_restart_backoff(
    clock: FakeClock, make: Factory
) -> None:
    process = make(restart_backoff=2.0)
    events = record(process)
    await process.start()
    await fail(process)
    failed = of_kind(events, "process.failed")
    assert len(failed) == 1 and isinstance(failed[0], ProcessFailed)
    assert "boom" in failed[0].error

    await restart_after(clock, process, 2.0)

    restarted = of_kind(events, "process.restarted")
    assert len(restarted) == 1 and isinstance(restarted[0], ProcessRestarted)
    assert restarted[0].attempt == 1
    assert restarted[0].max_restarts == 3
    assert process.restart_count == 1
    assert process.status()["restart_count"] == 1
    started = of_kind(events, "process.started")
    assert isinstance(started[-1], ProcessStarted) and started[-1].restart is True
    assert states(events)[-3:] == ["failed", "starting", "running"]
    # and the restarted process works
    await run_good(process)


async def test_backoff_doubles_per_attempt_and_is_capped_at_60_s(
    clock: FakeClock, make: Factory
) -> None:
    process = make(restart_backoff=16.0, max_restarts=10)
    events = record(process)
    await process.start()

    for attempt, wait in enumerate([16.0, 32.0, 60.0, 60.0], start=1):
        await fail(process)
        await restart_after(clock, process, wait)
        assert process.restart_count == attempt

    assert [e.attempt for e in of_kind(events, "process.restarted")] == [1, 2, 3, 4]
    assert {e.max_restarts for e in of_kind(events, "process.restarted")} == {10}


async def test_restart_count_resets_to_zero_after_a_successful_run(
    clock: FakeClock, make: Factory
) -> None:
    process = make(restart_backoff=2.0)
    events = record(process)
    await process.start()
    await fail(process)
    await restart_after(clock, process, 2.0)
    await fail(process)
    await restart_after(clock, process, 4.0)
    assert process.restart_count == 2

    await run_good(process)
    assert process.restart_count == 0
    assert process.status()["restart_count"] == 0

    # A new failure streak starts again at the first backoff and attempt 1.
    await fail(process)
    await restart_after(clock, process, 2.0)
    assert process.restart_count == 1
    assert [e.attempt for e in of_kind(events, "process.restarted")] == [1, 2, 1]


async def test_max_restarts_exhausted_stays_failed_and_emits_restart_exhausted(
    clock: FakeClock, make: Factory
) -> None:
    process = make(restart_backoff=2.0, max_restarts=2)
    events = record(process)
    await process.start()
    await fail(process)
    await restart_after(clock, process, 2.0)
    await fail(process)
    await restart_after(clock, process, 4.0)
    await fail(process)

    await settle(50)
    exhausted = of_kind(events, "process.restart_exhausted")
    assert len(exhausted) == 1 and isinstance(exhausted[0], RestartExhausted)
    assert exhausted[0].kind == "process.restart_exhausted"
    assert exhausted[0].restarts == 2
    assert exhausted[0].process_id == process.process_id

    for _ in range(5):
        clock.advance(100.0)
        await settle(50)
    assert process.state is S.FAILED
    assert len(of_kind(events, "process.restarted")) == 2
    assert process.restart_count == 2


async def test_max_restarts_zero_is_exhausted_at_once(clock: FakeClock, make: Factory) -> None:
    process = make(max_restarts=0)
    events = record(process)
    await process.start()
    await fail(process)
    assert len(of_kind(events, "process.restart_exhausted")) == 1
    clock.advance(100.0)
    await settle(50)
    assert process.state is S.FAILED
    assert of_kind(events, "process.restarted") == []


async def test_explicit_stop_cancels_a_pending_restart(clock: FakeClock, make: Factory) -> None:
    process = make(restart_backoff=2.0)
    events = record(process)
    await process.start()
    await fail(process)
    await wait_for(lambda: clock.sleepers >= 1, what="the restart timer")

    await process.stop()
    assert process.state is S.STOPPED
    assert clock.sleepers == 0  # restart timer and heartbeat are gone

    clock.advance(2.0 + EPS)
    await settle(50)
    clock.advance(100.0)
    await settle(50)
    assert process.state is S.STOPPED
    assert of_kind(events, "process.restarted") == []
    assert states(events)[-2:] == ["stopping", "stopped"]


async def test_failing_user_start_raises_and_is_never_retried(
    clock: FakeClock, make: Factory
) -> None:
    process = make(tools=["nonexistent.module:fn"], restart_policy="always", max_lifetime=10.0)
    events = record(process)

    with pytest.raises(ToolError, match="nonexistent"):
        await process.start()

    assert process.state is S.FAILED
    failed = of_kind(events, "process.failed")
    assert len(failed) == 1
    assert failed[0].reason == "startup failed"
    assert "nonexistent" in failed[0].error
    assert clock.sleepers == 0  # no restart timer, no heartbeat
    for _ in range(5):
        clock.advance(100.0)
        await settle(50)
    assert process.state is S.FAILED
    assert of_kind(events, "process.restarted") == []
    assert of_kind(events, "process.started") == []
    assert process.restart_count == 0


def write_script(path: Path) -> None:
    path.write_text(yaml.safe_dump(MIXED_MODEL), encoding="utf-8")


async def test_a_restart_whose_start_fails_counts_as_an_attempt(
    clock: FakeClock, make: Factory, tmp_path: Path
) -> None:
    # The model is read from a file at every start: removing the file makes the next start fail.
    script = tmp_path / "script.yaml"
    write_script(script)
    process = make(model=f"scripted:{script}", restart_backoff=2.0, max_restarts=3)
    events = record(process)
    await process.start()
    script.unlink()
    await fail(process)

    # Attempt 1 after 2 s: its start fails, the process is FAILED again.
    await wait_for(lambda: clock.sleepers >= 1, what="the restart timer")
    clock.advance(2.0)
    await wait_for(lambda: len(of_kind(events, "process.failed")) == 2, what="the failed restart")
    await settle(50)
    assert process.state is S.FAILED
    assert process.restart_count == 1
    assert of_kind(events, "process.failed")[-1].reason == "startup failed"
    assert [e.attempt for e in of_kind(events, "process.restarted")] == [1]

    # Attempt 2 waits the doubled backoff (4 s) and succeeds now that the file is back.
    write_script(script)
    await wait_for(lambda: clock.sleepers >= 1, what="the second restart timer")
    clock.advance(4.0 - EPS)
    await settle(50)
    assert process.state is S.FAILED
    clock.advance(EPS)
    await wait_for(lambda: process.state is S.RUNNING, what="the second restart")
    assert process.restart_count == 2
    assert [e.attempt for e in of_kind(events, "process.restarted")] == [1, 2]
    await run_good(process)


async def test_a_failed_restart_start_can_exhaust_max_restarts(
    clock: FakeClock, make: Factory, tmp_path: Path
) -> None:
    script = tmp_path / "script.yaml"
    write_script(script)
    process = make(model=f"scripted:{script}", restart_backoff=2.0, max_restarts=1)
    events = record(process)
    await process.start()
    script.unlink()
    await fail(process)

    await wait_for(lambda: clock.sleepers >= 1, what="the restart timer")
    clock.advance(2.0)
    await wait_for(
        lambda: len(of_kind(events, "process.restart_exhausted")) == 1, what="restart_exhausted"
    )
    write_script(script)
    clock.advance(100.0)
    await settle(50)
    assert process.state is S.FAILED
    assert process.restart_count == 1
    assert len(of_kind(events, "process.restarted")) == 1


# -- max_lifetime ---------------------------------------------------------------------------------
async def test_always_recycles_at_max_lifetime_keeping_the_queue(
    clock: FakeClock, make: Factory
) -> None:
    process = make(model=SLOW_MODEL, restart_policy="always", max_lifetime=30.0)
    events = record(process)
    await process.start()
    process_id = process.process_id
    await wait_for(lambda: clock.sleepers >= 1, what="the heartbeat")

    first, second, third = good(), good(), good()
    for event in (first, second, third):
        assert await process.inject(event)
    await wait_for(lambda: len(process.active_runs()) == 1, what="the first run")

    mark = len(events)
    clock.advance(30.0)
    await wait_for(lambda: len(of_kind(events, "process.restarted")) == 1, what="the recycle")
    await wait_for(lambda: process.invocation_count == 3, what="the queued events to run")

    assert states(events[mark:]) == ["stopping", "stopped", "starting", "running"]
    restarted = of_kind(events, "process.restarted")[0]
    assert restarted.attempt is None
    assert restarted.reason == "max lifetime reached"
    assert process.restart_count == 0
    assert process.process_id == process_id
    assert process.state is S.RUNNING
    # the run in flight finished, the queued events survived the recycle and ran in order
    assert process.dead_letters == []
    assert [r.event.event_id for r in process.recent_runs()] == [
        first.event_id,
        second.event_id,
        third.event_id,
    ]
    assert all(r.state.value == "succeeded" for r in process.recent_runs())


async def test_lifetime_recycle_does_not_change_restart_count(
    clock: FakeClock, make: Factory
) -> None:
    process = make(restart_policy="always", max_lifetime=30.0, restart_backoff=2.0)
    events = record(process)
    await process.start()
    await fail(process)
    await restart_after(clock, process, 2.0)
    assert process.restart_count == 1

    await wait_for(lambda: clock.sleepers >= 1, what="the heartbeat")
    clock.advance(30.0)
    await wait_for(lambda: len(of_kind(events, "process.restarted")) == 2, what="the recycle")
    await wait_for(lambda: process.state is S.RUNNING, what="the recycled process")
    assert of_kind(events, "process.restarted")[-1].attempt is None
    assert process.restart_count == 1


@pytest.mark.parametrize("policy", ["never", "on_failure"])
async def test_max_lifetime_without_always_stops_and_does_not_restart(
    clock: FakeClock, make: Factory, policy: str
) -> None:
    process = make(restart_policy=policy, max_lifetime=30.0)
    events = record(process)
    await process.start()
    await wait_for(lambda: clock.sleepers >= 1, what="the heartbeat")

    clock.advance(30.0 - EPS)
    await settle(50)
    assert process.state is S.RUNNING
    clock.advance(EPS)
    await wait_for(lambda: process.state is S.STOPPED, what="the lifetime stop")
    assert len(of_kind(events, "process.stopped")) == 1

    for _ in range(3):
        clock.advance(100.0)
        await settle(50)
    assert process.state is S.STOPPED
    assert of_kind(events, "process.restarted") == []
    assert process.restart_count == 0


async def test_always_with_exhausted_restarts_stays_failed_past_max_lifetime(
    clock: FakeClock, make: Factory
) -> None:
    """Spec: "When max_restarts is used up, the process stays FAILED"."""
    process = make(restart_policy="always", max_restarts=0, max_lifetime=30.0)
    events = record(process)
    await process.start()
    await fail(process)
    assert len(of_kind(events, "process.restart_exhausted")) == 1

    for _ in range(4):
        clock.advance(25.0)
        await settle(50)
    assert process.state is S.FAILED
    assert of_kind(events, "process.restarted") == []


async def test_always_lifetime_does_not_bypass_a_pending_restart_backoff(
    clock: FakeClock, make: Factory
) -> None:
    """Spec: the first restart attempt waits restart_backoff; each attempt is counted."""
    process = make(restart_policy="always", restart_backoff=50.0, max_lifetime=30.0)
    events = record(process)
    await process.start()
    await fail(process)

    clock.advance(30.0)  # the process would be 30 s old, but it is FAILED, not running
    await settle(50)
    assert process.state is S.FAILED, "restarted before restart_backoff elapsed"
    await restart_after(clock, process, 20.0)  # 50 s after the failure
    assert [e.attempt for e in of_kind(events, "process.restarted")] == [1]
    assert process.restart_count == 1


# -- what a restart keeps -------------------------------------------------------------------------
async def test_a_restart_keeps_context_conversation_invocations_and_process_id(
    clock: FakeClock, make: Factory
) -> None:
    process = make(context={"initial_state": {"seed": 1}})
    await process.start()
    process_id = process.process_id
    process.context.put("counter", 5)
    await run_good(process)
    conversation = process.conversation.messages()
    assert len(conversation) == 2

    await fail(process)
    await restart_after(clock, process, 2.0)

    assert process.process_id == process_id
    assert process.context.state_snapshot() == {"seed": 1, "counter": 5}
    assert process.conversation.messages() == conversation
    assert process.invocation_count == 1
    assert process.status()["invocation_count"] == 1
    await run_good(process)
    assert process.invocation_count == 2
    assert len(process.conversation) == 4


async def test_consecutive_failure_streak_starts_fresh_after_a_restart(
    clock: FakeClock, make: Factory
) -> None:
    process = make(max_consecutive_failures=2)
    await process.start()

    await process.inject(bad())
    await wait_for(lambda: process.status()["consecutive_failures"] == 1)
    assert process.state is S.RUNNING
    await fail(process)
    assert process.status()["consecutive_failures"] == 2

    await restart_after(clock, process, 2.0)
    assert process.status()["consecutive_failures"] == 0

    await process.inject(bad())
    await wait_for(lambda: process.status()["consecutive_failures"] == 1)
    await settle(50)
    assert process.state is S.RUNNING  # one failure of a fresh streak is not enough
    await fail(process)


async def test_failure_dead_letters_queued_events_and_events_arriving_while_failed(
    clock: FakeClock, make: Factory
) -> None:
    process = make(restart_backoff=2.0)
    await process.start()
    failing, queued_1, queued_2 = bad(), good(), good()
    # Queued back to back: the single worker takes `failing`, the others wait behind it.
    for event in (failing, queued_1, queued_2):
        assert await process.inject(event)
    await wait_for(lambda: process.state is S.FAILED, what="the process to fail")

    late = good()
    assert await process.inject(late) is False

    letters = process.dead_letters
    assert [(d["event"].event_id, d["reason"]) for d in letters] == [
        (failing.event_id, "retries exhausted"),
        (queued_1.event_id, "process failed"),
        (queued_2.event_id, "process failed"),
        (late.event_id, "process failed"),
    ]
    assert [d["attempts"] for d in letters] == [1, 0, 0, 0]
    assert process.status()["queue_size"] == 0

    # The restart does not bring the dead-lettered events back by itself.
    await restart_after(clock, process, 2.0)
    await settle(50)
    assert process.invocation_count == 0
    assert len(process.dead_letters) == 4


async def test_start_on_a_running_process_raises_state_error(make: Factory) -> None:
    process = make()
    await process.start()
    with pytest.raises(StateError):
        await process.start()

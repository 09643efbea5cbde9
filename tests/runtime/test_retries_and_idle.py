"""Delivery: retries with backoff, dead letters and redelivery, a full queue, idle suspension and
the concurrency limit. Backoff and idle time run on a FakeClock, so nothing waits in real time."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import pytest

from runtime_core import (
    AgentProcess,
    FakeClock,
    Model,
    ModelError,
    ModelRequest,
    ModelTurn,
    ProcessConfig,
    ProcessState,
    RuntimeEvent,
    TriggerEvent,
)
from tests.helpers.events import record
from tests.helpers.polling import settle, wait_for

S = ProcessState
EPS = 1 / 64  # exactly representable, so "deadline - EPS" never rounds onto the deadline

OK_MODEL: dict[str, Any] = {"provider": "scripted", "turns": [{"reply": "ok"}]}
FAIL_MODEL: dict[str, Any] = {"provider": "scripted", "turns": [{"raise": "boom"}]}
SLOW_MODEL: dict[str, Any] = {"provider": "scripted", "turns": [{"sleep": 0.05, "reply": "ok"}]}

DEFAULTS: dict[str, Any] = {"model": OK_MODEL, "heartbeat_interval": 1000.0}

Factory = Callable[..., AgentProcess]


def event(n: int = 0) -> TriggerEvent:
    return TriggerEvent("t", "manual", {"n": n})


@pytest.fixture
async def make(clock: FakeClock) -> AsyncIterator[Factory]:
    """Build processes on the shared FakeClock; every one is stopped at teardown."""
    made: list[AgentProcess] = []

    def factory(*, model_object: Model | None = None, **overrides: Any) -> AgentProcess:
        config = ProcessConfig(**{**DEFAULTS, **overrides})
        process = AgentProcess("p", config, clock=clock, model=model_object)
        made.append(process)
        return process

    yield factory
    for process in made:
        await process.stop()


def ids(letters: list[dict[str, Any]]) -> list[str]:
    return [d["event"].event_id for d in letters]


def ran(process: AgentProcess) -> list[str]:
    return [r.event.event_id for r in process.recent_runs()]


class FlakyModel:
    """Raises on the first call for each event, replies "ok" from then on."""

    name = "flaky"

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    async def complete(self, request: ModelRequest) -> ModelTurn:
        key = request.event.event_id
        self.calls[key] = self.calls.get(key, 0) + 1
        if self.calls[key] == 1:
            raise ModelError("transient hiccup")
        return ModelTurn(reply="ok")


async def dead_letters_by_stopping(process: AgentProcess, count: int) -> list[TriggerEvent]:
    """Start and stop ``process``, then inject ``count`` events: each is dead-lettered."""
    await process.start()
    await process.stop()
    events = [event(n) for n in range(count)]
    for ev in events:
        assert await process.inject(ev) is False
    return events


# -- retries --------------------------------------------------------------------------------------
async def test_retries_back_off_then_dead_letter_once_as_one_failure(
    clock: FakeClock, make: Factory
) -> None:
    process = make(
        model=FAIL_MODEL,
        trigger_delivery={"max_retries": 2, "retry_backoff": 3.0},
    )
    await process.start()
    ev = event()
    await process.inject(ev)

    for attempt, wait in [(1, 3.0), (2, 6.0)]:
        await wait_for(lambda a=attempt: len(process.recent_runs()) == a, what=f"attempt {attempt}")
        await wait_for(lambda: process.status()["pending_retries"] == 1, what="the retry")
        await wait_for(lambda: clock.sleepers >= 2, what="the retry timer")  # + the heartbeat
        assert process.dead_letters == []
        assert process.status()["consecutive_failures"] == 0
        clock.advance(wait - EPS)
        await settle(50)
        assert len(process.recent_runs()) == attempt, f"retried before {wait} s"
        assert process.status()["pending_retries"] == 1
        clock.advance(EPS)

    await wait_for(lambda: len(process.dead_letters) == 1, what="the dead letter")
    await settle(50)
    runs = process.recent_runs()
    assert [r.attempt for r in runs] == [1, 2, 3]
    assert {r.event.event_id for r in runs} == {ev.event_id}
    (letter,) = process.dead_letters
    assert letter["event"] is ev
    assert letter["reason"] == "retries exhausted"
    assert letter["attempts"] == 3
    assert "boom" in letter["error"]
    status = process.status()
    assert status["pending_retries"] == 0
    assert status["consecutive_failures"] == 1
    assert process.state is S.RUNNING  # default max_consecutive_failures is 3

    clock.advance(100.0)  # nothing else is scheduled
    await settle(50)
    assert len(process.recent_runs()) == 3


async def test_retry_backoff_is_capped_by_retry_backoff_max(
    clock: FakeClock, make: Factory
) -> None:
    process = make(
        model=FAIL_MODEL,
        trigger_delivery={"max_retries": 3, "retry_backoff": 4.0, "retry_backoff_max": 5.0},
    )
    await process.start()
    await process.inject(event())
    for attempt, wait in [(1, 4.0), (2, 5.0), (3, 5.0)]:
        await wait_for(lambda a=attempt: len(process.recent_runs()) == a, what=f"attempt {attempt}")
        await wait_for(lambda: clock.sleepers >= 2, what="the retry timer")
        clock.advance(wait - EPS)
        await settle(50)
        assert len(process.recent_runs()) == attempt
        clock.advance(EPS)
    await wait_for(lambda: len(process.dead_letters) == 1)
    assert process.dead_letters[0]["attempts"] == 4


async def test_a_retry_that_succeeds_leaves_no_dead_letter(clock: FakeClock, make: Factory) -> None:
    process = make(
        model_object=FlakyModel(), trigger_delivery={"max_retries": 2, "retry_backoff": 1.0}
    )
    events = record(process)
    await process.start()
    await process.inject(event())
    await wait_for(lambda: process.status()["pending_retries"] == 1, what="the retry")
    await wait_for(lambda: clock.sleepers >= 2, what="the retry timer")
    clock.advance(1.0)
    await wait_for(lambda: process.invocation_count == 1, what="the retried run")

    assert [r.attempt for r in process.recent_runs()] == [1, 2]
    assert [r.state.value for r in process.recent_runs()] == ["failed", "succeeded"]
    assert process.dead_letters == []
    assert [e for e in events if e.kind == "event.dead_lettered"] == []
    status = process.status()
    assert status["pending_retries"] == 0
    assert status["consecutive_failures"] == 0


async def test_a_pending_retry_is_dead_lettered_process_stopped_on_stop(
    clock: FakeClock, make: Factory
) -> None:
    process = make(
        model=FAIL_MODEL,
        trigger_delivery={"max_retries": 2, "retry_backoff": 1.0},
    )
    await process.start()
    ev = event()
    await process.inject(ev)
    await wait_for(lambda: process.status()["pending_retries"] == 1, what="the retry")

    await process.stop()
    assert process.status()["pending_retries"] == 0
    (letter,) = process.dead_letters
    assert letter["event"] is ev
    assert letter["reason"] == "process stopped"
    assert letter["attempts"] == 1

    clock.advance(100.0)
    await settle(50)
    assert len(process.recent_runs()) == 1
    assert len(process.dead_letters) == 1
    assert process.status()["queue_size"] == 0


# -- dead letters and redelivery ------------------------------------------------------------------
async def test_redeliver_dead_letters_requeues_all_in_order(make: Factory) -> None:
    process = make()
    events = await dead_letters_by_stopping(process, 3)
    assert [d["reason"] for d in process.dead_letters] == ["process stopped"] * 3

    await process.start()
    assert await process.redeliver_dead_letters() == 3
    assert process.dead_letters == []
    await wait_for(lambda: process.invocation_count == 3, what="the redelivered runs")
    assert ran(process) == [ev.event_id for ev in events]
    assert await process.redeliver_dead_letters() == 0


async def test_redeliver_dead_letters_by_event_id_only_requeues_those(make: Factory) -> None:
    process = make()
    first, second, third = await dead_letters_by_stopping(process, 3)

    await process.start()
    assert await process.redeliver_dead_letters(event_ids=[second.event_id]) == 1
    await wait_for(lambda: process.invocation_count == 1, what="the redelivered run")
    await settle(50)
    assert ran(process) == [second.event_id]
    assert ids(process.dead_letters) == [first.event_id, third.event_id]
    assert await process.redeliver_dead_letters(event_ids=["no-such-id"]) == 0
    assert len(process.dead_letters) == 2


async def test_full_queue_dead_letters_on_inject_and_redelivery_keeps_what_does_not_fit(
    make: Factory,
) -> None:
    process = make(queue_size=2)
    await process.start()
    await settle(50)  # the worker is now waiting for the queue
    await process.suspend()
    events = [event(n) for n in range(5)]
    # Back to back, without yielding: the first two fill the queue, the rest do not fit.
    accepted = [await process.inject(ev) for ev in events]
    assert accepted == [True, True, False, False, False]
    assert ids(process.dead_letters) == [ev.event_id for ev in events[2:]]
    assert {d["reason"] for d in process.dead_letters} == {"queue full"}

    # Nothing fits in a full queue: every dead letter stays.
    assert await process.redeliver_dead_letters() == 0
    assert ids(process.dead_letters) == [ev.event_id for ev in events[2:]]

    # The suspended worker holds one event, which frees one place in the queue.
    await settle(50)
    # queue_size counts the held event too: still 2 waiting, but one place is free
    assert process.status()["queue_size"] == 2
    assert [e.event_id for e in process.queued_events()] == [events[0].event_id,
                                                             events[1].event_id]
    free = 1
    requeued = await process.redeliver_dead_letters()
    assert requeued == free
    assert ids(process.dead_letters) == [ev.event_id for ev in events[2 + free :]]
    assert {d["reason"] for d in process.dead_letters} == {"queue full"}
    assert process.state is S.SUSPENDED  # redelivery does not resume a manual suspension

    await process.resume()
    await wait_for(lambda: process.invocation_count == 2 + free, what="the queued runs")
    assert await process.redeliver_dead_letters() == 3 - free
    await wait_for(lambda: process.invocation_count == 5, what="the rest")
    assert ran(process) == [ev.event_id for ev in events]
    assert process.dead_letters == []


async def test_dead_letter_size_keeps_only_the_newest(make: Factory) -> None:
    process = make(trigger_delivery={"dead_letter_size": 2})
    events = await dead_letters_by_stopping(process, 3)
    assert ids(process.dead_letters) == [events[1].event_id, events[2].event_id]
    assert process.status()["dead_letter_count"] == 2


async def test_clear_dead_letters(make: Factory) -> None:
    process = make()
    await dead_letters_by_stopping(process, 2)
    assert process.clear_dead_letters() == 2
    assert process.dead_letters == []
    assert process.status()["dead_letter_count"] == 0
    assert process.clear_dead_letters() == 0


async def test_a_dead_letter_has_event_reason_error_attempts_and_time(make: Factory) -> None:
    process = make()
    (ev,) = await dead_letters_by_stopping(process, 1)
    (letter,) = process.dead_letters
    assert set(letter) == {"event", "reason", "error", "attempts", "dead_lettered_at"}
    assert letter["event"] is ev
    assert letter["reason"] == "process stopped"
    assert letter["error"] == ""
    assert letter["attempts"] == 0
    stamp = datetime.fromisoformat(letter["dead_lettered_at"])
    assert stamp.tzinfo is not None


# -- idle timeout ---------------------------------------------------------------------------------
async def test_idle_process_suspends_after_idle_timeout_and_inject_resumes_it(
    clock: FakeClock, make: Factory
) -> None:
    process = make(idle_timeout=30.0, heartbeat_interval=10.0)
    await process.start()
    await wait_for(lambda: clock.sleepers >= 1, what="the heartbeat")

    clock.advance(30.0 - EPS)
    await settle(50)
    await wait_for(lambda: clock.sleepers >= 1, what="the heartbeat")
    assert process.state is S.RUNNING
    clock.advance(EPS)
    await wait_for(lambda: process.state is S.SUSPENDED, what="the idle suspension")
    assert process.suspend_reason == "idle"
    assert process.status()["suspend_reason"] == "idle"

    ev = event()
    assert await process.inject(ev) is True
    assert process.state is S.RUNNING
    assert process.suspend_reason is None
    await wait_for(lambda: process.invocation_count == 1, what="the run")
    assert ran(process) == [ev.event_id]


async def test_idle_clock_restarts_after_an_automatic_resume(
    clock: FakeClock, make: Factory
) -> None:
    """Spec: resume() "restarts the idle clock, so idle_timeout counts from the resume"."""
    process = make(idle_timeout=5.0, heartbeat_interval=10.0)
    await process.start()
    await wait_for(lambda: clock.sleepers >= 1, what="the heartbeat")
    clock.advance(5.0)
    await wait_for(lambda: process.state is S.SUSPENDED, what="the first idle suspension")

    await process.inject(event())
    await wait_for(lambda: process.invocation_count == 1, what="the run")
    await settle(50)
    clock.advance(5.0 - EPS)
    await settle(50)
    assert process.state is S.RUNNING
    clock.advance(EPS)
    await wait_for(
        lambda: process.state is S.SUSPENDED,
        timeout=1.0,
        what="the idle suspension 5 s after the resumed run",
    )
    assert process.suspend_reason == "idle"


async def test_a_manual_suspend_is_not_resumed_by_inject(clock: FakeClock, make: Factory) -> None:
    process = make(idle_timeout=30.0)
    await process.start()
    await process.suspend()
    assert process.suspend_reason == "manual"

    ev = event()
    assert await process.inject(ev) is True
    await settle(50)
    clock.advance(100.0)
    await settle(50)
    assert process.state is S.SUSPENDED
    assert process.suspend_reason == "manual"
    assert process.invocation_count == 0

    await process.resume()
    await wait_for(lambda: process.invocation_count == 1, what="the run after resume()")
    assert ran(process) == [ev.event_id]


# -- concurrency ----------------------------------------------------------------------------------
def track_peak(process: AgentProcess) -> list[int]:
    """Record len(active_runs()) each time a run starts."""
    seen: list[int] = []

    def on_event(ev: RuntimeEvent) -> None:
        if ev.kind == "run.started":
            seen.append(len(process.active_runs()))

    process.notifier.add_callback(on_event)
    return seen


async def test_concurrency_limits_runs_in_flight(make: Factory) -> None:
    process = make(model=SLOW_MODEL, concurrency=3)
    seen = track_peak(process)
    await process.start()
    for n in range(7):
        await process.inject(event(n))
    polled: list[int] = []

    def done() -> bool:
        polled.append(len(process.active_runs()))
        return process.invocation_count == 7

    await wait_for(done, what="the runs")
    assert len(seen) == 7
    assert max(seen) == 3
    assert max(polled) == 3


async def test_concurrency_one_never_overlaps_runs(make: Factory) -> None:
    process = make(model=SLOW_MODEL, concurrency=1)
    seen = track_peak(process)
    await process.start()
    for n in range(4):
        await process.inject(event(n))
    await wait_for(lambda: process.invocation_count == 4, what="the runs")
    assert seen == [1, 1, 1, 1]
    runs = process.recent_runs()
    for earlier, later in itertools.pairwise(runs):
        assert earlier.finished_at is not None and later.started_at is not None
        assert later.started_at >= earlier.finished_at

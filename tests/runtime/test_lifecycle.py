"""Process lifecycle: the ProcessLifecycle transition table and AgentProcess start / stop /
suspend / resume / close, including what happens to queued and in-flight events."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from runtime_core import (
    AgentProcess,
    FakeClock,
    ModelRequest,
    ModelTurn,
    ProcessConfig,
    ProcessLifecycle,
    ProcessState,
    RunState,
    StateError,
    TriggerEvent,
)
from tests.helpers.polling import settle, wait_for

S = ProcessState

# The lifecycle as documented: start() CREATED/STOPPED/FAILED -> STARTING -> RUNNING (or FAILED
# when startup raises); stop() -> STOPPING -> STOPPED (CREATED -> STOPPED directly); suspend()
# RUNNING -> SUSPENDED; resume() SUSPENDED -> RUNNING; a running, suspended or stopping process
# can fail. Written out here on purpose rather than imported from the module under test.
EXPECTED_TRANSITIONS: dict[ProcessState, set[ProcessState]] = {
    S.CREATED: {S.STARTING, S.STOPPED},
    S.STARTING: {S.RUNNING, S.FAILED, S.STOPPING},
    S.RUNNING: {S.SUSPENDED, S.STOPPING, S.FAILED},
    S.SUSPENDED: {S.RUNNING, S.STOPPING, S.FAILED},
    S.STOPPING: {S.STOPPED, S.FAILED},
    S.STOPPED: {S.STARTING},
    S.FAILED: {S.STARTING, S.STOPPING},
}

ALL_PAIRS = list(itertools.product(list(ProcessState), repeat=2))
ALLOWED_PAIRS = [(a, b) for a, b in ALL_PAIRS if b in EXPECTED_TRANSITIONS[a]]
DISALLOWED_PAIRS = [(a, b) for a, b in ALL_PAIRS if b not in EXPECTED_TRANSITIONS[a]]


def _pair_id(pair: tuple[ProcessState, ProcessState]) -> str:
    return f"{pair[0].value}->{pair[1].value}"


# -- helpers --------------------------------------------------------------------------------------

OK_MODEL: dict[str, Any] = {"provider": "scripted", "turns": [{"reply": "ok"}]}
FAILING_MODEL: dict[str, Any] = {"provider": "scripted", "turns": [{"raise": "boom"}]}
SLOW_MODEL: dict[str, Any] = {"provider": "scripted", "turns": [{"sleep": 5, "reply": "x"}]}
# Events with payload {"script": "bad"} raise, every other event replies "ok".
MIXED_MODEL: dict[str, Any] = {
    "provider": "scripted",
    "scripts": {"bad": [{"raise": "boom"}], "ok": [{"reply": "ok"}]},
    "select": {"by_payload_field": "script"},
    "turns": [{"reply": "ok"}],
}

_counter = itertools.count()


def event(n: int | None = None, **payload: Any) -> TriggerEvent:
    payload.setdefault("n", next(_counter) if n is None else n)
    return TriggerEvent(trigger_id="manual-1", trigger_type="manual", payload=payload)


def kinds(sub: Any) -> list[str]:
    return [e.kind for e in sub.drain()]


def state_changes(sub: Any) -> list[tuple[str, str]]:
    return [(e.from_state, e.to_state) for e in sub.drain() if e.kind == "process.state"]


def succeeded_ids(process: AgentProcess) -> list[str]:
    return [r.event.event_id for r in process.recent_runs() if r.state is RunState.SUCCEEDED]


def letters(process: AgentProcess) -> list[tuple[str, str, str]]:
    return [(d["event"].event_id, d["reason"], d["error"]) for d in process.dead_letters]


class GatedModel:
    """A model whose replies wait until the test opens the gate."""

    name = "gated"

    def __init__(self, error: str | None = None) -> None:
        self.gate = asyncio.Event()
        self.calls: list[str] = []
        self.error = error

    async def complete(self, request: ModelRequest) -> ModelTurn:
        self.calls.append(request.event.event_id)
        await self.gate.wait()
        if self.error is not None:
            raise RuntimeError(self.error)
        return ModelTurn(reply="done")


MakeProcess = Callable[..., AgentProcess]


@pytest.fixture
async def make_process() -> AsyncIterator[MakeProcess]:
    """Build processes that are stopped when the test ends, whatever state it left them in."""
    made: list[AgentProcess] = []

    def factory(model: dict[str, Any] | None = None, name: str = "proc", **kwargs: Any
                ) -> AgentProcess:
        overrides = {k: kwargs.pop(k) for k in ("model_obj", "clock") if k in kwargs}
        config = ProcessConfig(model=model or OK_MODEL, **kwargs)
        process = AgentProcess(
            name, config, model=overrides.get("model_obj"), clock=overrides.get("clock")
        )
        made.append(process)
        return process

    yield factory
    for process in made:
        await process.close()


async def start_and_settle(process: AgentProcess) -> None:
    await process.start()
    await settle()  # let the workers reach the queue, as in a process that has been up a while


async def make_failed(process: AgentProcess) -> TriggerEvent:
    """Drive a started process configured with max_consecutive_failures=1 into FAILED."""
    if process.state is not S.RUNNING:
        await start_and_settle(process)
    bad = event(script="bad")
    assert await process.inject(bad)
    await wait_for(lambda: process.state is S.FAILED, what="process to fail")
    return bad


async def process_in(make_process: MakeProcess, state: ProcessState) -> AgentProcess:
    """A process resting in ``state`` (CREATED, RUNNING, SUSPENDED, STOPPED or FAILED)."""
    process = make_process(MIXED_MODEL, max_consecutive_failures=1)
    if state is S.CREATED:
        return process
    await start_and_settle(process)
    if state is S.SUSPENDED:
        await process.suspend()
    elif state is S.STOPPED:
        await process.stop()
    elif state is S.FAILED:
        await make_failed(process)
    assert process.state is state
    return process


STABLE_STATES = [S.CREATED, S.RUNNING, S.SUSPENDED, S.STOPPED, S.FAILED]


# -- ProcessLifecycle -----------------------------------------------------------------------------


def test_lifecycle_starts_created_with_empty_history() -> None:
    lifecycle = ProcessLifecycle()
    assert lifecycle.state is S.CREATED
    assert lifecycle.history == []


def test_transition_table_covers_every_state() -> None:
    assert set(EXPECTED_TRANSITIONS) == set(ProcessState)
    assert len(ALLOWED_PAIRS) + len(DISALLOWED_PAIRS) == len(ProcessState) ** 2


@pytest.mark.parametrize("pair", ALLOWED_PAIRS, ids=_pair_id)
def test_allowed_transition(pair: tuple[ProcessState, ProcessState]) -> None:
    current, target = pair
    lifecycle = ProcessLifecycle(current)
    seen: list[Any] = []
    lifecycle.add_listener(seen.append)

    assert lifecycle.can_transition(target)
    record = lifecycle.transition(target, reason="because", metadata={"k": 1})

    assert lifecycle.state is target
    assert (record.from_state, record.to_state) == (current, target)
    assert record.reason == "because"
    assert record.metadata == {"k": 1}
    assert lifecycle.history == [record]
    assert seen == [record]
    assert record.to_dict()["from_state"] == current.value
    assert record.to_dict()["to_state"] == target.value


@pytest.mark.parametrize("pair", DISALLOWED_PAIRS, ids=_pair_id)
def test_disallowed_transition_raises_state_error(pair: tuple[ProcessState, ProcessState]) -> None:
    current, target = pair
    lifecycle = ProcessLifecycle(current)
    seen: list[Any] = []
    lifecycle.add_listener(seen.append)

    assert not lifecycle.can_transition(target)
    with pytest.raises(StateError) as info:
        lifecycle.transition(target)

    error = info.value
    assert isinstance(error, ValueError)
    assert error.current is current
    assert error.target is target
    message = str(error)
    assert f"from '{current.value}' to '{target.value}'" in message
    allowed = sorted(s.value for s in EXPECTED_TRANSITIONS[current])
    assert f"Allowed targets: {allowed}" in message
    # nothing changed and no listener heard about it
    assert lifecycle.state is current
    assert lifecycle.history == []
    assert seen == []


def test_a_full_walk_records_history_in_order() -> None:
    path = [S.STARTING, S.RUNNING, S.SUSPENDED, S.RUNNING, S.STOPPING, S.STOPPED, S.STARTING,
            S.FAILED, S.STOPPING, S.STOPPED]
    lifecycle = ProcessLifecycle()
    for target in path:
        lifecycle.transition(target)
    steps = [(r.from_state, r.to_state) for r in lifecycle.history]
    assert steps == list(zip([S.CREATED, *path[:-1]], path, strict=True))


def test_history_is_bounded_and_a_copy() -> None:
    lifecycle = ProcessLifecycle(S.RUNNING)
    for _ in range(ProcessLifecycle.HISTORY_LIMIT):
        lifecycle.transition(S.SUSPENDED)
        lifecycle.transition(S.RUNNING)
    history = lifecycle.history
    assert len(history) == ProcessLifecycle.HISTORY_LIMIT
    assert history[-1].to_state is S.RUNNING
    history.clear()
    assert len(lifecycle.history) == ProcessLifecycle.HISTORY_LIMIT


def test_a_failing_listener_does_not_undo_the_transition() -> None:
    lifecycle = ProcessLifecycle()
    later: list[Any] = []

    def broken(record: Any) -> None:
        raise RuntimeError("listener bug")

    lifecycle.add_listener(broken)
    lifecycle.add_listener(later.append)
    lifecycle.transition(S.STARTING)
    assert lifecycle.state is S.STARTING
    assert len(later) == 1


def test_state_error_with_a_method_name_target() -> None:
    error = StateError(S.STOPPED, "suspend", "suspend() on process 'p'")
    assert error.current is S.STOPPED
    assert error.target == "suspend"
    assert str(error) == (
        "suspend() on process 'p': Cannot transition from 'stopped' to 'suspend'. "
        "Allowed targets: ['starting']"
    )


# -- start() --------------------------------------------------------------------------------------


async def test_start_goes_created_starting_running(make_process: MakeProcess) -> None:
    process = make_process()
    sub = process.notifier.subscribe()
    await process.start()
    assert process.state is S.RUNNING
    events = sub.drain()
    assert [e.kind for e in events] == ["process.state", "process.state", "process.started"]
    assert [(e.from_state, e.to_state) for e in events[:2]] == [
        ("created", "starting"), ("starting", "running")
    ]
    assert events[2].restart is False


@pytest.mark.parametrize("state", [S.RUNNING, S.SUSPENDED], ids=str)
async def test_start_when_up_raises(make_process: MakeProcess, state: ProcessState) -> None:
    process = await process_in(make_process, state)
    sub = process.notifier.subscribe()
    with pytest.raises(StateError) as info:
        await process.start()
    assert info.value.current is state
    assert info.value.target is S.STARTING
    assert "start()" in str(info.value)
    assert "Allowed targets" in str(info.value)
    assert process.state is state
    assert kinds(sub) == []


async def test_start_while_starting_raises(make_process: MakeProcess) -> None:
    """A second start() issued while the first is in STARTING is refused, and the process is
    started once."""
    process = make_process()
    sub = process.notifier.subscribe(kinds=["process.started"])
    second: list[asyncio.Task[None]] = []

    def on_transition(record: Any) -> None:
        if record.to_state is S.STARTING and not second:
            second.append(asyncio.ensure_future(process.start()))

    process.lifecycle.add_listener(on_transition)
    await process.start()
    assert len(second) == 1
    with pytest.raises(StateError) as info:
        await second[0]
    assert info.value.target is S.STARTING
    assert process.state is S.RUNNING
    assert len(sub.drain()) == 1


@pytest.mark.parametrize("state", [S.STOPPED, S.FAILED], ids=str)
async def test_start_again_from_stopped_or_failed(make_process: MakeProcess,
                                                  state: ProcessState) -> None:
    process = await process_in(make_process, state)
    sub = process.notifier.subscribe()
    await process.start()
    assert process.state is S.RUNNING
    assert state_changes(sub) == [(state.value, "starting"), ("starting", "running")]
    good = event()
    assert await process.inject(good)
    await wait_for(lambda: good.event_id in succeeded_ids(process), what="run after restart")


# -- stop() ---------------------------------------------------------------------------------------


async def test_stop_from_created_goes_straight_to_stopped(make_process: MakeProcess) -> None:
    process = make_process()
    sub = process.notifier.subscribe()
    await process.stop()
    assert process.state is S.STOPPED
    events = sub.drain()
    assert [e.kind for e in events] == ["process.state"]
    assert (events[0].from_state, events[0].to_state) == ("created", "stopped")
    assert "process.stopped" not in [e.kind for e in events]


async def test_stop_from_created_dead_letters_injected_events(make_process: MakeProcess) -> None:
    process = make_process()
    early = [event(), event()]
    for e in early:
        assert await process.inject(e)
    assert [e.event_id for e in process.queued_events()] == [e.event_id for e in early]
    await process.stop()
    assert letters(process) == [(e.event_id, "process stopped", "") for e in early]
    assert process.queued_events() == []


async def test_stop_when_stopped_is_a_no_op(make_process: MakeProcess) -> None:
    process = await process_in(make_process, S.STOPPED)
    history = process.lifecycle.history
    dead = process.dead_letters
    sub = process.notifier.subscribe()
    await process.stop()
    assert process.state is S.STOPPED
    assert kinds(sub) == []
    assert process.lifecycle.history == history
    assert process.dead_letters == dead


@pytest.mark.parametrize("state", [S.RUNNING, S.SUSPENDED, S.FAILED], ids=str)
async def test_stop_goes_through_stopping_and_emits_stopped(make_process: MakeProcess,
                                                            state: ProcessState) -> None:
    process = await process_in(make_process, state)
    sub = process.notifier.subscribe(kinds=["process.state", "process.stopped"])
    await process.stop()
    assert process.state is S.STOPPED
    events = sub.drain()
    assert [e.kind for e in events] == ["process.state", "process.state", "process.stopped"]
    assert [(e.from_state, e.to_state) for e in events[:2]] == [
        (state.value, "stopping"), ("stopping", "stopped")
    ]
    assert events[2].process_id == process.process_id
    assert process.suspend_reason is None
    assert process.status()["uptime_seconds"] is None


async def test_stop_while_stopping_does_nothing(make_process: MakeProcess) -> None:
    process = await process_in(make_process, S.RUNNING)
    sub = process.notifier.subscribe(kinds=["process.stopped"])
    inner: list[asyncio.Task[None]] = []
    seen_state: list[ProcessState] = []

    async def second_stop() -> None:
        await process.stop()
        seen_state.append(process.state)

    def on_transition(record: Any) -> None:
        if record.to_state is S.STOPPING and not inner:
            inner.append(asyncio.ensure_future(second_stop()))

    process.lifecycle.add_listener(on_transition)
    await process.stop()
    await inner[0]
    # the nested stop() returned while the first was still tearing down
    assert seen_state == [S.STOPPING]
    assert process.state is S.STOPPED
    assert len(sub.drain()) == 1
    stops = [r for r in process.lifecycle.history if r.to_state is S.STOPPED]
    assert len(stops) == 1


async def test_stop_issued_while_starting_ends_stopped(make_process: MakeProcess) -> None:
    process = make_process()
    inner: list[asyncio.Task[None]] = []

    def on_transition(record: Any) -> None:
        if record.to_state is S.STARTING and not inner:
            inner.append(asyncio.ensure_future(process.stop()))

    process.lifecycle.add_listener(on_transition)
    await process.start()
    await inner[0]
    assert process.state is S.STOPPED


async def test_stop_dead_letters_queued_events_in_order(make_process: MakeProcess) -> None:
    process = await process_in(make_process, S.SUSPENDED)
    queued = [event(), event(), event()]
    for e in queued:
        assert await process.inject(e)
    await settle()
    await process.stop()
    assert letters(process) == [(e.event_id, "process stopped", "") for e in queued]
    assert all(d["attempts"] == 0 for d in process.dead_letters)
    assert process.queued_events() == []
    assert succeeded_ids(process) == []


async def test_stop_cancels_the_run_in_flight(make_process: MakeProcess) -> None:
    process = make_process(SLOW_MODEL)
    await start_and_settle(process)
    running, waiting1, waiting2 = event(), event(), event()
    for e in (running, waiting1, waiting2):
        assert await process.inject(e)
    await wait_for(lambda: len(process.active_runs()) == 1, what="the slow run to start")
    assert process.active_runs()[0].event.event_id == running.event_id

    sub = process.notifier.subscribe(kinds=["event.dead_lettered", "run.finished"])
    await process.stop()

    assert process.state is S.STOPPED
    assert letters(process) == [
        (running.event_id, "process stopped", "run cancelled"),
        (waiting1.event_id, "process stopped", ""),
        (waiting2.event_id, "process stopped", ""),
    ]
    assert process.dead_letters[0]["attempts"] == 1
    assert process.active_runs() == []
    cancelled = [r for r in process.recent_runs() if r.event.event_id == running.event_id]
    assert [r.state for r in cancelled] == [RunState.CANCELLED]
    assert process.invocation_count == 0
    assert sorted(kinds(sub)) == ["event.dead_lettered"] * 3 + ["run.finished"]


async def test_stop_of_a_suspended_process_cancels_its_run_in_flight(
    make_process: MakeProcess,
) -> None:
    process = make_process(SLOW_MODEL)
    await start_and_settle(process)
    running, later = event(), event()
    await process.inject(running)
    await wait_for(lambda: len(process.active_runs()) == 1, what="the slow run to start")
    await process.suspend()
    await process.inject(later)
    await process.stop()
    assert letters(process) == [
        (running.event_id, "process stopped", "run cancelled"),
        (later.event_id, "process stopped", ""),
    ]


@pytest.mark.parametrize("state", [S.STOPPED, S.CREATED], ids=str)
async def test_inject_after_stop_is_dead_lettered(make_process: MakeProcess,
                                                  state: ProcessState) -> None:
    process = await process_in(make_process, state)
    await process.stop()
    late = event()
    assert await process.inject(late) is False
    assert letters(process)[-1] == (late.event_id, "process stopped", "")
    assert process.queued_events() == []


async def test_inject_while_failed_is_dead_lettered(make_process: MakeProcess) -> None:
    process = await process_in(make_process, S.FAILED)
    late = event()
    assert await process.inject(late) is False
    assert letters(process)[-1] == (late.event_id, "process failed", "")


async def test_explicit_stop_cancels_a_pending_restart(make_process: MakeProcess) -> None:
    clock = FakeClock()
    process = make_process(FAILING_MODEL, max_consecutive_failures=1,
                           restart_policy="on_failure", restart_backoff=5.0, clock=clock)
    await start_and_settle(process)
    sub = process.notifier.subscribe(kinds=["process.restarted", "process.started"])
    await process.inject(event())
    await wait_for(lambda: process.state is S.FAILED, what="process to fail")
    await wait_for(lambda: clock.next_deadline() == clock.monotonic() + 5.0,
                   what="the restart to be scheduled")
    await process.stop()
    clock.advance(60.0)
    await settle()
    assert process.state is S.STOPPED
    assert kinds(sub) == []


# -- suspend() and resume() -----------------------------------------------------------------------


async def test_suspend_and_resume(make_process: MakeProcess) -> None:
    process = await process_in(make_process, S.RUNNING)
    sub = process.notifier.subscribe(kinds=["process.state"])
    await process.suspend()
    assert process.state is S.SUSPENDED
    assert process.suspend_reason == "manual"
    assert process.status()["suspend_reason"] == "manual"
    await process.resume()
    assert process.state is S.RUNNING
    assert process.suspend_reason is None
    await process.suspend("maintenance")
    assert process.suspend_reason == "maintenance"
    assert state_changes(sub) == [
        ("running", "suspended"), ("suspended", "running"), ("running", "suspended")
    ]


@pytest.mark.parametrize("state", [s for s in STABLE_STATES if s is not S.RUNNING], ids=str)
async def test_suspend_only_from_running(make_process: MakeProcess, state: ProcessState) -> None:
    process = await process_in(make_process, state)
    sub = process.notifier.subscribe()
    with pytest.raises(StateError) as info:
        await process.suspend()
    assert info.value.current is state
    assert info.value.target is S.SUSPENDED
    assert "suspend()" in str(info.value)
    assert process.state is state
    assert kinds(sub) == []


@pytest.mark.parametrize("state", [s for s in STABLE_STATES if s is not S.SUSPENDED], ids=str)
async def test_resume_only_from_suspended(make_process: MakeProcess, state: ProcessState) -> None:
    process = await process_in(make_process, state)
    sub = process.notifier.subscribe()
    with pytest.raises(StateError) as info:
        await process.resume()
    assert info.value.current is state
    assert info.value.target is S.RUNNING
    assert "resume()" in str(info.value)
    assert process.state is state
    assert kinds(sub) == []


async def test_suspend_keeps_queueing_events_in_arrival_order(make_process: MakeProcess) -> None:
    process = await process_in(make_process, S.SUSPENDED)
    arrived = [event(), event(), event()]
    for e in arrived:
        assert await process.inject(e) is True
    await settle()
    assert process.state is S.SUSPENDED
    assert process.active_runs() == []
    assert process.recent_runs() == []
    # every event that has not run is visible as waiting in the queue, oldest first
    assert [e.event_id for e in process.queued_events()] == [e.event_id for e in arrived]
    assert process.status()["queue_size"] == len(arrived)


async def test_resume_runs_queued_events_in_arrival_order(make_process: MakeProcess) -> None:
    process = await process_in(make_process, S.SUSPENDED)
    arrived = [event(), event(), event(), event()]
    for e in arrived:
        await process.inject(e)
    await settle()
    assert process.recent_runs() == []
    sub = process.notifier.subscribe(kinds=["run.started"])
    await process.resume()
    await wait_for(lambda: len(succeeded_ids(process)) == len(arrived), what="queued runs")
    assert succeeded_ids(process) == [e.event_id for e in arrived]
    assert [e.event_id for e in sub.drain()] == [e.event_id for e in arrived]
    assert process.invocation_count == len(arrived)
    assert process.dead_letters == []


async def test_resume_starts_queued_events_in_arrival_order_with_several_workers(
    make_process: MakeProcess,
) -> None:
    """concurrency workers take events in arrival order, so runs *start* in arrival order even
    when they may overlap."""
    process = make_process(concurrency=3)
    await start_and_settle(process)
    await process.suspend()
    arrived = [event() for _ in range(6)]
    for e in arrived:
        await process.inject(e)
    await settle()
    assert [e.event_id for e in process.queued_events()] == [e.event_id for e in arrived]
    sub = process.notifier.subscribe(kinds=["run.started"])
    await process.resume()
    await wait_for(lambda: len(succeeded_ids(process)) == len(arrived), what="queued runs")
    assert [e.event_id for e in sub.drain()] == [e.event_id for e in arrived]


async def test_stop_with_several_workers_dead_letters_in_arrival_order(
    make_process: MakeProcess,
) -> None:
    process = make_process(concurrency=3)
    await start_and_settle(process)
    await process.suspend()
    arrived = [event() for _ in range(5)]
    for e in arrived:
        await process.inject(e)
    await settle()
    await process.stop()
    assert letters(process) == [(e.event_id, "process stopped", "") for e in arrived]


async def test_run_in_flight_finishes_during_suspend(make_process: MakeProcess) -> None:
    model = GatedModel()
    process = make_process(model_obj=model)
    await start_and_settle(process)
    first, second = event(), event()
    await process.inject(first)
    await wait_for(lambda: len(process.active_runs()) == 1, what="the first run to start")
    await process.suspend()
    await process.inject(second)
    model.gate.set()
    await wait_for(lambda: first.event_id in succeeded_ids(process), what="the run in flight")
    await settle()
    # the suspended process started nothing new
    assert process.state is S.SUSPENDED
    assert model.calls == [first.event_id]
    assert process.active_runs() == []
    await process.resume()
    await wait_for(lambda: second.event_id in succeeded_ids(process), what="the queued run")
    assert succeeded_ids(process) == [first.event_id, second.event_id]


async def test_a_failure_in_flight_during_suspend_fails_the_process(
    make_process: MakeProcess,
) -> None:
    model = GatedModel(error="boom")
    process = make_process(model_obj=model, max_consecutive_failures=1)
    await start_and_settle(process)
    doomed, queued = event(), event()
    await process.inject(doomed)
    await wait_for(lambda: len(process.active_runs()) == 1, what="the run to start")
    await process.suspend()
    await process.inject(queued)
    model.gate.set()
    await wait_for(lambda: process.state is S.FAILED, what="the process to fail")
    assert [(d["event"].event_id, d["reason"]) for d in process.dead_letters] == [
        (doomed.event_id, "retries exhausted"),
        (queued.event_id, "process failed"),
    ]
    assert process.queued_events() == []


async def test_stop_dead_letters_an_event_waiting_for_a_retry(make_process: MakeProcess) -> None:
    clock = FakeClock()
    process = make_process(FAILING_MODEL, trigger_delivery={"max_retries": 1,
                                                            "retry_backoff": 10.0}, clock=clock)
    await start_and_settle(process)
    retried = event()
    await process.inject(retried)
    await wait_for(lambda: process.status()["pending_retries"] == 1, what="a pending retry")
    await process.stop()
    assert process.status()["pending_retries"] == 0
    # Its error is the one its attempt failed with (issue 36), not an empty one.
    assert letters(process) == [(retried.event_id, "process stopped", "model: ModelError: boom")]
    assert process.dead_letters[0]["attempts"] == 1
    clock.advance(60.0)
    await settle()
    assert process.queued_events() == []
    assert len(process.dead_letters) == 1


# -- failing --------------------------------------------------------------------------------------


async def test_a_raising_model_fails_the_process(make_process: MakeProcess) -> None:
    process = make_process(FAILING_MODEL, max_consecutive_failures=1)
    await start_and_settle(process)
    sub = process.notifier.subscribe(kinds=["process.state", "process.failed"])
    doomed = event()
    await process.inject(doomed)
    await wait_for(lambda: process.state is S.FAILED, what="process to fail")
    events = sub.drain()
    assert [e.kind for e in events] == ["process.state", "process.failed"]
    assert (events[0].from_state, events[0].to_state) == ("running", "failed")
    [(event_id, reason, error)] = letters(process)
    assert (event_id, reason) == (doomed.event_id, "retries exhausted")
    assert "boom" in error


async def test_startup_failure_goes_failed_and_raises(make_process: MakeProcess) -> None:
    process = make_process(tools=["no_such_module_for_tests.tools:lookup"],
                           restart_policy="on_failure", restart_backoff=0.0)
    sub = process.notifier.subscribe(kinds=["process.state", "process.failed",
                                            "process.restarted"])
    with pytest.raises(Exception, match="no_such_module_for_tests"):
        await process.start()
    assert process.state is S.FAILED
    await settle()
    events = sub.drain()
    assert [e.kind for e in events] == ["process.state", "process.state", "process.failed"]
    assert [(e.from_state, e.to_state) for e in events[:2]] == [
        ("created", "starting"), ("starting", "failed")
    ]
    assert process.state is S.FAILED  # your own start() is never retried automatically
    with pytest.raises(Exception, match="no_such_module_for_tests"):
        await process.start()
    assert process.state is S.FAILED
    await process.stop()
    assert process.state is S.STOPPED


# -- close() and async with -----------------------------------------------------------------------


async def test_async_with_starts_and_closes(make_process: MakeProcess) -> None:
    process = make_process()
    sub = process.notifier.subscribe(kinds=["process.started", "process.stopped"])
    async with process as entered:
        assert entered is process
        assert process.state is S.RUNNING
        e = event()
        await process.inject(e)
        await wait_for(lambda: e.event_id in succeeded_ids(process), what="the run")
        assert len(process.conversation) == 2
    assert process.state is S.STOPPED
    assert len(process.conversation) == 0
    assert kinds(sub) == ["process.started", "process.stopped"]


async def test_async_with_closes_on_error(make_process: MakeProcess) -> None:
    process = make_process()
    with pytest.raises(RuntimeError, match="inside"):
        async with process:
            raise RuntimeError("inside")
    assert process.state is S.STOPPED


async def test_close_clears_the_conversation_but_stop_keeps_it(make_process: MakeProcess) -> None:
    process = await process_in(make_process, S.RUNNING)
    e = event()
    await process.inject(e)
    await wait_for(lambda: e.event_id in succeeded_ids(process), what="the run")
    assert len(process.conversation) == 2
    await process.stop()
    assert len(process.conversation) == 2
    await process.start()
    await process.close()
    assert process.state is S.STOPPED
    assert len(process.conversation) == 0
    assert process.invocation_count == 1  # close() keeps the counters


async def test_close_from_created(make_process: MakeProcess) -> None:
    process = make_process()
    sub = process.notifier.subscribe()
    await process.close()
    assert process.state is S.STOPPED
    assert "process.stopped" not in kinds(sub)


async def test_conversation_clear_on_stop(make_process: MakeProcess) -> None:
    process = make_process(context={"conversation_clear_on_stop": True})
    await start_and_settle(process)
    e = event()
    await process.inject(e)
    await wait_for(lambda: e.event_id in succeeded_ids(process), what="the run")
    await process.stop()
    assert len(process.conversation) == 0


async def test_start_after_stop_keeps_context_and_invocation_count(
    make_process: MakeProcess,
) -> None:
    process = make_process(context={"initial_state": {"seed": 1}})
    await start_and_settle(process)
    first = event()
    await process.inject(first)
    await wait_for(lambda: process.invocation_count == 1, what="first run")
    process.context.put("counter", 41)
    await process.stop()

    await start_and_settle(process)
    assert process.state is S.RUNNING
    assert process.invocation_count == 1
    assert process.context.get("counter") == 41
    assert process.context.get("seed") == 1
    assert len(process.conversation) == 2
    second = event()
    await process.inject(second)
    await wait_for(lambda: process.invocation_count == 2, what="second run")
    assert succeeded_ids(process) == [first.event_id, second.event_id]
    assert len(process.conversation) == 4


async def test_dead_letters_survive_stop_and_can_be_redelivered(make_process: MakeProcess) -> None:
    process = await process_in(make_process, S.SUSPENDED)
    queued = [event(), event()]
    for e in queued:
        await process.inject(e)
    await process.stop()
    assert len(process.dead_letters) == 2
    await start_and_settle(process)
    assert len(process.dead_letters) == 2
    assert await process.redeliver_dead_letters() == 2
    await wait_for(lambda: len(succeeded_ids(process)) == 2, what="redelivered runs")
    assert succeeded_ids(process) == [e.event_id for e in queued]
    assert process.dead_letters == []

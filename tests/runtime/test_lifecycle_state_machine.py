"""A stateful property test of AgentProcess's lifecycle.

A plain Python model predicts, after every operation, the process state and the fate of every
injected event (ran successfully, dead-lettered with which reason, or still queued). Each rule
either succeeds with the predicted next state or raises StateError exactly when the model says so.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from runtime_core import (
    AgentProcess,
    ProcessConfig,
    ProcessState,
    RunState,
    StateError,
    TriggerEvent,
)
from tests.helpers.polling import settle, wait_for

pytestmark = pytest.mark.slow

S = ProcessState

# Events whose payload has {"script": "bad"} raise; every other event replies "ok" at once.
MODEL: dict[str, Any] = {
    "provider": "scripted",
    "scripts": {"bad": [{"raise": "boom"}], "ok": [{"reply": "ok"}]},
    "select": {"by_payload_field": "script"},
    "turns": [{"reply": "ok"}],
}

# ProcessConfig defaults: the conversation keeps 100 messages, the process its last 100 finished
# runs and 100 dead letters. The model keeps the same windows.
CONVERSATION_MAX = 100
WINDOW = 100

STOPPED_REASON = "process stopped"
FAILED_REASON = "process failed"
EXHAUSTED_REASON = "retries exhausted"


class LifecycleMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.process = AgentProcess(
            "machine", ProcessConfig(model=MODEL, max_consecutive_failures=1)
        )
        # the model
        self.state = S.CREATED
        self.pending: list[tuple[str, str]] = []  # (event_id, script), arrival order
        self.runs: list[tuple[str, bool]] = []  # (event_id, succeeded), oldest first
        self.succeeded = 0
        self.dead: list[tuple[str, str]] = []  # (event_id, reason), oldest first
        self.injected: list[str] = []
        self.conversation = 0

    # -- plumbing ---------------------------------------------------------------------------------
    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    async def _settled(self) -> None:
        process = self.process
        await settle()
        await wait_for(
            lambda: not process.active_runs()
            and (process.state is not S.RUNNING or not process.queued_events()),
            timeout=5.0,
            what="the process to settle",
        )
        await settle()

    def call(self, method: str, allowed: bool, *args: Any) -> None:
        """Call ``process.<method>``; it must raise StateError exactly when not ``allowed``."""
        before = self.process.state
        try:
            self.run(getattr(self.process, method)(*args))
        except StateError as error:
            assert not allowed, f"{method}() raised from {before}: {error}"
            assert error.current is before
            assert "Allowed targets" in str(error)
        else:
            assert allowed, f"{method}() from {before} should raise StateError"
        self.run(self._settled())

    # -- the model's effects ----------------------------------------------------------------------
    def _process_pending(self) -> None:
        """A RUNNING process runs its queue in order; a bad event fails it."""
        while self.pending and self.state is S.RUNNING:
            event_id, script = self.pending.pop(0)
            self._ran(event_id, script)

    def _ran(self, event_id: str, script: str) -> None:
        if script == "ok":
            self.runs.append((event_id, True))
            self.succeeded += 1
            self.conversation = min(self.conversation + 2, CONVERSATION_MAX)
            return
        self.runs.append((event_id, False))
        self.dead.append((event_id, EXHAUSTED_REASON))
        self.state = S.FAILED
        self.dead.extend((eid, FAILED_REASON) for eid, _ in self.pending)
        self.pending.clear()

    def _stopped(self) -> None:
        self.dead.extend((eid, STOPPED_REASON) for eid, _ in self.pending)
        self.pending.clear()
        self.state = S.STOPPED

    # -- rules ------------------------------------------------------------------------------------
    @rule()
    def start(self) -> None:
        allowed = self.state in (S.CREATED, S.STOPPED, S.FAILED)
        self.call("start", allowed)
        if allowed:
            self.state = S.RUNNING
            self._process_pending()

    @rule()
    def stop(self) -> None:
        self.call("stop", True)
        self._stopped()

    @rule()
    def close(self) -> None:
        self.call("close", True)
        self._stopped()
        self.conversation = 0

    @rule()
    def suspend(self) -> None:
        allowed = self.state is S.RUNNING
        self.call("suspend", allowed)
        if allowed:
            self.state = S.SUSPENDED
            assert self.process.suspend_reason == "manual"

    @rule()
    def resume(self) -> None:
        allowed = self.state is S.SUSPENDED
        self.call("resume", allowed)
        if allowed:
            self.state = S.RUNNING
            self._process_pending()

    def _inject(self, script: str) -> None:
        event = TriggerEvent(trigger_id="manual-1", trigger_type="manual",
                             payload={"script": script, "n": len(self.injected)})
        self.injected.append(event.event_id)
        accepted = self.run(self.process.inject(event))
        self.run(self._settled())
        if self.state is S.STOPPED:
            assert accepted is False
            self.dead.append((event.event_id, STOPPED_REASON))
        elif self.state is S.FAILED:
            assert accepted is False
            self.dead.append((event.event_id, FAILED_REASON))
        else:
            assert accepted is True
            self.pending.append((event.event_id, script))
            self._process_pending()

    @rule()
    def inject(self) -> None:
        self._inject("ok")

    @rule()
    def fail(self) -> None:
        self._inject("bad")

    @rule(count=st.integers(min_value=2, max_value=3))
    def inject_burst(self, count: int) -> None:
        for _ in range(count):
            self._inject("ok")

    # -- invariants -------------------------------------------------------------------------------
    def _runs(self) -> list[tuple[str, bool]]:
        return [(r.event.event_id, r.state is RunState.SUCCEEDED)
                for r in self.process.recent_runs()]

    def _dead(self) -> list[tuple[str, str]]:
        return [(d["event"].event_id, d["reason"]) for d in self.process.dead_letters]

    def _queued(self) -> list[str]:
        return [e.event_id for e in self.process.queued_events()]

    @invariant()
    def state_matches_model(self) -> None:
        assert self.process.state is self.state

    @invariant()
    def no_event_is_lost(self) -> None:
        if len(self.injected) > WINDOW:
            return  # older outcomes may have left the bounded views
        succeeded = {eid for eid, ok in self._runs() if ok}
        dead = {eid for eid, _ in self._dead()}
        accounted = succeeded | dead | set(self._queued())
        lost = [eid for eid in self.injected if eid not in accounted]
        assert not lost, (
            f"{len(lost)} of {len(self.injected)} injected events are neither succeeded, "
            f"dead-lettered nor queued (state {self.process.state})"
        )

    @invariant()
    def outcomes_match_model(self) -> None:
        assert self.process.active_runs() == []
        assert self._runs() == self.runs[-WINDOW:]
        assert self._dead() == self.dead[-WINDOW:]
        assert self._queued() == [eid for eid, _ in self.pending]
        assert self.process.invocation_count == self.succeeded

    @invariant()
    def conversation_matches_model(self) -> None:
        assert len(self.process.conversation) == self.conversation

    def teardown(self) -> None:
        try:
            self.run(self.process.close())
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            if pending:
                self.run(asyncio.gather(*pending, return_exceptions=True))
        finally:
            self.loop.close()


TestLifecycleStateMachine = LifecycleMachine.TestCase
TestLifecycleStateMachine.settings = settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

"""Model-based test: append / checkpoint / recover against a plain in-memory model.

ReplayEngine.recover must always rebuild exactly the model's context and lifecycle state, and
read only the entries after the last checkpoint, on both backends and across reopening."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from runtime_core.journal import InMemoryJournal, JournalEntry, SQLiteJournal
from runtime_core.journal.replay import ReplayEngine

pytestmark = pytest.mark.slow

KEYS = st.sampled_from(["a", "b", "c"])
VALUES = st.one_of(st.integers(-5, 5), st.text(max_size=4), st.none(),
                   st.lists(st.integers(0, 3), max_size=2))
STATES = st.sampled_from(["running", "suspended", "stopping", "stopped"])


class ReplayMachine(RuleBasedStateMachine):
    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = Path(tempfile.mkdtemp())
        self.journal: Any = self._new_journal()
        self.state: dict[str, Any] = {}
        self.lifecycle = "created"
        self.since_checkpoint = 0
        self.has_checkpoint = False

    def _new_journal(self) -> Any:
        journal = InMemoryJournal() if self.backend == "memory" else SQLiteJournal(
            self.tmp / "j.db")
        self.loop.run_until_complete(journal.open())
        return journal

    def append(self, entry_type: str, data: dict[str, Any]) -> None:
        self.loop.run_until_complete(self.journal.append(JournalEntry("p", entry_type, data)))

    @rule(key=KEYS, value=VALUES)
    def context_update(self, key: str, value: Any) -> None:
        self.append("context_update", {"key": key, "value": value, "source": "test"})
        self.state[key] = value
        self.since_checkpoint += 1

    @rule(key=KEYS, value=VALUES)
    def tool_result_with_update(self, key: str, value: Any) -> None:
        self.append("tool_result", {"step": 1, "tool": "t", "call_id": "c", "ok": True,
                                    "result": "", "updates": {key: value}})
        self.state[key] = value
        self.since_checkpoint += 1

    @rule(key=KEYS, value=VALUES)
    def failed_tool_changes_nothing(self, key: str, value: Any) -> None:
        self.append("tool_result", {"step": 1, "tool": "t", "call_id": "c", "ok": False,
                                    "result": "error", "updates": {key: value}})
        self.since_checkpoint += 1

    @rule(to=STATES)
    def transition(self, to: str) -> None:
        self.append("state_transition", {"from_state": self.lifecycle, "to_state": to,
                                         "reason": ""})
        self.lifecycle = to
        self.since_checkpoint += 1

    @rule()
    def noise(self) -> None:
        self.append("model_usage", {"step": 1, "turn": 0, "tool_calls": []})
        self.since_checkpoint += 1

    @rule()
    def checkpoint(self) -> None:
        self.append("checkpoint", {"context_state": dict(self.state),
                                   "lifecycle_state": self.lifecycle, "invocation_count": 0})
        self.since_checkpoint = 0
        self.has_checkpoint = True

    @rule()
    def reopen(self) -> None:
        if self.backend == "sqlite":  # everything appended must survive a new connection
            self.loop.run_until_complete(self.journal.close())
            self.journal = self._new_journal()

    @invariant()
    def recover_matches_the_model(self) -> None:
        got = self.loop.run_until_complete(ReplayEngine(self.journal).recover("p"))
        assert got["context_state"] == self.state
        assert got["entries_replayed"] == self.since_checkpoint
        expected_lifecycle = self.lifecycle
        if not self.has_checkpoint and self.lifecycle == "created":
            expected_lifecycle = "created"
        assert got["lifecycle_state"] == expected_lifecycle

    def teardown(self) -> None:
        self.loop.run_until_complete(self.journal.close())
        self.loop.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class SQLiteReplayMachine(ReplayMachine):
    backend = "sqlite"


TestReplayMemory = ReplayMachine.TestCase
TestReplayMemory.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestReplaySQLite = SQLiteReplayMachine.TestCase
TestReplaySQLite.settings = settings(max_examples=30, stateful_step_count=25, deadline=None)

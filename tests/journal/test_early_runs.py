"""An event's run may start while its acceptance commits (nothing must hear of the event first):
entries commit in submission order and a run writes nothing that waits before that commit, so
the acknowledgement, the tool call and the run's end all come after the event is durable. A
``task_created`` hook, which hears of an event before its run does, keeps the old order."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent
from runtime_core.agent.tools import tool
from runtime_core.events import RunFinished, RunStarted, RuntimeEvent
from runtime_core.governance.hooks import HookContext, HookEvent
from runtime_core.journal import SQLiteJournal
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.memory import InMemoryJournal
from runtime_core.journal.provider import JournalError
from tests.helpers.durable_runs import MODEL, config
from tests.helpers.events import record
from tests.helpers.polling import wait_for
from tests.helpers.write_lock import write_lock_held


def booking_process(path: Path, calls: list[str]) -> tuple[AgentProcess, SQLiteJournal]:
    journal = SQLiteJournal(path, busy_timeout_ms=100)

    def book(ref: str, ctx: ToolContext) -> str:
        """Book a reference: the test's ledger."""
        calls.append(ctx.idempotency_key)
        return f"booked {ref}"

    process = AgentProcess("bench", config(path), tools=[tool(book, effect="write")],
                           journal=journal)
    return process, journal


@contextlib.asynccontextmanager
async def running(process: AgentProcess, journal: SQLiteJournal
                  ) -> AsyncIterator[list[RuntimeEvent]]:
    """The process started, its start committed; what it emits from now on."""
    await process.start()
    seen = record(process)
    try:
        await journal.flush()
        yield seen
    finally:
        await process.stop()
        await journal.close()


def entry_types(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        return [t for (t,) in conn.execute(
            "SELECT entry_type FROM entries WHERE process = 'bench' AND entry_type IN "
            "('event_accepted', 'run_started', 'tool_intent', 'tool_result', 'run_finished') "
            "ORDER BY seq")]


async def test_a_run_starts_while_its_event_commits_and_nothing_outside_sees_it_first(
        tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    calls: list[str] = []
    process, journal = booking_process(path, calls)
    async with running(process, journal) as seen:
        with write_lock_held(path):
            accepting = asyncio.ensure_future(
                process.inject(TriggerEvent("bench", "manual", {"ref": "inv-1"})))
            await wait_for(lambda: any(isinstance(e, RunStarted) for e in seen), 10,
                           "the run to start while its event commits")
            await wait_for(lambda: process.status().get("journal_fault") is not None, 10,
                           "the journal to say it is degraded")
            assert not accepting.done()  # not acknowledged: the event is not durable
            assert calls == []  # the write waits for its intent, which waits for the event
            assert not any(isinstance(e, RunFinished) for e in seen)
        assert await asyncio.wait_for(accepting, 10) is True
        await wait_for(lambda: any(isinstance(e, RunFinished) for e in seen), 10,
                       "the run's end")
        assert len(calls) == 1
    # the run's start rides in its intent (schema 9)
    assert entry_types(path) == ["event_accepted", "tool_intent", "tool_result", "run_finished"]


async def test_a_task_created_hook_hears_of_the_event_before_its_run_starts(
        tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    calls: list[str] = []
    process, journal = booking_process(path, calls)
    order: list[str] = []

    @process.hooks.on(HookEvent.TASK_CREATED)
    async def created(ctx: HookContext) -> None:
        """Note the order."""
        order.append("task_created")

    process.notifier.add_callback(
        lambda e: order.append("run started") if isinstance(e, RunStarted) else None)
    async with running(process, journal):
        with write_lock_held(path):
            accepting = asyncio.ensure_future(
                process.inject(TriggerEvent("bench", "manual", {"ref": "inv-1"})))
            await wait_for(lambda: process.status().get("journal_fault") is not None, 10,
                           "the journal to say it is degraded")
            assert order == [] and not accepting.done()  # queued only once durable
        assert await asyncio.wait_for(accepting, 10) is True
        await wait_for(lambda: len(calls) == 1, 10, "the write")
        assert order[:2] == ["task_created", "run started"]


async def test_a_quick_run_shares_its_acceptance_commit(tmp_path: Path) -> None:
    """With a model that answers at once, the event's acceptance and the run's tool intent
    commit together: two commits a run, not three (the acknowledgement waits no longer than
    the run's first steps on the loop)."""
    path = tmp_path / "journal.db"
    calls: list[str] = []
    process, journal = booking_process(path, calls)
    async with running(process, journal) as seen:
        before = journal.batches
        for i in range(20):
            assert await process.inject(TriggerEvent("bench", "manual", {"ref": f"inv-{i}"}))
            await wait_for(lambda n=i + 1: sum(isinstance(e, RunFinished) for e in seen) == n,
                           10, "the run's end")
        assert len(calls) == 20
        assert journal.batches - before <= 2 * 20 + 2  # a stray checkpoint may take its own


class RefusingAcceptance(InMemoryJournal):
    """Tells one event's acceptance failed (a commit that cannot succeed) once it is queued."""

    def __init__(self, refused_event: str) -> None:
        super().__init__()
        self.refused_event = refused_event

    def submit(self, entry: JournalEntry, *, attachment: Any = None) -> asyncio.Future[None]:
        durable = super().submit(entry, attachment=attachment)
        if entry.entry_type == EntryType.EVENT_ACCEPTED and \
                entry.data.get("event_id") == self.refused_event:
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(JournalError("disk I/O error"))
            return failed
        return durable


async def test_an_event_whose_acceptance_fails_is_taken_back_off_the_queue() -> None:
    refused = TriggerEvent("bench", "manual", {"ref": "inv-1"})
    calls: list[str] = []

    def book(ref: str, ctx: ToolContext) -> str:
        """Book a reference: the test's ledger."""
        calls.append(ref)
        return f"booked {ref}"

    process = AgentProcess("bench", ProcessConfig(model=MODEL, queue_size=1),
                           journal=RefusingAcceptance(refused.event_id),
                           tools=[tool(book, effect="write")])
    seen = record(process)
    await process.start()
    try:
        with pytest.raises(JournalError, match="disk I/O error"):
            await process.inject(refused)
        assert process.status()["queue_size"] == 0  # its slot is free again
        assert not any(isinstance(e, RunStarted) for e in seen) and calls == []
        assert await process.inject(TriggerEvent("bench", "manual", {"ref": "inv-2"}))
        await wait_for(lambda: calls == ["inv-2"], 10, "the next event's write")
    finally:
        await process.stop()


async def test_listeners_hear_an_event_queued_before_its_run_starts(tmp_path: Path) -> None:
    """The live tail and the metrics read the runtime's events in order: queued, then the run."""
    calls: list[str] = []
    process, journal = booking_process(tmp_path / "journal.db", calls)
    async with running(process, journal) as seen:
        event = TriggerEvent("bench", "manual", {"ref": "inv-1"})
        assert await process.inject(event)
        await wait_for(lambda: any(isinstance(e, RunFinished) for e in seen), 10, "the run")
    kinds = [type(e).__name__ for e in seen if getattr(e, "event_id", None) == event.event_id]
    assert kinds.index("RunQueued") < kinds.index("RunStarted")

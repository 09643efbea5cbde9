"""An event whose acceptance was still being journaled when its process failed goes where
the queue went (dead letters, "process failed", ready to redeliver), not into the queue of a
failed process, where it would wait, unseen, for a restart nobody asked for."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.memory import InMemoryJournal
from tests.helpers.polling import wait_for


class HeldAcceptance(InMemoryJournal):
    """Stores every entry at once, but tells one event's acceptance durable only on release."""

    def __init__(self, held_event: str) -> None:
        super().__init__()
        self.held_event = held_event
        self.release = asyncio.Event()
        self.holding = asyncio.Event()

    async def append(self, entry: JournalEntry, *, attachment: Any = None) -> JournalEntry:
        stored = await super().append(entry, attachment=attachment)
        if entry.entry_type == EntryType.EVENT_ACCEPTED and \
                entry.data.get("event_id") == self.held_event:
            self.holding.set()
            await self.release.wait()  # stored, but not yet told durable
        return stored


async def test_an_event_accepted_while_its_process_failed_is_dead_lettered_with_the_queue(
        ) -> None:
    late = TriggerEvent("manual", "manual", {"n": "late"})
    journal = HeldAcceptance(late.event_id)
    process = AgentProcess("deployer", ProcessConfig(
        model={"turns": [{"raise": "deploy target refused the connection"}]},
        trigger_delivery={"max_retries": 0}, max_consecutive_failures=1,
        restart_policy="never"), journal=journal)
    await process.start()
    try:
        accepting = asyncio.ensure_future(process.inject(late))
        await journal.holding.wait()  # its acceptance is being journaled
        await process.inject(TriggerEvent("manual", "manual", {"n": "first"}))
        await wait_for(lambda: process.state.value == "failed", what="the process failed")
        journal.release.set()
        assert await accepting is True  # acknowledged: it was journaled as accepted
        status = process.status()
        assert status["queue_size"] == 0
        letters = {letter["event"].event_id: letter for letter in process.dead_letters}
        assert letters[late.event_id]["reason"] == "process failed"
        assert "refused the connection" in letters[late.event_id]["error"]
    finally:
        await process.stop()

"""An event whose acceptance was still being journaled when its process failed goes where
the queue went (dead letters, "process failed", ready to redeliver), not into the queue of a
failed process, where it would wait, unseen, for a restart nobody asked for. (With a
``task_created`` hook: the event is queued once durable. Without one it is queued at once and
its run starts while the acceptance commits: tests/journal/test_early_runs.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.governance.hooks import HookContext, HookEvent
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

    def submit(self, entry: JournalEntry, *, attachment: Any = None) -> asyncio.Future[None]:
        durable = super().submit(entry, attachment=attachment)
        if entry.entry_type != EntryType.EVENT_ACCEPTED or \
                entry.data.get("event_id") != self.held_event:
            return durable
        self.holding.set()
        held: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def tell() -> None:
            await self.release.wait()  # stored, but not yet told durable
            held.set_result(None)
        self._telling = asyncio.ensure_future(tell())
        return held


async def test_an_event_accepted_while_its_process_failed_is_dead_lettered_with_the_queue(
        ) -> None:
    late = TriggerEvent("manual", "manual", {"n": "late"})
    journal = HeldAcceptance(late.event_id)
    process = AgentProcess("deployer", ProcessConfig(
        model={"turns": [{"raise": "deploy target refused the connection"}]},
        trigger_delivery={"max_retries": 0}, max_consecutive_failures=1,
        restart_policy="never"), journal=journal)

    @process.hooks.on(HookEvent.TASK_CREATED)
    async def created(ctx: HookContext) -> None:  # hears of an event before its run does
        """Nothing to do: being there keeps the event off the queue until it is durable."""

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

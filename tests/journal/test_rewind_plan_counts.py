"""The plan's "messages dropped" once the conversation has reached its cap: the conversation
slides (its oldest messages go as new ones come), so the lists before and after the target no
longer share a beginning, and a looping agent repeats the same words. The plan must count the
messages a rewind really takes away, in the live room and from the command line alike."""

from __future__ import annotations

from typing import Any

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.journal import InMemoryJournal
from runtime_core.journal.entry import EntryType
from runtime_core.journal.offline_rewind import plan_offline
from runtime_core.journal.provider import JournalProvider, ReadFilter
from tests.helpers.polling import wait_for

CAP = 10
# Every run says the same two things: content cannot tell one run's messages from another's.
MODEL = {"provider": "scripted", "turns": [{"reply": "ok", "repeat": "forever"}]}


def capped(cap: int = CAP) -> ProcessConfig:
    return ProcessConfig(model=MODEL, journal={"level": "checkpoint", "backend": "memory"},
                         context={"conversation_max_messages": cap})


async def runs(process: AgentProcess, n: int) -> None:
    for _ in range(n):
        before = process.invocation_count
        await process.inject(TriggerEvent("t", "manual", {"task": "check"}))
        await wait_for(lambda b=before: process.invocation_count > b)  # type: ignore[misc]


async def run_starts(journal: JournalProvider, name: str) -> list[Any]:
    """Each run's first entry: these runs call no tool, so their end (start folded in)."""
    await journal.flush()
    return await journal.read(ReadFilter(process=name, entry_type=EntryType.RUN_FINISHED))


async def started(runs_done: int, cap: int = CAP) -> tuple[AgentProcess, JournalProvider]:
    journal = InMemoryJournal()
    process = AgentProcess("looper", capped(cap), journal=journal)
    await process.start()
    await runs(process, runs_done)
    return process, journal


async def test_at_the_cap_the_plan_counts_only_the_messages_after_the_target() -> None:
    process, journal = await started(12)  # 24 messages made, 10 kept
    try:
        per_run = 2  # the event's user message and the reply
        assert len(process.conversation.messages()) == CAP
        target = (await run_starts(journal, "looper"))[-3]  # three runs back
        plan = await process.rewind_plan(target.entry_id)
        assert plan.messages_dropped == 3 * per_run
        assert len(plan.dropped_preview) == 3 * per_run
        assert "6 message(s) dropped" in plan.summary
    finally:
        await process.stop()


async def test_the_rewind_drops_what_the_plan_said() -> None:
    process, journal = await started(12)
    try:
        target = (await run_starts(journal, "looper"))[-3]
        before = process.conversation.messages()
        result = await process.rewind(target.entry_id)
        # The restored window is the one the process had then: the same kept messages, in the
        # same places, ending where the target's run began.
        assert result.plan.messages_dropped == 6
        assert len(result.conversation) == CAP
        assert list(result.conversation[-4:]) == before[:4]  # the overlap survives
    finally:
        await process.stop()


async def test_further_back_than_the_cap_drops_the_whole_window() -> None:
    process, journal = await started(12)
    try:
        target = (await run_starts(journal, "looper"))[-8]  # 16 messages back: more than kept
        plan = await process.rewind_plan(target.entry_id)
        assert plan.messages_dropped == CAP
    finally:
        await process.stop()


async def test_below_the_cap_the_count_is_unchanged() -> None:
    process, journal = await started(3, cap=100)
    try:
        target = (await run_starts(journal, "looper"))[1]
        plan = await process.rewind_plan(target.entry_id)
        assert plan.messages_dropped == 4
    finally:
        await process.stop()


async def test_the_command_lines_plan_counts_the_same() -> None:
    process, journal = await started(12)
    target = (await run_starts(journal, "looper"))[-3]
    live = await process.rewind_plan(target.entry_id)
    await process.stop()
    offline = await plan_offline(journal, "looper", target.entry_id, "both", max_messages=CAP)
    assert offline.messages_dropped == live.messages_dropped == 6

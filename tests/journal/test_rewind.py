"""Rewind and fork against a process that really ran: a scripted model, a write tool that
books through the context, a conversation. The restored state is compared with what the
journal held just before the target entry."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_core import AgentProcess, AgentRuntime, ProcessConfig, ToolContext, TriggerEvent
from runtime_core.journal import InMemoryJournal
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.left_out import identity_of, with_starts
from runtime_core.journal.provider import JournalProvider, ReadFilter
from runtime_core.journal.rewind import UnknownEntry, fold_context
from tests.helpers.polling import wait_for

GATE: asyncio.Event | None = None


async def book(ctx: ToolContext, invoice: str) -> str:
    if GATE is not None:
        await GATE.wait()
    ctx.set("booked", int(ctx.get("booked", 0)) + 1)
    ctx.set("last", invoice)
    return f"booked {invoice}"


MODEL = {"provider": "scripted", "turns": [
    {"tool_calls": [{"name": "book", "args": {"invoice": "$payload.invoice"}}]},
    {"reply": "Booked."}]}


def config(**extra: Any) -> ProcessConfig:
    return ProcessConfig(model=MODEL, journal={"level": "checkpoint", "backend": "memory"},
                         context={"initial_state": {"owner": "ops"}}, **extra)


async def run_invoices(process: AgentProcess, *invoices: str) -> None:
    for invoice in invoices:
        before = process.invocation_count
        await process.inject(TriggerEvent("t", "manual", {"invoice": invoice}))
        await wait_for(lambda b=before: process.invocation_count > b)  # type: ignore[misc]


async def entries(journal: JournalProvider, name: str, kind: str | None = None
                  ) -> list[JournalEntry]:
    await journal.flush()
    return await journal.read(ReadFilter(process=name, entry_type=kind))


def reference(all_entries: list[JournalEntry], seq: int) -> tuple[dict[str, Any], list[Any]]:
    """The state before ``seq`` folded from scratch: no checkpoints, no shortcuts."""
    context: dict[str, Any] = {"owner": "ops"}
    messages: list[Any] = []
    goals: dict[str | None, str] = {}
    for entry in with_starts(all_entries):  # schema 9: a start rides in its first intent
        if entry.seq >= seq:
            break
        fold_context(context, entry)
        if entry.entry_type == EntryType.RUN_STARTED:
            # schema 6: a standard goal is kept as its parts, rendered again on read
            kept = identity_of(entry.data, entry.timestamp, entry.run_id) or {}
            goals[entry.run_id] = kept["goal"]
        if entry.entry_type == EntryType.RUN_FINISHED:
            if "messages" in entry.data:
                messages.extend(entry.data["messages"])
            else:  # schema 5: the run's goal (its start keeps it) and its reply
                messages.extend([{"role": "user", "content": goals[entry.run_id]},
                                 {"role": "assistant", "content": entry.data.get("reply", "")}])
    return context, messages


async def started(journal: JournalProvider | None = None) -> tuple[AgentProcess, JournalProvider]:
    journal = journal or InMemoryJournal()
    process = AgentProcess("books", config(), tools=[book], journal=journal)
    await process.start()
    await run_invoices(process, "A-1", "A-2", "A-3")
    return process, journal


async def second_run_start(journal: JournalProvider) -> JournalEntry:
    return (await entries(journal, "books", EntryType.RUN_STARTED))[1]


async def test_both_restores_context_and_conversation_and_keeps_history() -> None:
    process, journal = await started()
    target = await second_run_start(journal)
    before_total = len(await entries(journal, "books"))
    plan = await process.rewind_plan(target.entry_id)
    assert plan.target_entry_id == target.entry_id and plan.target_seq == target.seq
    assert {c.key: (c.before, c.after) for c in plan.context_changes} == {
        "booked": (3, 1), "last": ("A-3", "A-1")}
    assert plan.messages_dropped == 4 and plan.dropped_preview[0].startswith("user:")
    assert [e.tool for e in plan.outside_effects] == ["book", "book"]  # undeclared: a write
    assert plan.outside_effects[0].args == {"invoice": "A-2"}
    assert plan.outside_effects[0].result == "booked A-2"
    assert plan.irreversible and "budget counters" in plan.not_rolled_back
    assert plan.entries_affected == before_total - target.seq + 1
    assert plan.conversation_affected == 2
    result = await process.rewind(target.entry_id, "both", actor="tester")
    want_context, want_messages = reference(await entries(journal, "books"), target.seq)
    assert process.context.state_snapshot() == want_context == {
        "owner": "ops", "booked": 1, "last": "A-1"}
    assert process.conversation.messages() == want_messages and len(want_messages) == 2
    after = await entries(journal, "books")
    assert len(after) > before_total  # appended, nothing deleted
    rewinds = [e for e in after if e.entry_type == EntryType.REWIND]
    assert len(rewinds) == 1 and rewinds[0].entry_id == result.rewind_entry_id
    assert rewinds[0].data["actor"] == "tester" and rewinds[0].data["mode"] == "both"
    assert process.state.value == "running"
    await process.stop()


@pytest.mark.parametrize("mode", ["conversation_only", "code_only", "summarize", "cancel"])
async def test_the_other_modes(mode: str) -> None:
    process, journal = await started()
    target = await second_run_start(journal)
    context_now = process.context.state_snapshot()
    messages_now = process.conversation.messages()
    count = len(await entries(journal, "books"))
    await process.rewind(target.entry_id, mode)
    want_context, want_messages = reference(await entries(journal, "books"), target.seq)
    context, messages = process.context.state_snapshot(), process.conversation.messages()
    if mode == "conversation_only":
        assert context == context_now and messages == want_messages
    elif mode == "code_only":
        assert context == want_context and messages == messages_now
    elif mode == "summarize":
        assert context == context_now and messages[:-1] == messages_now
        assert messages[-1]["role"] == "system"
        assert messages[-1]["content"].startswith("[rewind summary] Skipped interval")
    else:  # cancel: a preview, nothing written
        assert context == context_now and messages == messages_now
        assert len(await entries(journal, "books")) == count
    await process.stop()


async def test_a_restart_after_a_rewind_recovers_the_rewound_state(tmp_path: Path) -> None:
    from runtime_core.journal.sqlite.journal import SQLiteJournal

    journal = SQLiteJournal(tmp_path / "j.db")
    await journal.open()
    process, _ = await started(journal)
    target = await second_run_start(journal)
    await process.rewind(target.entry_id)
    restored = (process.context.state_snapshot(), process.conversation.messages())
    await process.stop()
    again = AgentProcess("books", config(), tools=[book], journal=journal)
    await again.start()
    assert (again.context.state_snapshot(), again.conversation.messages()) == restored
    await run_invoices(again, "B-1")  # and it carries on from there
    assert again.context.get("booked") == 2
    assert len(again.conversation.messages()) == 4
    await again.stop()
    await journal.close()


async def test_a_rewind_is_undone_by_rewinding_to_its_own_entry() -> None:
    process, journal = await started()
    original = (process.context.state_snapshot(), process.conversation.messages())
    result = await process.rewind((await second_run_start(journal)).entry_id)
    assert process.context.get("booked") == 1
    await process.rewind(result.rewind_entry_id)
    assert (process.context.state_snapshot(), process.conversation.messages()) == original
    await process.stop()


async def test_rewind_waits_for_a_run_in_flight_and_resumes() -> None:
    global GATE
    process, journal = await started()
    target = await second_run_start(journal)
    GATE = asyncio.Event()
    try:
        await process.inject(TriggerEvent("t", "manual", {"invoice": "C-9"}))
        await wait_for(lambda: bool(process.active_runs()))
        task = asyncio.create_task(process.rewind(target.entry_id))
        await wait_for(lambda: process.suspend_reason == "rewind")
        assert not task.done()  # held until the run in flight finishes
        GATE.set()
        await asyncio.wait_for(task, 5)
    finally:
        GATE = None
    assert process.state.value == "running" and process.suspend_reason is None
    assert process.context.get("booked") == 1  # C-9's booking was rewound with the rest
    await process.stop()


async def test_fork_starts_a_new_process_from_the_entry_with_its_lineage() -> None:
    runtime = AgentRuntime()
    process = runtime.add_process("books", config(), tools=[book])
    await process.start()
    await run_invoices(process, "A-1", "A-2", "A-3")
    journal = process.journal
    assert journal is not None
    target = await second_run_start(journal)
    child = await process.fork(target.entry_id, "books-retry")
    assert child.name in runtime.processes and child.state.value == "created"
    await child.start()
    assert child.context.state_snapshot() == {"owner": "ops", "booked": 1, "last": "A-1"}
    assert len(child.conversation.messages()) == 2
    forked = await entries(journal, "books-retry", EntryType.FORKED)
    assert forked[0].data["from_process"] == "books"
    assert forked[0].data["from_entry_id"] == target.entry_id
    assert process.context.get("booked") == 3  # the original is untouched
    await run_invoices(child, "R-1")
    assert child.context.get("booked") == 2
    await runtime.close()


async def test_errors_name_the_problem() -> None:
    process, _ = await started()
    with pytest.raises(UnknownEntry, match="no journal entry books:999"):
        await process.rewind_plan("books:999")
    with pytest.raises(UnknownEntry, match="belongs to process 'other'"):
        await process.rewind_plan("other:3")
    with pytest.raises(UnknownEntry, match="not an entry id"):
        await process.rewind("yesterday")
    assert process.state.value == "running"  # a bad id never suspends anything
    await process.stop()
    bare = AgentProcess("bare", ProcessConfig(model=MODEL), tools=[book])
    with pytest.raises(RuntimeError, match="needs a journal"):
        await bare.rewind_plan("bare:1")


@settings(max_examples=20, deadline=None)
@given(picks=st.lists(st.floats(min_value=0, max_value=1, exclude_max=True), min_size=1,
                      max_size=3))
def test_rewind_both_gives_exactly_the_state_before_any_entry(picks: list[float]) -> None:
    async def scenario() -> None:
        process, journal = await started()
        original = await entries(journal, "books")
        for pick in picks:
            target = original[int(pick * len(original))]
            await process.rewind(target.entry_id, "both")
            want_context, want_messages = reference(original, target.seq)
            assert process.context.state_snapshot() == want_context, target.entry_id
            assert process.conversation.messages() == want_messages, target.entry_id
        await process.stop()

    asyncio.run(scenario())

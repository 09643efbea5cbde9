"""Rewind and fork for a process that is not running, straight in its journal (the command
line's path): the same ``rewind`` and ``forked`` entries and checkpoints a live process appends,
so the process's next start recovers the rewound state."""

from __future__ import annotations

from typing import Any

from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.provider import JournalProvider
from runtime_core.journal.replay import ReplayEngine
from runtime_core.journal.rewind import (
    Message,
    RewindEngine,
    restored_state,
    rewind_entry_data,
)
from runtime_core.journal.rewind_plan import RewindMode, RewindPlan


async def _offline_plan(journal: JournalProvider, process: str, entry_id: str | int,
                        mode: RewindMode | str, max_messages: int) -> tuple[
        dict[str, Any], list[Message], RewindPlan, dict[str, Any], list[Message],
        dict[str, Any]]:
    """Plan against the state a process that is not running would recover."""
    engine = RewindEngine(journal)
    recovered = await ReplayEngine(journal).recover(process)
    current_context = dict(recovered["context_state"])
    current_conversation = await engine.conversation_before(process, None, max_messages)
    plan, context, conversation = await engine.plan(
        process, entry_id, mode, current_context=current_context,
        current_conversation=current_conversation, max_messages=max_messages)
    return (current_context, current_conversation, plan, context, conversation,
            dict(recovered.get("checkpoint") or {}))


async def plan_offline(journal: JournalProvider, process: str, entry_id: str | int,
                       mode: RewindMode | str, *, max_messages: int = 100) -> RewindPlan:
    """The plan for a process that is not running, against the state it would recover."""
    return (await _offline_plan(journal, process, entry_id, mode, max_messages))[2]


async def apply_offline(journal: JournalProvider, process: str, entry_id: str | int,
                        mode: RewindMode | str, *, actor: str = "cli",
                        max_messages: int = 100) -> tuple[RewindPlan, str]:
    """Rewind a process that is not running, straight in its journal (the command line's
    path): the same rewind entry and checkpoint a live process appends, so its next start
    recovers the rewound state. Returns the plan and the rewind entry's id ("" for cancel)."""
    current_context, current_conversation, plan, context, conversation, checkpoint = \
        await _offline_plan(journal, process, entry_id, mode, max_messages)
    if plan.mode is RewindMode.CANCEL:
        return plan, ""
    new_context, new_conversation = await restored_state(
        RewindEngine(journal), plan, current_context, current_conversation, context,
        conversation)
    entry = await journal.append(JournalEntry(process, EntryType.REWIND, rewind_entry_data(
        plan, actor, new_context, new_conversation)))
    checkpoint["context_state"] = new_context
    await journal.checkpoint(process, checkpoint)
    return plan, entry.entry_id


async def fork_offline(journal: JournalProvider, process: str, entry_id: str | int,
                       new_name: str, *, max_messages: int = 100) -> str:
    """Record a fork in the journal: ``new_name`` starts from ``process``'s state just before
    the entry the first time a process of that name starts on this journal."""
    engine = RewindEngine(journal)
    if await engine.head(new_name):
        raise ValueError(f"the journal already has a process named {new_name!r}; "
                         "choose another name")
    target = await engine.entry(process, entry_id)
    context = await engine.context_before(process, target.seq)
    conversation = await engine.conversation_before(process, target.seq, max_messages)
    await journal.append(JournalEntry(new_name, EntryType.FORKED, {
        "from_process": process, "from_entry_id": target.entry_id,
        "context_state": context, "conversation": conversation}))
    entry = await journal.checkpoint(new_name, {"context_state": context,
                                                "lifecycle_state": "stopped"})
    return entry.entry_id

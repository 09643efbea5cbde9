"""Rewind and fork for one AgentProcess: the process-side half of the rewind engine
(suspend around it, restore context and conversation, append the rewind entry and a checkpoint;
create a fork with its lineage). Kept out of process.py, which wires the parts together."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from runtime_core.context import Message
from runtime_core.events import ContextUpdated
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.rewind import RewindEngine, restored_state, rewind_entry_data
from runtime_core.journal.rewind_plan import RewindMode, RewindPlan, RewindResult
from runtime_core.lifecycle import ProcessState as S

if TYPE_CHECKING:
    from runtime_core.process import AgentProcess


class ProcessRewinder:
    def __init__(self, process: AgentProcess) -> None:
        self.p = process

    def _engine(self, what: str) -> RewindEngine:
        if self.p._recorder is None or self.p._journal is None:
            raise RuntimeError(f"{what} needs a journal: process {self.p.name!r} has none "
                               "(set journal: {level: checkpoint} in its manifest)")
        return RewindEngine(self.p._journal)

    async def _plan(self, engine: RewindEngine, entry_id: str | int, mode: RewindMode | str,
                    ) -> tuple[RewindPlan, dict[str, Any], list[Message]]:
        await self.p._journal.flush()  # type: ignore[union-attr]  # plan what is committed
        return await engine.plan(
            self.p.name, entry_id, mode, current_context=self.p._context.state_snapshot(),
            current_conversation=self.p._conversation.messages(),
            max_messages=self.p.config.context.conversation_max_messages,
            initial=self.p.config.context.initial_state)

    async def plan(self, entry_id: str | int,
                   mode: RewindMode | str = RewindMode.BOTH) -> RewindPlan:
        """What rewinding to just before ``entry_id`` would change; changes nothing."""
        return (await self._plan(self._engine("rewind"), entry_id, mode))[0]

    async def rewind(self, entry_id: str | int, mode: RewindMode | str = RewindMode.BOTH, *,
                     actor: str = "operator") -> RewindResult:
        """Restore the context state and/or conversation to just before ``entry_id``.

        A running process is suspended (reason "rewind") while it happens, waits for a run in
        flight, and is resumed after. History is kept: a ``rewind`` entry and a checkpoint are
        appended. Outside effects, memory, budget, mission and secrets are not rolled back."""
        engine = self._engine("rewind")
        mode = RewindMode(mode)
        if mode is RewindMode.CANCEL:
            return RewindResult(await self.plan(entry_id, mode), "", time.time())
        assert self.p._recorder is not None and self.p._journal is not None
        await engine.entry(self.p.name, entry_id)  # an unknown entry fails before anything
        was_running = self.p.state is S.RUNNING
        if was_running:
            await self.p.suspend("rewind")
        try:
            await self.p._delivery.wait_runs_finished()
            plan, context, conversation = await self._plan(engine, entry_id, mode)
            new_context, new_conversation = await restored_state(
                engine, plan, self.p._context.state_snapshot(),
                self.p._conversation.messages(), context, conversation)
            if mode in (RewindMode.BOTH, RewindMode.CODE_ONLY):
                self.p._context.replace_state(new_context, source="rewind")
            conversation_on = self.p._conversation.enabled or mode is not RewindMode.SUMMARIZE
            if mode is not RewindMode.CODE_ONLY and conversation_on:
                self.p._conversation.set_messages(new_conversation)
            entry = await self.p._recorder.append(EntryType.REWIND, rewind_entry_data(
                plan, actor, self.p._context.state_snapshot(), self.p._conversation.messages()))
            await self.p._checkpoint(durable=True)
        finally:
            if was_running and self.p.state is S.SUSPENDED and self.p._suspend_reason == "rewind":
                await self.p.resume("rewind")
        self.p._notifier.emit(ContextUpdated(process=self.p.name, key="*", source="rewind"))
        return RewindResult(plan, entry.entry_id, time.time(), self.p._context.state_snapshot(),
                            tuple(self.p._conversation.messages()))

    async def fork(self, entry_id: str | int, new_name: str) -> AgentProcess:
        """A new process (same configuration, ``new_name``) that starts from this one's state
        just before ``entry_id``; its journal records where it came from. Not started."""
        engine = self._engine("fork")
        if self.p.runtime is None:
            raise RuntimeError("fork needs the process to belong to an AgentRuntime")
        assert self.p._journal is not None
        await self.p._journal.flush()
        target = await engine.entry(self.p.name, entry_id)
        if await engine.head(new_name):
            raise ValueError(f"the journal already has a process named {new_name!r}; "
                             "choose another name")
        context = await engine.context_before(self.p.name, target.seq,
                                              self.p.config.context.initial_state)
        conversation = await engine.conversation_before(
            self.p.name, target.seq, self.p.config.context.conversation_max_messages)
        child = self.p.runtime.add_process(new_name, self.p.config.model_copy(deep=True),
                                         tools=self.p._extra_tools, base_dir=self.p._base_dir,
                                         model=self.p._model_override)
        journal = child._journal
        if journal is None:
            raise RuntimeError(f"the fork {new_name!r} has no journal")
        await journal.append(JournalEntry(new_name, EntryType.FORKED, {
            "from_process": self.p.name, "from_process_id": self.p.process_id,
            "from_entry_id": target.entry_id, "context_state": context,
            "conversation": conversation}, process_id=child.process_id))
        await journal.checkpoint(new_name, {"context_state": context,
                                            "lifecycle_state": "stopped"},
                                 process_id=child.process_id)
        return child


"""Rewind and fork for one process: the process-side half of the rewind engine (suspend around
it, restore context and conversation, append the rewind entry and a checkpoint; create a fork
with its lineage, without the triggers unless asked, and nothing of it left when it fails).
It sees the process through its shared state and the Suspension port (the supervisor)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from runtime_core.context import Message
from runtime_core.events import ContextUpdated
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.provider import JournalProvider, ReadFilter
from runtime_core.journal.rewind import RewindEngine, restored_state, rewind_entry_data
from runtime_core.journal.rewind_plan import RewindMode, RewindPlan, RewindResult
from runtime_core.lifecycle import ProcessState as S
from runtime_core.process.core import ProcessCore
from runtime_core.process.journaling import ProcessJournal
from runtime_core.process.ports import Suspension
from runtime_core.triggers.base import AcceptResult, TriggerEvent
from runtime_core.triggers.config import TriggerConfig
from runtime_core.triggers.registry import trigger_id_for

log = logging.getLogger(__name__)


def _as_is(value: Any) -> Any:
    return value


class ProcessRewinder:
    """Rewind plans, rewinds and forks; a running process is suspended through
    ``suspension`` around a rewind."""

    def __init__(self, core: ProcessCore, journal: ProcessJournal, *, suspension: Suspension,
                 fork_model: Any, fork_tools: Iterable[Any]) -> None:
        self.core = core
        self.journal = journal
        self._suspension = suspension
        self._fork_model = fork_model  # a fork runs the same model object and Python tools
        self._fork_tools = list(fork_tools)

    def _engine(self, what: str) -> tuple[RewindEngine, JournalProvider]:
        core = self.core
        if core.recorder is None or core.journal is None:
            raise RuntimeError(f"{what} needs a journal: process {core.name!r} has none "
                               "(set journal: {level: checkpoint} in its manifest)")
        return RewindEngine(core.journal), core.journal

    async def _plan(self, engine: RewindEngine, journal: JournalProvider, entry_id: str | int,
                    mode: RewindMode | str
                    ) -> tuple[RewindPlan, dict[str, Any], list[Message]]:
        core = self.core
        await journal.flush()  # plan what is committed
        # The journal holds secrets redacted: compared so too, the plan neither shows a value
        # nor lists a key as changed only because memory holds it unredacted.
        shown = core.secrets.redact_any if core.secrets is not None else _as_is
        return await engine.plan(
            core.name, entry_id, mode, current_context=shown(core.context.state_snapshot()),
            current_conversation=shown(core.conversation.messages()),
            max_messages=core.config.context.conversation_max_messages,
            initial=core.config.context.initial_state)

    async def plan(self, entry_id: str | int,
                   mode: RewindMode | str = RewindMode.BOTH) -> RewindPlan:
        engine, journal = self._engine("rewind")
        return (await self._plan(engine, journal, entry_id, mode))[0]

    async def rewind(self, entry_id: str | int, mode: RewindMode | str = RewindMode.BOTH, *,
                     actor: str = "operator") -> RewindResult:
        core = self.core
        engine, journal = self._engine("rewind")
        mode = RewindMode(mode)
        if mode is RewindMode.CANCEL:
            return RewindResult(await self.plan(entry_id, mode), "", time.time())
        assert core.recorder is not None
        await engine.entry(core.name, entry_id)  # an unknown entry fails before anything
        was_running = core.state is S.RUNNING
        if was_running:
            await self._suspension.suspend("rewind")
        try:
            await core.delivery.wait_runs_finished()
            plan, context, conversation = await self._plan(engine, journal, entry_id, mode)
            new_context, new_conversation = await restored_state(
                engine, plan, core.context.state_snapshot(), core.conversation.messages(),
                context, conversation)
            if mode in (RewindMode.BOTH, RewindMode.CODE_ONLY):
                core.context.replace_state(new_context, source="rewind")
            conversation_on = core.conversation.enabled or mode is not RewindMode.SUMMARIZE
            if mode is not RewindMode.CODE_ONLY and conversation_on:
                core.conversation.set_messages(new_conversation)
            entry = await core.recorder.append(EntryType.REWIND, rewind_entry_data(
                plan, actor, core.context.state_snapshot(), core.conversation.messages()))
            await self.journal.checkpoint(durable=True)
        finally:
            if was_running and core.state is S.SUSPENDED and core.suspend_reason == "rewind":
                await self._suspension.resume("rewind")
        core.notifier.emit(ContextUpdated(process=core.name, key="*", source="rewind"))
        return RewindResult(plan, entry.entry_id, time.time(), core.context.state_snapshot(),
                            tuple(core.conversation.messages()))

    async def fork(self, entry_id: str | int, new_name: str, *,
                   with_triggers: bool = False) -> Any:
        """The new process (not started); its journal records where it came from. It has none
        of this process's triggers unless ``with_triggers`` (a copy would serve the same webhook
        path or fire the same schedule twice); then a trigger that cannot be served (its address
        or path taken) raises ForkConflict before anything is added or journaled."""
        core = self.core
        engine, journal = self._engine("fork")
        if core.host is None:
            raise RuntimeError("fork needs the process to belong to an AgentRuntime")
        await journal.flush()
        target = await engine.entry(core.name, entry_id)
        if await engine.head(new_name):
            raise ValueError(f"the journal already has a process named {new_name!r}; "
                             "choose another name")
        context = await engine.context_before(core.name, target.seq,
                                              core.config.context.initial_state)
        conversation = await engine.conversation_before(
            core.name, target.seq, core.config.context.conversation_max_messages)
        config = core.config.model_copy(deep=True)
        if with_triggers:
            await check_fork_triggers(config.triggers, new_name)
        else:
            config = config.model_copy(update={"triggers": []})
        child = core.host.add_process(new_name, config, tools=self._fork_tools,
                                      base_dir=core.base_dir, model=self._fork_model)
        try:
            child_journal = child.journal
            if child_journal is None:
                raise RuntimeError(f"the fork {new_name!r} has no journal")
            await child_journal.append(JournalEntry(new_name, EntryType.FORKED, {
                "from_process": core.name, "from_process_id": core.process_id,
                "from_entry_id": target.entry_id, "context_state": context,
                "conversation": conversation, "with_triggers": with_triggers},
                process_id=child.process_id))
            await child_journal.checkpoint(new_name, {"context_state": context,
                                                      "lifecycle_state": "stopped"},
                                           process_id=child.process_id)
        except BaseException:
            await core.host.remove_process(new_name)  # no half-made fork in the runtime
            raise
        return child


    async def adopt_forks(self) -> list[Any]:
        """The forks of this process that its journal holds and the runtime lacks (a host's
        restart forgot them): added again as fork() made them, with the same name and id,
        not started; their journals hold their state. Returns them."""
        core, journal = self.core, self.core.journal
        if core.host is None or journal is None or core.recorder is None:
            return []
        known, adopted = set(core.host.processes), []
        for name in await journal.processes():
            if name in known:
                continue
            first = await journal.read(ReadFilter(process=name, limit=1))
            if not first or first[0].entry_type != EntryType.FORKED \
                    or first[0].data.get("from_process") != core.name:
                continue
            config = core.config.model_copy(deep=True)
            if not first[0].data.get("with_triggers"):  # as fork() made it
                config = config.model_copy(update={"triggers": []})
            adopted.append(core.host.add_process(
                name, config, tools=self._fork_tools, base_dir=core.base_dir,
                model=self._fork_model, process_id=first[0].process_id or None))
            log.info("process %s: its fork %s is back from the journal", core.name, name)
        return adopted


class ForkConflict(ValueError):
    """A trigger the fork was to take cannot be served: its webhook address or path is taken."""


async def check_fork_triggers(configs: Iterable[TriggerConfig], new_name: str) -> None:
    """Claim each webhook trigger's address and path as the fork's start would, then let go: a
    clash found here leaves nothing behind, found at the start it would leave a half-made fork.
    Port 0 is left out: it is an ephemeral server of its own, which cannot clash."""
    # The web server (starlette, uvicorn) loads only for a fork that has a webhook trigger.
    from runtime_core.triggers.webhook.trigger import WebhookTrigger

    for config in configs:
        if config.type != "webhook" or config.webhook_port == 0:
            continue
        trigger_id = trigger_id_for(config)
        probe = WebhookTrigger(trigger_id, config)
        try:
            await probe.start(_not_started)
        except (ValueError, OSError) as exc:
            raise ForkConflict(
                f"the fork {new_name!r} cannot take trigger {trigger_id} (webhook "
                f"{config.webhook_host}:{config.webhook_port}{config.webhook_path}): {exc}. "
                "Fork without the triggers (the default), or give the fork its own address "
                "with a trigger added after it starts") from None
        await probe.stop()


async def _not_started(event: TriggerEvent) -> tuple[AcceptResult, str]:
    return AcceptResult.UNAVAILABLE, "the fork is not started yet"  # the sender gets 503

"""How events come into a process: refused (dead-lettered, or the sender told no) while it
cannot take them, otherwise made durable and only then acknowledged and queued.

Three roads in: ``inject()`` (by hand, the API), pull triggers (cron, interval, event, message,
file watch: they wait for room in the queue) and push triggers (webhooks: they must answer
their sender, so only ACCEPTED makes the event ours)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from runtime_core import crashpoints
from runtime_core.delivery.dead_letters import DeadLetterReason
from runtime_core.events import RunQueued
from runtime_core.governance.hooks import HookEvent
from runtime_core.incidents.keeper import Admission
from runtime_core.journal.provider import JournalError
from runtime_core.process.core import ProcessCore
from runtime_core.triggers.base import AcceptResult, TriggerEvent

log = logging.getLogger(__name__)


class Intake:
    def __init__(self, core: ProcessCore, resume: Callable[[str], Awaitable[None]]) -> None:
        self.core = core
        self._resume = resume  # the facade's resume(), for an idle-suspended process

    async def _wake(self, why: str) -> None:
        if self.core.idle_suspended:
            await self._resume(why)

    async def inject(self, event: TriggerEvent) -> bool:
        """Queue ``event`` as if a trigger had fired. Returns False if it was dead-lettered."""
        if not isinstance(event, TriggerEvent):
            raise TypeError(f"inject() takes a TriggerEvent, not {type(event).__name__}")
        core = self.core
        refusal = core.refusal()
        if refusal is not None:
            core.delivery.dead_letter(event, refusal, "", 0)
            return False
        if not await self.journal_accepted(event):  # durable before it is acknowledged
            return True  # an occurrence of an open incident: recorded, no run
        if core.recorder is not None:
            crashpoints.reached("event_acknowledged")
        await self._wake("event arrived")
        if not core.delivery.offer(event):
            return False
        await self.announce_queued(event)
        return True

    async def accept_pulled(self, event: TriggerEvent) -> None:
        core = self.core
        refusal = core.refusal()
        if refusal is not None:
            core.delivery.dead_letter(event, refusal, "", 0)
            return
        if not await self.journal_accepted(event):
            return  # an occurrence of an open incident: recorded, no run
        await self._wake("event arrived")
        await core.delivery.put(event)
        await self.announce_queued(event)

    async def accept_pushed(self, event: TriggerEvent) -> tuple[AcceptResult, str]:
        """A push trigger (webhook) hands over an event and must answer its sender: only
        ACCEPTED makes the event ours, and only once it is durable."""
        core = self.core
        refusal = core.refusal()
        if refusal is not None:
            return AcceptResult.UNAVAILABLE, refusal
        if core.delivery.is_full:
            return AcceptResult.QUEUE_FULL, DeadLetterReason.QUEUE_FULL
        try:
            if not await self.journal_accepted(event):
                return AcceptResult.ACCEPTED, "recorded as an incident occurrence"
        except JournalError as exc:
            log.critical("process %s: cannot journal an event: %s", core.name, exc)
            return AcceptResult.UNAVAILABLE, "journal unavailable"
        await self._wake("event arrived")
        if core.delivery.offer(event):  # if the queue filled meanwhile it is dead-lettered
            await self.announce_queued(event)
        return AcceptResult.ACCEPTED, "accepted"

    async def queue_accepted(self, event: TriggerEvent, why: str) -> None:
        """Queue an event that is already durable (a reopened incident's, a redelivery):
        a full queue dead-letters it, ready to redeliver."""
        await self._wake(why)
        if self.core.delivery.offer(event):
            await self.announce_queued(event)

    async def journal_accepted(self, event: TriggerEvent) -> bool:
        """Make an arriving event durable before it is acknowledged. False: a part took it
        (it only updated an open incident, journaled as such) and it starts no run."""
        for part in self.core.parts:
            admission = await part.admit(event)
            if admission is not Admission.PASS:  # journaled by that part
                return admission is Admission.QUEUE
        if self.core.recorder is not None:
            await self.core.recorder.event_accepted(event)
        return True

    async def announce_queued(self, event: TriggerEvent) -> None:
        core = self.core
        kind = HookEvent.FILE_CHANGED if event.trigger_type == "file_watch" \
            else HookEvent.TASK_CREATED
        if core.hooks.any(kind):
            await core.hooks.dispatch(kind, {"event": event.to_dict()})
        if core.notifier.has_listeners:
            core.notifier.emit(RunQueued(process=core.name, event_id=event.event_id,
                                         trigger_type=event.trigger_type))

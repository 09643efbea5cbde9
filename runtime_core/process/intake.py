"""How events come into a process: refused (dead-lettered, or the sender told no) while it
cannot take them, otherwise made durable and only then acknowledged (its run may start while
that commits: ``Intake._take_reserved``).

Three roads in: ``inject()`` (code calling AgentProcess.inject: the spec's, which dead-letters
what it refuses), pull triggers (cron, interval, event, message, file watch: they wait for room
in the queue) and push triggers (webhooks: they must answer their sender, so only ACCEPTED
makes the event ours; a redelivery of one already accepted, found by its delivery key in the
journal's delivery index, is DUPLICATE and starts nothing). The hosts' inject (the API, the CLI,
the room: control/inject.py) takes the push road: its client is told no and keeps the event."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from runtime_core import crashpoints
from runtime_core.delivery.dead_letters import DeadLetterReason
from runtime_core.events import RunQueued
from runtime_core.governance.hooks import HookEvent
from runtime_core.incidents.keeper import Admission
from runtime_core.journal.provider import JournalError
from runtime_core.process.core import ProcessCore
from runtime_core.process.ports import DeliveryGate, Waker
from runtime_core.triggers.base import DELIVERY_KEY, AcceptResult, TriggerEvent

log = logging.getLogger(__name__)


class Intake:
    """The road in (it implements the ports EventIntake, for the triggers, and EventInjector,
    for the inbox); an event arriving at an idle-suspended process wakes it through ``waker``."""

    def __init__(self, core: ProcessCore, waker: Waker) -> None:
        self.core = core
        self._waker = waker

    def availability(self) -> tuple[str, str | None]:
        """The process's state and why it refuses events now (None: it takes them)."""
        refusal = self.core.refusal()
        reason = (self.core.refusal_detail() or refusal) if refusal is not None else None
        return self.core.state.value, reason

    async def inject(self, event: TriggerEvent) -> bool:
        """Queue ``event`` as if a trigger had fired. Returns False if it was dead-lettered:
        refused while the process cannot take it, or "queue full" when there is no room (then
        nothing was journaled as accepted); the dead letter is listed once it is durable."""
        if not isinstance(event, TriggerEvent):
            raise TypeError(f"inject() takes a TriggerEvent, not {type(event).__name__}")
        core = self.core
        refusal = core.refusal()
        if refusal is not None:
            core.delivery.dead_letter(event, refusal, core.refusal_detail(), 0)
            return False
        if not core.delivery.try_reserve():
            core.delivery.dead_letter(event, DeadLetterReason.QUEUE_FULL, "", 0)
            return False
        # False from it: an occurrence of an open incident, recorded, starts no run
        await self._take_reserved(event, acknowledged=core.recorder is not None)
        return True

    async def accept_pulled(self, event: TriggerEvent, handed_over: Callable[[], None]) -> None:
        """A pulling trigger's event: it waits for room, so nothing it produced is dropped.
        While a host's stop drains (keep_queue) it is kept like the queue, not dead-lettered:
        journaled and queued behind the closed gate, it runs at the next start.

        A cancellation while it waits for room leaves the event with the caller; from
        ``handed_over`` on, the event is ours: a stop's cancellation waits for its journal
        write and its place in the queue (neither lost nor dead-lettered half-accepted)."""
        core = self.core
        refusal = core.refusal()
        kept = refusal == DeadLetterReason.PROCESS_STOPPED and core.keeping_queue
        if refusal is not None and not kept:
            handed_over()
            core.delivery.dead_letter(event, refusal, core.refusal_detail(), 0)
            return
        if kept:  # room or not, as the stop's other leftovers: it runs at the next start
            reserved = core.delivery.try_reserve()
        else:
            await core.delivery.reserve()
            reserved = True
        handed_over()
        taking = asyncio.ensure_future(self._take_reserved(event) if reserved
                                       else self._keep_unreserved(event))
        try:
            await asyncio.shield(taking)
        except asyncio.CancelledError:
            try:
                await taking  # the stop waits for this one write; then it goes on
            except Exception as exc:  # the cancellation wins; the failure is not silent
                log.error("process %s: event %s could not be journaled while stopping: %s",
                          core.name, event.event_id, exc)
            raise

    async def _take_reserved(self, event: TriggerEvent, *, acknowledged: bool = False) -> bool:
        """Make ``event`` (holding a reserved slot) durable and queue it; False: a part took
        it (it only updated an open incident, journaled as such) and it starts no run, or it
        could not be journaled (raised): its slot is given back. The waker and the hooks hear
        of it once it is durable (``acknowledged``: the crash point there), the listeners
        (``RunQueued``) once it is queued, before its run's events.

        Where nothing must hear of the event before its run does (no ``task_created`` or
        ``file_changed`` hook), it is queued as soon as its acceptance is submitted, so its
        run starts while that commits: entries commit in submission order, and a run writes
        nothing that waits (its tool intent, its end) before the commit it waits for has made
        the acceptance durable too, so nothing outside sees the run first. A quick run's first
        entry that waits shares the acceptance's commit. If the acceptance fails, the event is
        taken back off the queue (a run that took it already fails at its first commit)."""
        delivery = self.core.delivery
        early = False

        def queue_now() -> None:
            nonlocal early
            delivery.commit(event)
            early = True
            self._say_queued(event)  # before its run can start: listeners see them in order

        hooked = self.core.hooks.any(_announced_by(event))
        try:
            taken = await self.journal_accepted(event, None if hooked else queue_now)
        except BaseException:
            if not early:
                delivery.release()
            elif not delivery.withdraw(event):
                log.error("process %s: event %s was not journaled, and its run has started; "
                          "it fails at its first commit", self.core.name, event.event_id)
            raise
        if not taken:
            delivery.release()
            return False
        if acknowledged:
            crashpoints.reached("event_acknowledged")
        if not early:
            delivery.commit(event)
        await self._waker.wake("event arrived")
        if not early:
            await self.announce_queued(event)
        return True

    async def _keep_unreserved(self, event: TriggerEvent) -> None:
        """An event arriving while a host's stop drains a full queue: journaled, then queued
        past the queue's size behind the closed gate, so the stop keeps it."""
        if not await self.journal_accepted(event):
            return
        self.core.delivery.put_back(event, first=False)
        await self.announce_queued(event)

    async def accept_pushed(self, event: TriggerEvent) -> tuple[AcceptResult, str]:
        """A push trigger (webhook) hands over an event and must answer its sender: only
        ACCEPTED makes the event ours, and only once its queue slot is held and it is durable.
        With no room the sender is told QUEUE_FULL (503) before anything is promised.

        Under a runtime with a ``delivery_gate`` (a scale-out node's: ports.DeliveryGate) an
        event with a delivery key is taken while the gate holds that key, so another node cannot
        take the same delivery at the same time (it would answer its sender 202 for an event
        that then never runs)."""
        key = event.metadata.get(DELIVERY_KEY)
        gate: DeliveryGate | None = getattr(self.core.host, "delivery_gate", None)
        if gate is None or not isinstance(key, str) or self.core.refusal() is not None:
            return await self._take_pushed(event)
        entered = False
        try:
            async with gate.hold(self.core.name, key, event.event_id) as first:
                entered = True
                if first is not None:
                    return AcceptResult.DUPLICATE, first
                return await self._take_pushed(event)
        except Exception as exc:
            if entered:
                raise
            # not taken: the sender keeps the event and retries
            log.warning("process %s: delivery %s cannot be checked across nodes now: %s",
                        self.core.name, key, exc)
            return AcceptResult.UNAVAILABLE, ("the cluster cannot check this delivery now; "
                                              "try again after Retry-After")

    async def _take_pushed(self, event: TriggerEvent) -> tuple[AcceptResult, str]:
        core = self.core
        refusal = core.refusal()
        if refusal is not None:
            return AcceptResult.UNAVAILABLE, core.refusal_detail() or refusal
        try:
            first = await self._accepted_before(event)
        except JournalError as exc:
            log.critical("process %s: cannot read the delivery index: %s", core.name, exc)
            return AcceptResult.UNAVAILABLE, "journal unavailable"
        if first is not None:
            return AcceptResult.DUPLICATE, first
        if not core.delivery.try_reserve():
            return AcceptResult.QUEUE_FULL, DeadLetterReason.QUEUE_FULL
        try:
            if not await self._take_reserved(event):
                return AcceptResult.ACCEPTED, "recorded as an incident occurrence"
        except JournalError as exc:
            log.critical("process %s: cannot journal an event: %s", core.name, exc)
            return AcceptResult.UNAVAILABLE, "journal unavailable"
        return AcceptResult.ACCEPTED, "accepted"

    async def _accepted_before(self, event: TriggerEvent) -> str | None:
        """The id of the event this one's delivery was accepted as before (the journal keeps
        delivery keys for a week), or None. No journal: the trigger's own memory is all."""
        key = event.metadata.get(DELIVERY_KEY)
        recorder = self.core.recorder
        if not isinstance(key, str) or recorder is None:
            return None
        return await recorder.journal.delivery_event(recorder.process, key)

    async def queue_accepted(self, event: TriggerEvent, why: str) -> None:
        """Queue an event that is already durable (a reopened incident's, a redelivery):
        a full queue dead-letters it, ready to redeliver."""
        await self._waker.wake(why)
        if self.core.delivery.offer(event):
            await self.announce_queued(event)

    async def journal_accepted(self, event: TriggerEvent,
                               submitted: Callable[[], None] | None = None) -> bool:
        """Make an arriving event durable before it is acknowledged. False: a part took it
        (it only updated an open incident, journaled as such) and it starts no run.
        ``submitted``: called once its acceptance is submitted, before it is durable (not
        when a part took it)."""
        for part in self.core.parts:
            admission = await part.admit(event)
            if admission is not Admission.PASS:  # journaled by that part
                return admission is Admission.QUEUE
        recorder = self.core.recorder
        durable = recorder.accepting(event) if recorder is not None else None
        if submitted is not None:
            submitted()
        if durable is not None:
            await durable
        return True

    async def announce_queued(self, event: TriggerEvent) -> None:
        core = self.core
        kind = _announced_by(event)
        if core.hooks.any(kind):
            await core.hooks.dispatch(kind, {"event": event.to_dict()})
        self._say_queued(event)

    def _say_queued(self, event: TriggerEvent) -> None:
        core = self.core
        if core.notifier.has_listeners:
            core.notifier.emit(RunQueued(process=core.name, event_id=event.event_id,
                                         trigger_type=event.trigger_type))


def _announced_by(event: TriggerEvent) -> HookEvent:
    """The hook an accepted event is announced to."""
    return HookEvent.FILE_CHANGED if event.trigger_type == "file_watch" else \
        HookEvent.TASK_CREATED

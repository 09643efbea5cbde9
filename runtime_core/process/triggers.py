"""The triggers of one process: creating and starting them, their listeners and filters, live
add/remove, and what they still hold when they stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from runtime_core.bus import EventBus, MessageBroker
from runtime_core.clock import Clock
from runtime_core.delivery.dead_letters import DeadLetterReason
from runtime_core.lifecycle import config_field
from runtime_core.process.core import TriggerStatus
from runtime_core.process.ports import DeadLetters, EventIntake
from runtime_core.triggers.base import AcceptFn, AcceptResult, TriggerEvent
from runtime_core.triggers.config import TriggerConfig
from runtime_core.triggers.filters.expression import EventFilter, compile_filter
from runtime_core.triggers.registry import create_trigger, trigger_id_for
from runtime_core.triggers.webhook.expected import expect as expect_webhook
from runtime_core.triggers.webhook.expected import withdraw as withdraw_webhook

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ActiveTrigger:
    trigger: Any  # a BaseTrigger (pull) or a PushTrigger
    filter: EventFilter | None
    listener: asyncio.Task[None] | None = None
    removal_reason: str | None = None
    # the event its listener holds while it waits for room in the queue (not ours yet)
    in_hand: TriggerEvent | None = None
    # events a stop that keeps the queue took out of the listener's hands: kept, not lost
    held: list[TriggerEvent] = field(default_factory=list)


class TriggerSet:
    """The triggers of one process; their events go to ``intake``, and what they held when
    stopped for good to ``dead_letters``."""

    def __init__(
        self,
        process: str,
        configs: Iterable[TriggerConfig],
        *,
        clock: Clock,
        event_bus: EventBus,
        broker: MessageBroker,
        intake: EventIntake,
        dead_letters: DeadLetters,
    ) -> None:
        self.process = process
        self.clock = clock
        self.bus = event_bus
        self.broker = broker
        self._accept_pulled = intake.accept_pulled
        self._accept_pushed = intake.accept_pushed
        self._availability = intake.availability
        self._dead_letters = dead_letters
        self.configs: dict[str, TriggerConfig] = {}
        for config in configs:
            self.configs[trigger_id_for(config)] = config
            expect_webhook(self, config)  # 503, not 404, on a shared port until it serves
        self.active: dict[str, ActiveTrigger] = {}
        self.dynamic: set[str] = set()  # added by the agent (open mode): dropped at stop
        self.filtered_count = 0
        self.cancel_reason = DeadLetterReason.PROCESS_STOPPED
        # A stop that keeps the queue: an event a listener held is kept (a leftover), never
        # dead-lettered cancel_reason.
        self.keep_in_hand = False

    # -- starting and stopping -----------------------------------------------------------------
    async def start_all(self) -> None:
        """Start every configured trigger; if one fails, stop those already started and raise."""
        try:
            for index, (trigger_id, config) in enumerate(self.configs.items()):
                with config_field(f"triggers[{index}]"):  # the config's own order
                    await self._start(trigger_id, config)
        except BaseException:
            await self.stop_all(keep_leftovers=True)
            raise

    async def _start(self, trigger_id: str, config: TriggerConfig) -> None:
        event_filter = compile_filter(config.filter_expression) if config.filter_expression \
            else None
        trigger = create_trigger(config, clock=self.clock, event_bus=self.bus,
                                 broker=self.broker)
        if trigger is None:  # "manual": events only come through inject()
            self.active[trigger_id] = ActiveTrigger(None, event_filter)
            return
        active = ActiveTrigger(trigger, event_filter)
        if hasattr(trigger, "wait_for_next"):
            await trigger.start()
            active.listener = asyncio.create_task(
                self._listen(trigger_id, active), name=f"{self.process}-trigger-{trigger_id}")
        else:
            check = getattr(trigger, "set_availability_check", None)
            if callable(check):  # e.g. a webhook's GET /health: 503 while the process refuses
                check(self._availability)
            await trigger.start(self._push_filter(active))
        self.active[trigger_id] = active

    async def stop_all(self, *, keep_leftovers: bool) -> list[TriggerEvent]:
        """Stop every trigger. Returns the events they still held (for the caller to re-queue
        on a restart); their listeners' in-hand events are dead-lettered with cancel_reason."""
        leftovers: list[TriggerEvent] = []
        for trigger_id in list(self.active):
            leftovers.extend(await self._stop(trigger_id))
        if not keep_leftovers:
            for event in leftovers:
                self._dead_letter(event, self.cancel_reason)
            return []
        return leftovers

    async def _stop(self, trigger_id: str) -> list[TriggerEvent]:
        active = self.active.pop(trigger_id)
        if active.listener is not None and active.listener is not asyncio.current_task():
            active.listener.cancel()
            await asyncio.gather(active.listener, return_exceptions=True)
        leftovers: list[TriggerEvent] = list(active.held)
        active.held.clear()
        if active.trigger is not None:
            try:
                await active.trigger.stop()
            except Exception:
                log.exception("process %s: trigger %s failed to stop", self.process, trigger_id)
            pending = getattr(active.trigger, "pending", None)
            if callable(pending):
                leftovers.extend(pending())
        return leftovers

    # -- live changes ------------------------------------------------------------------------------
    async def add(self, config: TriggerConfig | dict[str, Any], *, running: bool,
                  dynamic: bool = False) -> str:
        parsed = config if isinstance(config, TriggerConfig) else TriggerConfig.model_validate(
            config)
        trigger_id = trigger_id_for(parsed)
        if trigger_id in self.configs:
            raise ValueError(f"process {self.process!r} already has trigger {trigger_id}")
        if running:
            await self._start(trigger_id, parsed)
        self.configs[trigger_id] = parsed
        expect_webhook(self, parsed)
        if dynamic:
            self.dynamic.add(trigger_id)
        return trigger_id

    def forget_dynamic(self) -> None:
        """Drop the agent-added triggers (already stopped): they are not restarted."""
        for trigger_id in self.dynamic:
            config = self.configs.pop(trigger_id, None)
            if config is not None:
                withdraw_webhook(self, config)
        self.dynamic.clear()

    @property
    def config_count(self) -> int:
        """The config triggers running now (the spec's ``trigger_count``): those not added by
        the agent, started and not yet stopped (0 before start() and once stopped)."""
        return sum(1 for trigger_id in self.active if trigger_id not in self.dynamic)

    async def remove(self, trigger_id: str) -> None:
        if trigger_id not in self.configs:
            known = ", ".join(self.configs) or "none"
            raise KeyError(f"process {self.process!r} has no trigger {trigger_id!r} "
                           f"(triggers: {known})")
        withdraw_webhook(self, self.configs.pop(trigger_id))  # its path is 404 from now on
        self.dynamic.discard(trigger_id)
        if trigger_id in self.active:
            self.active[trigger_id].removal_reason = DeadLetterReason.TRIGGER_REMOVED
            for event in await self._stop(trigger_id):
                self._dead_letter(event, DeadLetterReason.TRIGGER_REMOVED)

    # -- events ------------------------------------------------------------------------------------
    def _dead_letter(self, event: TriggerEvent, reason: str) -> None:
        self._dead_letters.dead_letter(event, reason, "", 0)  # it never ran: no error, 0 tries

    def _passes(self, active: ActiveTrigger, event: TriggerEvent) -> bool:
        if active.filter is None or active.filter.matches(event):
            return True
        self.filtered_count += 1
        return False

    def _push_filter(self, active: ActiveTrigger) -> AcceptFn:
        async def accept(event: TriggerEvent) -> tuple[AcceptResult, str]:
            if not self._passes(active, event):
                return AcceptResult.FILTERED, "filtered"
            return await self._accept_pushed(event)

        return accept

    async def _listen(self, trigger_id: str, active: ActiveTrigger) -> None:
        trigger = active.trigger
        errors = 0
        while True:
            try:
                event = await trigger.wait_for_next()
            except asyncio.CancelledError:
                raise
            except Exception:
                errors += 1
                if errors == 1:
                    log.exception("process %s: trigger %s failed", self.process, trigger_id)
                await self.clock.sleep(min(60.0, 2.0 ** (errors - 1)))
                continue
            errors = 0
            if not self._passes(active, event):
                continue
            active.in_hand = event
            try:
                await self._accept_pulled(event, lambda: self._handed_over(active))
            except asyncio.CancelledError:
                # Cancelled while it waited for room: the event is still ours to place. (Once
                # handed over, the intake finishes journaling and queueing it first.)
                if active.in_hand is not None:
                    if self.keep_in_hand and active.removal_reason is None:
                        active.held.append(event)  # kept with the queue by the stop
                    else:
                        self._dead_letter(event, active.removal_reason or self.cancel_reason)
                raise
            finally:
                active.in_hand = None

    @staticmethod
    def _handed_over(active: ActiveTrigger) -> None:
        active.in_hand = None

    # -- views -------------------------------------------------------------------------------------
    def status(self) -> tuple[TriggerStatus, ...]:
        out: list[TriggerStatus] = []
        for trigger_id, config in self.configs.items():
            active = self.active.get(trigger_id)
            status = getattr(active.trigger, "status", None) if active else None
            out.append(TriggerStatus(
                trigger_id, config.type, "dynamic" if trigger_id in self.dynamic else "config",
                active is not None, dict(status()) if callable(status) else {}, config))
        return tuple(out)

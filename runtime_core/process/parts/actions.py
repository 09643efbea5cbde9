"""What the optional features may ask of their process, wired by the facade as callbacks."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from runtime_core.events import EscalationSent, EventNotifier
from runtime_core.governance.config import EscalationTarget
from runtime_core.governance.escalation import Escalator
from runtime_core.triggers.base import TriggerEvent


@dataclass(frozen=True, slots=True)
class PartActions:
    pause: Callable[[str], Awaitable[None]]  # suspend a running process with this reason
    stop_on_purpose: Callable[[], Awaitable[None]]  # a stop that is never restarted
    escalate: Callable[[EscalationTarget | None, dict[str, Any]], None]
    inject: Callable[[TriggerEvent], Awaitable[bool]]


class Escalations:
    """Escalations sent without holding up the run that caused them; each outcome is announced
    as an ``escalation.sent`` event, and ``wait`` lets close() see the sends in flight end."""

    def __init__(self, process: str, escalator: Escalator, notifier: EventNotifier) -> None:
        self.process = process
        self.escalator = escalator
        self.notifier = notifier
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, target: EscalationTarget | None, payload: dict[str, Any]) -> None:
        if target is None:
            return
        channels = "+".join(name for name, on in (("event", target.event_type),
                                                   ("webhook", target.webhook_url)) if on)

        emitted = self.escalator.emit(target, payload)  # before the pause that may follow

        async def send() -> None:
            outcome = await self.escalator.escalate(target, payload, emitted=emitted)
            self.notifier.emit(EscalationSent(
                process=self.process, reason=str(payload.get("type", "")), channels=channels,
                webhook_status=outcome.webhook_status, error=outcome.error))

        task = asyncio.create_task(send(), name=f"{self.process}-escalate")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self) -> None:
        if self._tasks:  # each send is bounded by its target's timeout
            await asyncio.gather(*self._tasks, return_exceptions=True)

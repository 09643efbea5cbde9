"""What the optional features may ask of their process: its ports, handed in by the facade,
and the escalations they send."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from runtime_core.events import EscalationSent, EventNotifier
from runtime_core.governance.config import EscalationTarget
from runtime_core.governance.escalation import Escalator
from runtime_core.process.ports import EscalationSender, EventInjector, SelfControl


@dataclass(frozen=True, slots=True)
class PartActions:
    """What a part may ask of its process, each through its port (process/ports.py)."""

    control: SelfControl  # pause it, or stop it on purpose (the supervisor)
    escalations: EscalationSender  # send an escalation (the process's Escalations)
    injector: EventInjector  # queue an event, as the inbox's questions do (intake)


class Escalations:
    """Escalations sent without holding up the run that caused them; each outcome is announced
    as an ``escalation.sent`` event, and ``wait`` lets close() see the sends in flight end."""

    def __init__(self, process: str, escalator: Escalator, notifier: EventNotifier) -> None:
        self.process = process
        self.escalator = escalator
        self.notifier = notifier
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, target: EscalationTarget | None, payload: dict[str, Any]) -> None:
        """Announce ``payload`` to ``target`` now and send it in the background."""
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
        """Return once every send in flight has ended."""
        if self._tasks:  # each send is bounded by its target's timeout
            await asyncio.gather(*self._tasks, return_exceptions=True)

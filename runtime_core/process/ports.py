"""The small typed interfaces the parts of a process speak to each other through.

A part that asks something of a part it may not import (a sibling in its layer, or a part
above it) holds one of these instead, and the facade (process.py) hands it the object that
implements it. Each says what one side needs, and no more:

=====================  =============================  ===================================
protocol               needed by                      implemented by
=====================  =============================  ===================================
``Waker``              intake                         the supervisor
``RunOutcomes``        dispatch                       the supervisor (the restart policy)
``SelfControl``        health, budget, mission        the supervisor
``Suspension``         rewinding                      the supervisor
``EscalationSender``   health, budget, mission        ``Escalations`` (parts/actions.py)
``EventInjector``      the inbox                      intake
``EventIntake``        triggers                       intake
``DeadLetters``        triggers                       the delivery queue (core.delivery)
``EventRunner``        the supervisor's workers       dispatch
``ExtraTools``         assembly                       open mode's host
``DeliveryGate``       intake (via the runtime)       a scale-out node (cluster/, optional)
=====================  =============================  ==================================="""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runtime_core.agent.tools import AgentTool
    from runtime_core.governance.config import EscalationTarget
    from runtime_core.triggers.base import AcceptResult, TriggerEvent


class Waker(Protocol):
    """Wakes a process that suspended itself for being idle, when work arrives."""

    async def wake(self, why: str) -> None:
        """Resume the process if it is suspended for idleness; otherwise do nothing."""
        ...


class RunOutcomes(Protocol):
    """Where dispatch reports how each event ended, for the restart policy: the keeper of the
    consecutive failures and the restart count (the supervisor)."""

    def run_succeeded(self) -> None:
        """A run succeeded: the failure streak and the restart count start over."""
        ...

    def run_given_up(self, error: str) -> None:
        """An event was dead-lettered after its last retry: one more failure in a row; at the
        configured maximum the process fails (and may be restarted)."""
        ...


class SelfControl(Protocol):
    """What an optional part may decide for its own process (health, budget, mission)."""

    async def pause(self, reason: str) -> None:
        """Suspend the process with ``reason``, if it is running."""
        ...

    async def stop_on_purpose(self) -> None:
        """Stop the process, never to be restarted."""
        ...


class Suspension(Protocol):
    """Suspend and resume, for work that must not race the runs (a rewind)."""

    async def suspend(self, reason: str) -> None:
        """Suspend a running process."""
        ...

    async def resume(self, reason: str) -> None:
        """Resume a suspended process."""
        ...


class EscalationSender(Protocol):
    """Sends an escalation (an event, a webhook) without holding up the run that caused it."""

    def send(self, target: EscalationTarget | None, payload: dict[str, Any]) -> None:
        """Escalate ``payload`` to ``target``; nothing when there is no target."""
        ...


class EventInjector(Protocol):
    """Queues an event as if a trigger had fired."""

    async def inject(self, event: TriggerEvent) -> bool:
        """Queue ``event``; False if it was dead-lettered instead."""
        ...


class EventIntake(Protocol):
    """The road in the triggers hand their events to."""

    async def accept_pulled(self, event: TriggerEvent, handed_over: Callable[[], None]) -> None:
        """A pulling trigger's event: waits for room in the queue (cancellable: the event is
        still the caller's), then calls ``handed_over`` and makes it durable and queued, or
        dead-letters it, finishing that even if cancelled meanwhile."""
        ...

    async def accept_pushed(self, event: TriggerEvent) -> tuple[AcceptResult, str]:
        """A push trigger's event: the answer for its sender."""
        ...

    def availability(self) -> tuple[str, str | None]:
        """The process's state and why it refuses events now (None: it takes them)."""
        ...


class DeliveryGate(Protocol):
    """One delivery key, one event, across the hosts that share a journal (a scale-out
    cluster's nodes): held while a pushed event with a delivery key is checked and journaled,
    so no other host takes the same delivery meanwhile."""

    def hold(self, process: str, key: str, event_id: str
             ) -> AbstractAsyncContextManager[str | None]:
        """Hold ``key`` of ``process`` for the event ``event_id``; it yields the id of the
        event the delivery is already held as elsewhere (then this one is a duplicate), or
        None. Raises (nothing held) when it cannot tell now."""
        ...


class DeadLetters(Protocol):
    """Keeps an event that will not run, for an operator to redeliver."""

    def dead_letter(self, event: TriggerEvent, reason: str, error: str, attempts: int) -> None:
        """Dead-letter ``event`` with ``reason`` (and ``error``) after ``attempts`` runs."""
        ...


class EventRunner(Protocol):
    """What a worker does with each event it takes off the queue."""

    async def handle_event(self, event: TriggerEvent, attempt: int) -> None:
        """Run ``event`` (its ``attempt``-th try) and settle it."""
        ...


class ExtraTools(Protocol):
    """Tools the process adds to the agent's own at each start."""

    def meta_tools(self) -> Sequence[AgentTool]:
        """The tools to add (open mode's meta-tools; none in strict mode)."""
        ...

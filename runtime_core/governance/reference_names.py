"""The reference runtime's governance names that code written for it imports: ``escalate``
(a thin function over our Escalator) and ``BudgetState`` (no standalone equivalent here: it
says what to use instead)."""

from __future__ import annotations

from typing import Any

from runtime_core.bus import EventBus
from runtime_core.governance.config import EscalationTarget
from runtime_core.governance.escalation import EscalationOutcome, Escalator


async def escalate(target: EscalationTarget, payload: dict[str, Any], *,
                   event_bus: EventBus | None = None,
                   source: str = "escalate") -> EscalationOutcome:
    """Send one escalation, as the reference's ``escalate(target, payload, event_bus=...)``
    did: emit ``target.event_type`` on ``event_bus`` (when both are given) and POST the payload
    to ``target.webhook_url`` (public addresses only unless the target allows private ones,
    no redirects). It never raises: the outcome says what was delivered and what failed (the
    reference returned None and only logged). ``source`` names the sender on the bus."""
    return await Escalator(event_bus, source=source).escalate(target, payload)


BUDGET_STATE_HINT = (
    "BudgetState (the reference runtime's standalone budget counters) has no equivalent here: "
    "a process keeps its own budget. Set the limits with ProcessConfig(budget=BudgetConfig("
    "...)); read what is left with process.status()['budget'] (remaining per limit), and the "
    "counters are journaled with each checkpoint. See docs/porting.md, 'Python names'.")


class BudgetState:
    """The reference's name, kept so that code importing it fails with a message: building
    one raises TypeError saying what to use (``BudgetConfig`` and ``process.status()``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(BUDGET_STATE_HINT)

"""TriggerEvent, the unit of work a trigger hands to a process, and the trigger protocol."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from runtime_core import ids

#: Event metadata key a push trigger sets when the sender names its deliveries (GitHub's
#: X-GitHub-Delivery, Standard Webhooks' webhook-id): unique per sender and delivery, and kept
#: in the journal's delivery index with the event, so a redelivery is recognised after a restart.
DELIVERY_KEY = "delivery_key"


def _new_event_id() -> str:
    return str(ids.uuid4())


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class TriggerEvent:
    """One event a trigger fired (or ``inject`` queued): which trigger and type, its
    ``payload``, a unique ``event_id``, when (UTC), and ``metadata``. A run is the agent's
    answer to one event."""

    trigger_id: str
    trigger_type: str = ""
    payload: Any = field(default_factory=dict)
    event_id: str = field(default_factory=_new_event_id)
    timestamp: datetime = field(default_factory=_utc_now)
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "trigger_id": self.trigger_id,
            "trigger_type": self.trigger_type,
            "payload": self.payload,
            "event_id": self.event_id,
            "timestamp": self.timestamp.isoformat(),
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TriggerEvent:
        timestamp = data.get("timestamp")
        return cls(
            trigger_id=str(data["trigger_id"]),
            trigger_type=str(data.get("trigger_type", "")),
            payload=data.get("payload", {}),
            event_id=str(data.get("event_id") or _new_event_id()),
            timestamp=datetime.fromisoformat(timestamp) if timestamp else _utc_now(),
            metadata=dict(data.get("metadata") or {}),
        )


@runtime_checkable
class BaseTrigger(Protocol):
    """A source of events. ``wait_for_next`` raises ``asyncio.CancelledError`` once stopped."""

    trigger_id: str
    trigger_type: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def wait_for_next(self) -> TriggerEvent: ...


class AcceptResult(str, enum.Enum):
    """What a process did with an event a push trigger (a webhook) handed it."""

    ACCEPTED = "accepted"  # durably accepted (journaled when there is a journal) and queued
    FILTERED = "filtered"  # skipped by the trigger's filter_expression (counted)
    QUEUE_FULL = "queue full"  # not accepted: try again later
    UNAVAILABLE = "unavailable"  # not accepted: the process is failed, stopping or stopped
    DUPLICATE = "duplicate"  # its delivery was accepted before (the reason is that event's id)


#: ``await accept(event)`` -> (result, reason text). Only ACCEPTED means the event is the
#: process's responsibility now; for the others the sender keeps it (e.g. HTTP 503).
AcceptFn = Callable[[TriggerEvent], Awaitable[tuple[AcceptResult, str]]]

#: ``availability()`` -> (the process's state, why it refuses events now or None): a push
#: trigger's health check (a webhook's ``GET /health`` answers 503 while it refuses).
AvailabilityFn = Callable[[], tuple[str, str | None]]


@runtime_checkable
class PushTrigger(Protocol):
    """A trigger that receives events from outside and must answer the sender (webhooks).

    The process calls ``start(accept)``; the trigger calls ``accept`` for every event and answers
    its sender from the result."""

    trigger_id: str
    trigger_type: str

    async def start(self, accept: AcceptFn) -> None: ...

    async def stop(self) -> None: ...

    def status(self) -> dict[str, Any]: ...

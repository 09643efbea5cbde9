"""TriggerEvent, the unit of work a trigger hands to a process, and the trigger protocol."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable


def _new_event_id() -> str:
    return str(uuid.uuid4())


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class TriggerEvent:
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

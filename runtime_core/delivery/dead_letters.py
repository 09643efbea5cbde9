"""Dead letters: events that did not run, with the reason why (exact strings, as the spec
lists them), kept for redelivery."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime_core.triggers.base import TriggerEvent


class DeadLetterReason:
    """The reasons an event ends up in the dead letters (exact strings)."""

    PROCESS_STOPPED = "process stopped"
    PROCESS_RESTARTING = "process restarting"
    PROCESS_FAILED = "process failed"
    RETRIES_EXHAUSTED = "retries exhausted"
    QUEUE_FULL = "queue full"
    TRIGGER_REMOVED = "trigger removed"
    BUDGET_EXCEEDED = "budget exceeded"
    BLOCKED_BY_HOOK = "blocked by hook"
    FLAGGED_BY_PAYLOAD_SCAN = "flagged by payload scan"
    JOURNAL_UNAVAILABLE = "journal unavailable"  # degraded: it cannot be written for now


@dataclass(frozen=True, slots=True)
class DeadLetter:
    event: TriggerEvent
    reason: str
    error: str
    attempts: int
    dead_lettered_at: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "reason": self.reason,
            "error": self.error,
            "attempts": self.attempts,
            "dead_lettered_at": self.dead_lettered_at,
        }

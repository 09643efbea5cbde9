"""Dead letters: events that did not run, with the reason why (exact strings, as the spec
lists them), kept for redelivery.

A dead letter of a journaling process is reported (listed, counted, announced) only once its
``dead_lettered`` entry has committed: :class:`AwaitingCommit` holds it meanwhile, without
making anyone wait. One whose entry never commits (the journal failed or closed first, or a
cluster node's fenced journal refused it) is never reported: the event stays what the journal
says it is, accepted and not finished, and the next start (or the next owner) queues it again."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime_core.triggers.base import TriggerEvent

log = logging.getLogger(__name__)


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


#: The event's metadata key that holds its history: every failed attempt and every time it
#: was dead-lettered, newest first. It travels with the event (the journal's dead letter and
#: pending rows keep the event whole), so it survives restarts and redeliveries.
HISTORY_KEY = "attempt_history"
HISTORY_LIMIT = 50  # the newest ones; a letter redelivered forever does not grow without end


def add_history(event: TriggerEvent, attempt: int, outcome: str, error: str, at: str) -> None:
    """Note on ``event`` what became of an attempt: ``outcome`` (a dead-letter reason, or
    "failed, retried"), the ``error`` (may be empty), ``at`` (ISO time), newest first."""
    kept = event.metadata.get(HISTORY_KEY)
    history = [h for h in kept if isinstance(h, dict)] if isinstance(kept, list) else []
    history.insert(0, {"attempt": attempt, "at": at, "outcome": outcome, "error": error[:1000]})
    event.metadata[HISTORY_KEY] = history[:HISTORY_LIMIT]


def history_of(event: TriggerEvent) -> list[dict[str, Any]]:
    """The event's history (see HISTORY_KEY), newest first; [] when it has none."""
    kept = event.metadata.get(HISTORY_KEY)
    return [h for h in kept if isinstance(h, dict)] if isinstance(kept, list) else []


def last_error(event: TriggerEvent) -> str:
    """The error of its latest attempt that had one, or ""."""
    return next((str(h.get("error")) for h in history_of(event) if h.get("error")), "")


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An event that did not run, and why; ``history`` lists its attempts, newest first."""

    event: TriggerEvent
    reason: str
    error: str
    attempts: int
    dead_lettered_at: str

    @property
    def history(self) -> list[dict[str, Any]]:
        """Every failed attempt and dead-lettering of its event, newest first."""
        return history_of(self.event)

    def as_dict(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "reason": self.reason,
            "error": self.error,
            "attempts": self.attempts,
            "dead_lettered_at": self.dead_lettered_at,
        }  # the spec's keys; the history rides in event.metadata[HISTORY_KEY]


class AwaitingCommit:
    """Dead letters whose journal entry is submitted and not yet committed. Each is handed to
    ``publish`` once its entry commits (at once when it has already), in the order the journal
    commits them; one whose entry fails is dropped, and so are those a clear took meanwhile
    (the clear's entry follows theirs, so the journal drops them too)."""

    def __init__(self, process: str, publish: Callable[[DeadLetter], None]) -> None:
        self.process = process
        self._publish = publish
        self._letters: dict[int, DeadLetter] = {}
        self._serial = itertools.count()

    def track(self, letter: DeadLetter, durable: asyncio.Future[None]) -> bool:
        """Publish ``letter`` once ``durable`` (its entry's commit) resolves; False when it has
        already (published, or dropped, now)."""
        key = next(self._serial)
        self._letters[key] = letter
        if durable.done():
            self._settled(key, durable)
            return False
        durable.add_done_callback(lambda future: self._settled(key, future))
        return True

    def drop_all(self) -> int:
        """Forget the letters still waiting (a clear): none of them will be published."""
        count = len(self._letters)
        self._letters.clear()
        return count

    def _settled(self, key: int, durable: asyncio.Future[None]) -> None:
        letter = self._letters.pop(key, None)
        if letter is None:
            return  # cleared while its entry was on its way
        error = None if durable.cancelled() else durable.exception()
        if durable.cancelled() or error is not None:
            log.error("process %s: the dead letter of event %s (%s) was not journaled (%s): "
                      "it is not reported, and the journal keeps the event as it was (an "
                      "accepted one is queued again by the next start or owner)",
                      self.process, letter.event.event_id, letter.reason,
                      error or "cancelled")
            return
        self._publish(letter)

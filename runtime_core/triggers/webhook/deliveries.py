"""Deliveries a webhook trigger has taken, by the sender's delivery id, and those being taken.

A sender that retries or redelivers (GitHub's "Redeliver", Standard Webhooks' retries) sends the
same delivery id again; the first event accepted for it answers every repeat, so a delivery
runs once. This ledger is the trigger's own memory, bounded in age and size, and it holds a
delivery while its first request is being accepted, so a repeat arriving at the same moment
waits for that answer instead of racing it.

Durability is the process's part: with a journal, the delivery id is written in the journal's
delivery index in the same transaction as the event (so it outlives a restart), and the accept
call answers DUPLICATE for one found there. Without a journal this in-memory ledger is the only
record, and a restart forgets it.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable

KEEP_SECONDS = 7 * 24 * 3600.0  # the journal's delivery index keeps them as long
MAX_ENTRIES = 50_000


class DeliveryLedger:
    def __init__(self, *, keep_seconds: float = KEEP_SECONDS, max_entries: int = MAX_ENTRIES,
                 clock: Callable[[], float] = time.time) -> None:
        self._keep = keep_seconds
        self._max = max_entries
        self._clock = clock
        self._taken: OrderedDict[str, tuple[str, float]] = OrderedDict()  # oldest first
        self._in_flight: dict[str, asyncio.Future[None]] = {}

    def __len__(self) -> int:
        return len(self._taken)

    def _prune(self, now: float) -> None:
        while self._taken:
            _key, (_event_id, at) = next(iter(self._taken.items()))
            if at >= now - self._keep and len(self._taken) <= self._max:
                return
            self._taken.popitem(last=False)

    def first(self, key: str) -> str | None:
        """The event id the delivery ``key`` was taken as, if this trigger remembers it."""
        self._prune(self._clock())
        found = self._taken.get(key)
        return found[0] if found is not None else None

    async def claim(self, key: str) -> str | None:
        """The event id of an earlier take of ``key``, or None: then the caller holds the
        delivery and must ``settle`` it. A claim held by another request is waited for."""
        while True:
            taken = self.first(key)
            if taken is not None:
                return taken
            holder = self._in_flight.get(key)
            if holder is None:
                self._in_flight[key] = asyncio.get_running_loop().create_future()
                return None
            await asyncio.shield(holder)

    def settle(self, key: str, event_id: str | None) -> None:
        """End a claim: ``event_id`` when the delivery was taken (accepted, or found a
        duplicate), None when it was not (a retry may take it)."""
        if event_id is not None:
            self._taken[key] = (event_id, self._clock())
            self._taken.move_to_end(key)
            self._prune(self._clock())
        holder = self._in_flight.pop(key, None)
        if holder is not None and not holder.done():
            holder.set_result(None)

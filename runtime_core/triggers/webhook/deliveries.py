"""What a webhook trigger (or a host's inject) has taken, by delivery key, and what is being taken.

A sender that retries or redelivers sends the same delivery again: the same delivery id
(GitHub's "Redeliver", Standard Webhooks' and Stripe's and Slack's retries), or, for a scheme
without one, the same signed request. The first event accepted for it answers every repeat, so
a delivery runs once. This ledger is the trigger's own memory, each key kept until a given time
(a week for a sender's delivery id; for a signature, until its timestamp is too old to pass) and
bounded in size, and it holds a delivery while its first request is being accepted, so a repeat
arriving at the same moment waits for that answer instead of racing it.

Durability is the process's part: with a journal, the delivery key is written in the journal's
delivery index in the same transaction as the event (so it outlives a restart), and the accept
call answers DUPLICATE for one found there. Without a journal this in-memory ledger is the only
record, and a restart forgets it.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable

KEEP_SECONDS = 7 * 24 * 3600.0  # the journal's delivery index keeps them as long
MAX_ENTRIES = 50_000


class DeliveryLedger:
    """Delivery keys taken (each with its event id, until an expiry) and those in flight."""

    def __init__(self, *, keep_seconds: float = KEEP_SECONDS, max_entries: int = MAX_ENTRIES,
                 clock: Callable[[], float] = time.time) -> None:
        self._keep = keep_seconds
        self._max = max_entries
        self._clock = clock
        self._taken: dict[str, tuple[str, float]] = {}  # key -> (event id, kept until)
        self._expiry: list[tuple[float, str]] = []  # a heap; stale pairs are skipped
        self._in_flight: dict[str, asyncio.Future[None]] = {}

    def __len__(self) -> int:
        return len(self._taken)

    def _prune(self, now: float) -> None:
        # Expired first; over the size bound, those nearest their end go (a signature near the
        # end of its window before a week-long delivery id).
        while self._expiry and (self._expiry[0][0] < now or len(self._taken) > self._max):
            until, key = heapq.heappop(self._expiry)
            found = self._taken.get(key)
            if found is not None and found[1] == until:
                del self._taken[key]
        if len(self._expiry) > 2 * max(self._max, len(self._taken)):  # re-settled keys linger
            self._expiry = [(until, key) for key, (_, until) in self._taken.items()]
            heapq.heapify(self._expiry)

    def first(self, key: str) -> str | None:
        """The event id the delivery ``key`` was taken as, if this ledger remembers it."""
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

    def settle(self, key: str, event_id: str | None, *, until: float | None = None) -> None:
        """End a claim: ``event_id`` when the delivery was taken (accepted, or found a
        duplicate), remembered until ``until`` (default: ``keep_seconds`` from now); None when
        it was not (a retry may take it)."""
        if event_id is not None:
            now = self._clock()
            expires = now + self._keep if until is None else until
            if expires >= now:
                self._taken[key] = (event_id, expires)
                heapq.heappush(self._expiry, (expires, key))
                self._prune(now)
        holder = self._in_flight.pop(key, None)
        if holder is not None and not holder.done():
            holder.set_result(None)

"""The runtime's events, numbered for the SSE stream so a client that reconnects with
``Last-Event-ID`` gets exactly what it missed. Ids are ``<boot>-<n>``: the boot part changes
with every server start, so a client coming back to a restarted server is not fooled by
numbers that started again from 1. The log keeps the latest ``capacity`` events."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from itertools import islice

from runtime_core.events import EventNotifier, RuntimeEvent

HEARTBEAT_SECONDS = 15.0


@dataclass(frozen=True, slots=True)
class Numbered:
    seq: int
    kind: str
    data: str  # the event's JSON


def sse_frame(event_id: str, kind: str, data: str) -> str:
    return f"id: {event_id}\nevent: {kind}\ndata: {data}\n\n"


class EventLog:
    def __init__(self, notifier: EventNotifier, *, capacity: int = 10_000) -> None:
        self.boot = uuid.uuid4().hex[:12]
        self._items: deque[Numbered] = deque(maxlen=capacity)
        self._seq = 0
        self._changed = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self.closed = False
        self._notifier = notifier
        notifier.add_callback(self._on_event)

    @property
    def last_id(self) -> str:
        return f"{self.boot}-{self._seq}"

    def _on_event(self, event: RuntimeEvent) -> None:
        self._seq += 1
        data = json.dumps(event.to_dict(), default=str, ensure_ascii=False)
        self._items.append(Numbered(self._seq, event.kind, data))
        self._changed.set()

    def close(self) -> None:
        """End every stream (the server is stopping). Safe from a signal handler."""
        self.closed = True
        self._notifier.remove_callback(self._on_event)
        self._loop.call_soon_threadsafe(self._changed.set)

    def _start_after(self, last_event_id: str) -> tuple[int, int]:
        """(seq to continue after, how many events the client missed for good)."""
        boot, _, number = last_event_id.strip().rpartition("-")
        oldest = self._items[0].seq if self._items else self._seq + 1
        if boot != self.boot or not number.isdigit():
            return (oldest - 1, 0) if last_event_id.strip() else (self._seq, 0)
        after = min(int(number), self._seq)
        return (oldest - 1, oldest - 1 - after) if after < oldest - 1 else (after, 0)

    async def stream(self, last_event_id: str = "",
                     heartbeat: float = HEARTBEAT_SECONDS) -> AsyncIterator[str]:
        """SSE frames: a ``hello`` (with any gap), what was missed, then what comes."""
        after, missed = self._start_after(last_event_id)
        hello = json.dumps({"boot": self.boot, "missed": missed})
        yield sse_frame(f"{self.boot}-{after}", "hello", hello)
        while not self.closed:
            oldest = self._items[0].seq if self._items else after + 1
            fresh = list(islice(self._items, max(0, after + 1 - oldest), None))  # seqs are dense
            for item in fresh:
                yield sse_frame(f"{self.boot}-{item.seq}", item.kind, item.data)
                after = item.seq
            if fresh:
                continue
            self._changed.clear()
            try:
                async with asyncio.timeout(heartbeat):
                    await self._changed.wait()
            except TimeoutError:
                yield ": keep-alive\n\n"

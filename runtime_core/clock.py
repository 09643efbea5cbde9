"""Time as a dependency, so backoff, idle and lifetime logic can be tested without waiting."""

from __future__ import annotations

import heapq
import itertools
import time
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio


class Clock(Protocol):
    """What the runtime reads time from, so backoff, idle, lifetime and budget days can be
    tested without waiting: ``monotonic()`` for durations, ``time()`` for wall-clock
    timestamps, ``sleep()`` to wait. SystemClock is the real one, FakeClock a test's."""

    def monotonic(self) -> float: ...

    def time(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock: ``time.monotonic``, ``time.time`` and ``asyncio.sleep`` (a negative
    wait is no wait). The default of every process."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        import asyncio  # loaded by the running loop; a config that names a clock does not need it

        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when a test calls :meth:`advance`.

    ``sleep`` parks the caller until the clock has been advanced past its deadline, so a test can
    step through a 60 s restart backoff instantly and deterministically.
    """

    def __init__(self, start: float = 1_000.0, wall_start: float = 1_767_225_600.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self._now + self._wall_offset

    @property
    def sleepers(self) -> int:
        """How many tasks are waiting on this clock right now."""
        return sum(1 for _, _, fut in self._sleepers if not fut.done())

    def next_deadline(self) -> float | None:
        live = [deadline for deadline, _, fut in self._sleepers if not fut.done()]
        return min(live) if live else None

    async def sleep(self, seconds: float) -> None:
        import asyncio

        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._counter), fut))
        await fut

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline has passed."""
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

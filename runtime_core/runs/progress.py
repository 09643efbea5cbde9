"""A tool call's progress, as ``ToolProgress`` events for the room's running step.

A server may send progress far faster than anyone reads it, so at most one event goes out per
``interval``; the latest value is never lost (it goes out when the interval ends). A Python tool
may report from its worker thread: the report is handed to the event loop first."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from runtime_core.events import ToolProgress

PROGRESS_INTERVAL = 0.1  # seconds between two progress events of one call
MESSAGE_LIMIT = 200

#: (progress, total, message) -> the event to emit.
MakeEvent = Callable[[float, float | None, str], ToolProgress]


class ProgressReporter:
    def __init__(self, make: MakeEvent, emit: Callable[[ToolProgress], None], *,
                 interval: float = PROGRESS_INTERVAL) -> None:
        self._make, self._emit, self._interval = make, emit, interval
        self._loop = asyncio.get_running_loop()
        self._last = float("-inf")
        self._pending: tuple[float, float | None, str] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def __call__(self, progress: float, total: float | None = None,
                 message: str | None = None) -> None:
        try:
            here = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            here = False
        value = (float(progress), None if total is None else float(total),
                 (message or "")[:MESSAGE_LIMIT])
        if here:
            self._take(value)
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._take, value)

    def _take(self, value: tuple[float, float | None, str]) -> None:
        if self._closed:
            return
        self._pending = value
        wait = self._last + self._interval - time.monotonic()
        if wait <= 0:
            self._flush()
        elif self._timer is None:
            self._timer = self._loop.call_later(wait, self._flush)

    def _flush(self) -> None:
        self._timer = None
        value, self._pending = self._pending, None
        if value is None or self._closed:
            return
        self._last = time.monotonic()
        self._emit(self._make(*value))

    def close(self) -> None:
        """The call ended: its step record replaces the bar, nothing more is sent."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

"""CallbackSink: the reference runtime's way to hand runtime events to a Python callable, for
``EventNotifier(sinks=[...])`` (events.py). It knows events only by their ``kind`` and
``severity``, so it sits below the events module."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

log = logging.getLogger(__name__)


class SinkEvent(Protocol):
    """What a sink reads of an event (a RuntimeEvent has both)."""

    @property
    def kind(self) -> str: ...

    @property
    def severity(self) -> str: ...


#: Severities in order, the reference's ``error`` included, for ``min_severity``.
SEVERITY_ORDER = {"debug": 0, "info": 1, "warning": 2, "error": 3, "critical": 4}


class CallbackSink:
    """The reference runtime's sink for a Python callable: ``CallbackSink(fn, events=[...],
    min_severity=None)`` given to ``EventNotifier(sinks=[...])`` (or ``add_sink``) calls
    ``fn(event)`` for each event of those types (all when ``events`` is None) at or above
    that severity. The event is a RuntimeEvent, which also answers to the reference's
    ``event_type``, ``data`` and ``agent_id``. ``fn`` may be async: its coroutine runs as a
    task on the running loop. A callback that raises is logged, never passed on."""

    def __init__(self, callback: Callable[[Any], Any], *,
                 events: Iterable[str] | None = None, min_severity: str | None = None) -> None:
        if min_severity is not None and min_severity not in SEVERITY_ORDER:
            raise ValueError(f"min_severity must be one of {', '.join(SEVERITY_ORDER)}, "
                             f"not {min_severity!r}")
        self.callback = callback
        self.events = frozenset(events) if events else None
        self.min_severity = min_severity
        self._tasks: set[asyncio.Task[Any]] = set()

    def wants(self, event: SinkEvent) -> bool:
        """Whether ``event`` passes the sink's type and severity filters."""
        if self.events is not None and event.kind not in self.events:
            return False
        floor = SEVERITY_ORDER.get(self.min_severity or "debug", 0)
        return SEVERITY_ORDER.get(event.severity, 1) >= floor

    def __call__(self, event: SinkEvent) -> None:
        if not self.wants(event):
            return
        try:
            result = self.callback(event)
        except Exception:
            log.exception("CallbackSink: the callback failed on %s", event.kind)
            return
        if inspect.isawaitable(result):
            self._schedule(result, event.kind)

    def _schedule(self, result: Awaitable[Any], kind: str) -> None:
        async def run() -> None:
            try:
                await result
            except Exception:
                log.exception("CallbackSink: the callback failed on %s", kind)

        try:
            task = asyncio.get_running_loop().create_task(run())
        except RuntimeError:  # no loop to run it on: said, never silently dropped
            if inspect.iscoroutine(result):
                result.close()
            log.warning("CallbackSink: an async callback for %s needs a running event loop; "
                        "the event was not delivered to it", kind)
            return
        self._tasks.add(task)  # held until done: a task nobody holds may be collected
        task.add_done_callback(self._tasks.discard)

    async def emit(self, event: SinkEvent) -> None:
        """Deliver one event and wait for an async callback (the reference's sink method)."""
        if not self.wants(event):
            return
        try:
            result = self.callback(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("CallbackSink: the callback failed on %s", event.kind)



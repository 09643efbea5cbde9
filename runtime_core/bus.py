"""The in-process event bus ("event" triggers) and message broker ("message" triggers) that every
process of one runtime shares."""

from __future__ import annotations

import fnmatch
import itertools
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

BusHandler = Callable[[dict[str, Any]], None]


class EventBus:
    """The in-process event bus every process of one runtime shares: ``emit(event_type, data,
    source=...)`` calls each subscriber of that type at once; an ``event`` trigger subscribes
    to one type (and optionally one source). A handler that raises is logged and skipped;
    nothing is kept for a subscriber that comes later."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[BusHandler]] = {}

    def subscribe(self, event_type: str, handler: BusHandler) -> None:
        self._handlers.setdefault(event_type, []).append(handler)

    def unsubscribe(self, event_type: str, handler: BusHandler) -> None:
        handlers = self._handlers.get(event_type, [])
        if handler in handlers:
            handlers.remove(handler)

    def emit(self, event_type: str, data: Any = None, *, source: str | None = None) -> int:
        """Deliver to every subscriber of ``event_type``; returns how many received it."""
        message = {"event_type": event_type, "data": data, "source": source}
        delivered = 0
        for handler in list(self._handlers.get(event_type, ())):
            try:
                handler(message)
                delivered += 1
            except Exception:
                log.exception("event bus handler failed for %s", event_type)
        return delivered


class MessageBroker:
    """Topic messages; subscriptions may use shell-style wildcards (``reports.*``)."""

    def __init__(self) -> None:
        self._subs: dict[str, tuple[str, BusHandler]] = {}
        self._ids = itertools.count(1)

    def subscribe(self, topic: str, handler: BusHandler) -> str:
        sub_id = f"sub-{next(self._ids)}"
        self._subs[sub_id] = (topic, handler)
        return sub_id

    def unsubscribe(self, sub_id: str) -> None:
        self._subs.pop(sub_id, None)

    def publish(self, topic: str, content: Any, *, sender: str | None = None) -> int:
        delivered = 0
        for pattern, handler in list(self._subs.values()):
            if pattern == topic or fnmatch.fnmatchcase(topic, pattern):
                try:
                    handler({"topic": topic, "content": content, "sender": sender})
                    delivered += 1
                except Exception:
                    log.exception("message handler failed for %s", topic)
        return delivered

"""Built-in triggers that need no outside service: interval, event (bus) and message (broker)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from runtime_core.bus import EventBus, MessageBroker
from runtime_core.clock import Clock
from runtime_core.triggers.base import TriggerEvent


class IntervalTrigger:
    trigger_type = "interval"

    def __init__(self, trigger_id: str, seconds: float, clock: Clock) -> None:
        self.trigger_id = trigger_id
        self.seconds = seconds
        self._clock = clock
        self._ticks = 0

    async def start(self) -> None:
        self._ticks = 0

    async def stop(self) -> None:
        return None

    async def wait_for_next(self) -> TriggerEvent:
        await self._clock.sleep(self.seconds)
        self._ticks += 1
        return TriggerEvent(self.trigger_id, "interval", {"tick": self._ticks,
                                                          "seconds": self.seconds})


class _BufferedTrigger:
    """Callback-fed triggers: the bus calls us synchronously, the process waits for the next."""

    trigger_type = ""

    def __init__(self, trigger_id: str) -> None:
        self.trigger_id = trigger_id
        self._buffer: asyncio.Queue[TriggerEvent] = asyncio.Queue()

    def pending(self) -> list[TriggerEvent]:
        """Events received but not yet handed to the process."""
        items: list[TriggerEvent] = []
        while not self._buffer.empty():
            items.append(self._buffer.get_nowait())
        return items

    async def wait_for_next(self) -> TriggerEvent:
        return await self._buffer.get()


class EventTrigger(_BufferedTrigger):
    """Runs on an event of one type on the runtime's bus (from one source, if given). The
    runtime builds it as ``EventTrigger(trigger_id, bus, event_type, source)``; code written
    for the reference runtime as ``EventTrigger(event_bus, event_type, *, source_filter=None,
    trigger_id=None)`` (an id ``event-<8 hex digits>`` is made when none is given)."""

    trigger_type = "event"

    def __init__(self, first: str | EventBus, second: EventBus | str,
                 event_type_: str | None = None, source_: str | None = None, /, *,
                 source_filter: str | None = None, trigger_id: str | None = None) -> None:
        if isinstance(first, str):  # ours: (trigger_id, bus, event_type, source)
            if not isinstance(second, EventBus) or event_type_ is None or trigger_id:
                raise TypeError("EventTrigger takes (trigger_id, bus, event_type, source) or "
                                "the reference's (event_bus, event_type, *, source_filter=, "
                                "trigger_id=)")
            bus, event_type, trigger_id = second, event_type_, first
        else:
            if not isinstance(second, str) or event_type_ is not None:
                raise TypeError("EventTrigger(event_bus, event_type, *, source_filter=None, "
                                "trigger_id=None): event_type is the bus event type, a str")
            bus, event_type = first, second
            trigger_id = trigger_id or f"event-{uuid.uuid4().hex[:8]}"
        super().__init__(trigger_id)
        self._bus = bus
        self.event_type = event_type
        self.source = source_filter if source_filter is not None else source_

    @property
    def source_filter(self) -> str | None:
        """The source an event must come from (the reference's name for ``source``)."""
        return self.source

    def _on_event(self, message: dict[str, Any]) -> None:
        if self.source is not None and message.get("source") != self.source:
            return
        payload = {"event_type": message["event_type"], "source": message.get("source"),
                   "data": message.get("data"), "bus_event_id": uuid.uuid4().hex}
        self._buffer.put_nowait(TriggerEvent(self.trigger_id, "event", payload))

    async def start(self) -> None:
        self._bus.subscribe(self.event_type, self._on_event)

    async def stop(self) -> None:
        self._bus.unsubscribe(self.event_type, self._on_event)


class MessageTrigger(_BufferedTrigger):
    """Runs on a message to a topic of the runtime's broker. The runtime builds it as
    ``MessageTrigger(trigger_id, broker, topic)``; code written for the reference runtime as
    ``MessageTrigger(broker, topic, *, trigger_id=None)`` (an id ``message-<8 hex digits>``
    is made when none is given)."""

    trigger_type = "message"

    def __init__(self, first: str | MessageBroker, second: MessageBroker | str,
                 topic_: str | None = None, /, *, trigger_id: str | None = None) -> None:
        if isinstance(first, str):  # ours: (trigger_id, broker, topic)
            if not isinstance(second, MessageBroker) or topic_ is None or trigger_id:
                raise TypeError("MessageTrigger takes (trigger_id, broker, topic) or the "
                                "reference's (broker, topic, *, trigger_id=)")
            broker, topic, trigger_id = second, topic_, first
        else:
            if not isinstance(second, str) or topic_ is not None:
                raise TypeError("MessageTrigger(broker, topic, *, trigger_id=None): the topic "
                                "is a str")
            broker, topic = first, second
            trigger_id = trigger_id or f"message-{uuid.uuid4().hex[:8]}"
        super().__init__(trigger_id)
        self._broker = broker
        self.topic = topic
        self._sub: str | None = None

    def _on_message(self, message: dict[str, Any]) -> None:
        self._buffer.put_nowait(TriggerEvent(self.trigger_id, "message", dict(message)))

    async def start(self) -> None:
        self._sub = self._broker.subscribe(self.topic, self._on_message)

    async def stop(self) -> None:
        if self._sub is not None:
            self._broker.unsubscribe(self._sub)
            self._sub = None

"""Turn a TriggerConfig into a trigger, with a stable id."""

from __future__ import annotations

import hashlib
import json

from runtime_core.bus import EventBus, MessageBroker
from runtime_core.clock import Clock
from runtime_core.config import TriggerConfig
from runtime_core.triggers.base import BaseTrigger
from runtime_core.triggers.builtin import EventTrigger, IntervalTrigger, MessageTrigger


class TriggerError(ValueError):
    pass


BUILTIN_TYPES = ("interval", "event", "message")


def trigger_id_for(config: TriggerConfig) -> str:
    """``<type>-<digest of the config>``: stable, so removing one leaves the others' ids alone."""
    body = json.dumps(config.model_dump(mode="json", exclude_defaults=True), sort_keys=True)
    return f"{config.type}-{hashlib.sha256(body.encode()).hexdigest()[:8]}"


def create_trigger(
    config: TriggerConfig, *, clock: Clock, event_bus: EventBus, broker: MessageBroker
) -> BaseTrigger:
    trigger_id = trigger_id_for(config)
    if config.type == "interval":
        assert config.seconds is not None
        return IntervalTrigger(trigger_id, config.seconds, clock)
    if config.type == "event":
        assert config.event_type is not None
        return EventTrigger(trigger_id, event_bus, config.event_type, config.event_source)
    if config.type == "message":
        assert config.topic is not None
        return MessageTrigger(trigger_id, broker, config.topic)
    raise TriggerError(
        f"unknown trigger type {config.type!r}; available: {', '.join(BUILTIN_TYPES)}"
    )

"""Turn a TriggerConfig into a trigger, with a stable id."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from runtime_core.bus import EventBus, MessageBroker
from runtime_core.clock import Clock
from runtime_core.errors import RuntimeBaseError
from runtime_core.triggers.builtin import EventTrigger, IntervalTrigger, MessageTrigger
from runtime_core.triggers.config import TriggerConfig
from runtime_core.triggers.cron import CronTrigger
from runtime_core.triggers.custom import custom_trigger_type
from runtime_core.triggers.custom_adapter import adapt_custom_trigger


class TriggerError(ValueError, RuntimeBaseError):
    """A trigger that cannot be built (an unknown type, one its factory cannot make)."""


def trigger_id_for(config: TriggerConfig) -> str:
    """``<type>-<digest of the config>``: stable, so removing one leaves the others' ids alone."""
    body = json.dumps(config.model_dump(mode="json", exclude_defaults=True), sort_keys=True)
    return f"{config.type}-{hashlib.sha256(body.encode()).hexdigest()[:8]}"


def create_trigger(
    config: TriggerConfig, *, clock: Clock, event_bus: EventBus, broker: MessageBroker
) -> Any:
    """A pull trigger (``wait_for_next``), a push trigger (webhook) or None for ``manual``."""
    trigger_id = trigger_id_for(config)
    kind = config.type
    if kind == "manual":
        return None
    if kind == "interval":
        assert config.seconds is not None
        return IntervalTrigger(trigger_id, config.seconds, clock)
    if kind == "cron":
        assert config.cron_expression is not None
        return CronTrigger(trigger_id, config.cron_expression, config.timezone, clock)
    if kind == "webhook":  # its web server loads with the first webhook trigger
        from runtime_core.triggers.webhook.trigger import WebhookTrigger

        return WebhookTrigger(trigger_id, config)
    if kind == "file_watch":
        from runtime_core.triggers.file_watch import FileWatchTrigger

        return FileWatchTrigger(trigger_id, config)
    if kind == "event":
        assert config.event_type is not None
        return EventTrigger(trigger_id, event_bus, config.event_type, config.event_source)
    if kind == "message":
        assert config.topic is not None
        return MessageTrigger(trigger_id, broker, config.topic)
    custom = custom_trigger_type(kind)
    if custom is None:
        raise TriggerError(f"unknown trigger type {kind!r} (not registered in this Python "
                           "process: import the module that registers it)")
    made = custom.factory(config, event_bus=event_bus, broker=broker)
    return adapt_custom_trigger(made, kind, trigger_id)

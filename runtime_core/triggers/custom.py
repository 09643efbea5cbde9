"""Custom trigger types: ``register_trigger_type(name, factory)`` makes ``TriggerConfig(type=name,
custom_config={...})`` valid, and the process builds the trigger with ``factory(config,
event_bus=..., broker=...)`` (the reference runtime's signature).

The object a factory returns is one of:

* a pull trigger (the reference's ``BaseTrigger``): ``trigger_id``, ``async start()``,
  ``async stop()`` and ``async wait_for_next() -> TriggerEvent``, which raises
  ``asyncio.CancelledError`` once stopped;
* an async iterator of TriggerEvents with ``async start()`` and ``async stop()``;
* a push trigger: ``async start(accept)``, ``async stop()``, where ``await accept(event)``
  answers with an AcceptResult once the event is durable (journaled) and queued, so the trigger
  acknowledges its source only then.

Its events go through the process's one road in, as the built-in triggers' do: the trigger's
``filter_expression``, journaled before acknowledged, dead letters. Registration is for the
whole Python process; a manifest imports the modules that register (its ``plugins:``) before
its triggers are checked."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

#: The trigger types built into the runtime (they cannot be replaced or unregistered).
BUILTIN_TRIGGER_TYPES: Final = ("cron", "interval", "webhook", "file_watch", "event", "message",
                                "manual")
TYPE_NAME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")

#: ``factory(config, *, event_bus=None, broker=None) -> trigger``
TriggerFactory = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class CustomTriggerType:
    name: str
    factory: TriggerFactory
    #: The importable module that registered it (a manifest's ``plugins:`` entry), if known.
    module: str | None


_REGISTRY: dict[str, CustomTriggerType] = {}


def _registering_module(factory: TriggerFactory) -> str | None:
    """The module whose code called register_trigger_type (two frames up), else the factory's
    module; None for a script run as ``__main__``, which a manifest cannot import."""
    frame = sys._getframe(2)
    for name in (frame.f_globals.get("__name__"), getattr(factory, "__module__", None)):
        if isinstance(name, str) and name != "__main__":
            return name
    return None


def register_trigger_type(name: str, factory: TriggerFactory, *, overwrite: bool = False
                          ) -> None:
    """Make ``type: <name>`` a trigger type; ``factory(config, *, event_bus, broker)`` builds
    one. ValueError for a built-in type's name, or a name already registered (unless
    ``overwrite``)."""
    if not isinstance(name, str) or not TYPE_NAME.match(name):
        raise ValueError(f"trigger type name {name!r} must start with a letter and hold only "
                         "letters, digits, '_', '-' or '.' (at most 64)")
    if not callable(factory):
        raise TypeError(f"the factory of trigger type {name!r} must be callable, got "
                        f"{type(factory).__name__}")
    if name in BUILTIN_TRIGGER_TYPES:
        raise ValueError(f"{name!r} is a built-in trigger type; register yours under another "
                         "name")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"Trigger type {name!r} is already registered. Pass overwrite=True to "
                         "replace it.")
    _REGISTRY[name] = CustomTriggerType(name, factory, _registering_module(factory))


def unregister_trigger_type(name: str) -> None:
    """Forget a custom trigger type (nothing happens for one not registered). Configs already
    validated keep it; a process started afterwards with it fails to start."""
    if name in BUILTIN_TRIGGER_TYPES:
        raise ValueError(f"{name!r} is a built-in trigger type and cannot be unregistered")
    _REGISTRY.pop(name, None)


def registered_trigger_types() -> list[str]:
    """Every trigger type a config may name, built-in and custom, sorted."""
    return sorted((*BUILTIN_TRIGGER_TYPES, *_REGISTRY))


def custom_trigger_type(name: str) -> CustomTriggerType | None:
    return _REGISTRY.get(name)

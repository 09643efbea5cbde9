"""How control-plane values cross the wire: the same frozen dataclasses on both sides, dumped
to JSON by pydantic on the server and rebuilt by pydantic on the client. Runtime events travel
as their ``to_dict()`` and come back as the same event class, found by ``kind``."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from pydantic import TypeAdapter

import runtime_core.events as runtime_events
from runtime_core.events import RuntimeEvent

T = TypeVar("T")


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(kind: Any) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        adapter = _ADAPTERS[kind] = TypeAdapter(kind)
    return adapter


def dump(value: Any) -> Any:
    """A control-plane value (dataclass, list of them, dict) as plain JSON data."""
    return _adapter(type(value)).dump_python(value, mode="json")


def load(kind: type[T], data: Any) -> T:
    """Rebuild a control-plane value from what ``dump`` made."""
    value: T = _adapter(kind).validate_python(data)
    return value


def load_list(kind: type[T], data: Any) -> list[T]:
    values: list[T] = _adapter(list[kind]).validate_python(data)  # type: ignore[valid-type]
    return values


def _event_classes() -> dict[str, type[RuntimeEvent]]:
    found: dict[str, type[RuntimeEvent]] = {}
    for value in vars(runtime_events).values():
        if isinstance(value, type) and issubclass(value, RuntimeEvent):
            found[value.kind] = value
    return found


EVENT_CLASSES = _event_classes()


def event_from_dict(data: dict[str, Any]) -> RuntimeEvent:
    """The event ``to_dict()`` described; unknown fields (a newer server) are dropped."""
    kind = str(data.get("kind", ""))
    cls = EVENT_CLASSES.get(kind)
    process = str(data.get("process", ""))
    timestamp = float(data.get("timestamp") or 0.0)
    if cls is None:
        return RuntimeEvent(process=process, timestamp=timestamp)
    names = {f.name for f in dataclasses.fields(cls)}
    fields = {k: v for k, v in data.items() if k in names}
    return cls(**fields)

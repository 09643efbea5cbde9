"""Reading a server-sent event stream: lines in, ``(id, event, data)`` frames out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Frame:
    event_id: str
    event: str
    data: str


async def frames(lines: AsyncIterator[str]) -> AsyncIterator[Frame]:
    """Frames as the SSE format defines them; comments (keep-alives) are skipped."""
    event_id, event = "", "message"
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield Frame(event_id, event, "\n".join(data))
            event, data = "message", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "id":
            event_id = value
        elif field == "event":
            event = value
        elif field == "data":
            data.append(value)

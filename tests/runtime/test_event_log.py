"""The numbered event log behind GET /api/v1/events: exact resume after Last-Event-ID, a
'missed' count when the client fell further behind than the log keeps, and a new boot."""

from __future__ import annotations

import json
from typing import Any

from runtime_core.api.event_log import EventLog
from runtime_core.events import EventNotifier, QueueDepth


def emit(notifier: EventNotifier, count: int) -> None:
    for n in range(count):
        notifier.emit(QueueDepth(process="p", queued=n, pending_retries=0, dead_letters=0))


async def frames(log: EventLog, last_event_id: str, count: int) -> list[dict[str, Any]]:
    """The first ``count`` frames the stream sends, parsed."""
    out: list[dict[str, Any]] = []
    stream = log.stream(last_event_id, heartbeat=0.01)
    async for text in stream:
        if text.startswith(":"):
            continue
        fields = dict(line.split(": ", 1) for line in text.strip().splitlines())
        out.append({"id": fields["id"], "event": fields["event"],
                    "data": json.loads(fields["data"])})
        if len(out) == count:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    return out


async def test_resume_sends_exactly_what_came_after_the_last_id() -> None:
    notifier = EventNotifier()
    log = EventLog(notifier, capacity=100)
    emit(notifier, 10)
    got = await frames(log, f"{log.boot}-7", 4)
    assert got[0]["event"] == "hello" and got[0]["data"]["missed"] == 0
    assert [f["id"] for f in got[1:]] == [f"{log.boot}-{n}" for n in (8, 9, 10)]
    assert [f["data"]["queued"] for f in got[1:]] == [7, 8, 9]


async def test_a_client_further_behind_than_the_log_is_told_how_many_it_missed() -> None:
    notifier = EventNotifier()
    log = EventLog(notifier, capacity=5)
    emit(notifier, 20)  # the log keeps 16..20
    got = await frames(log, f"{log.boot}-3", 6)
    assert got[0]["data"]["missed"] == 12  # 4..15 are gone for good
    assert [f["id"] for f in got[1:]] == [f"{log.boot}-{n}" for n in range(16, 21)]


async def test_no_id_starts_now_and_another_boots_id_gets_all_the_log_holds() -> None:
    notifier = EventNotifier()
    log = EventLog(notifier, capacity=100)
    emit(notifier, 3)
    fresh = log.stream("", heartbeat=0.01)
    hello = await fresh.__anext__()
    assert f"id: {log.boot}-3" in hello  # no replay: the next frame is the next event
    emit(notifier, 1)
    assert f"id: {log.boot}-4" in await fresh.__anext__()
    await fresh.aclose()  # type: ignore[attr-defined]
    got = await frames(log, "0123456789ab-2", 5)  # a previous server's id
    assert [f["id"] for f in got[1:]] == [f"{log.boot}-{n}" for n in (1, 2, 3, 4)]


async def test_close_ends_every_stream() -> None:
    notifier = EventNotifier()
    log = EventLog(notifier)
    stream = log.stream("", heartbeat=10)
    await stream.__anext__()  # hello
    log.close()
    left = [text async for text in stream]
    assert left == []
    emit(notifier, 1)  # no longer listening

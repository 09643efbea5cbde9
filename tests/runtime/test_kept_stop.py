"""A stop that keeps the queue (the one every promptui host makes: serve, run, the room, an
operator's stop): nothing is dead-lettered, and the next start, on the same process object or
on a new one over the same journal, runs each kept event exactly once; a run the stop cut short
goes on from its durable steps, a write cut off waits for an operator. AgentProcess.stop()
called from code keeps the spec's semantics."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent, tool
from tests.helpers.polling import wait_for

calls: list[str] = []
writes: list[str] = []
gates: list[asyncio.Event] = []  # one per test: an Event belongs to the loop that waits on it


async def lookup(key: str) -> str:
    calls.append(key)
    if key.startswith("hold"):
        await gates[-1].wait()
    return f"found {key}"


async def record(key: str) -> str:
    writes.append(key)
    if key.startswith("hold"):
        await gates[-1].wait()
    return f"recorded {key}"


def runtime_on(journal: Path | None, *, effect: str = "read", **extra: Any) -> AgentRuntime:
    name = "lookup" if effect == "read" else "record"
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(
        model={"turns": [{"tool_calls": [{"name": name, "args": {"key": "$payload.key"}}]},
                         {"reply": "done"}]},
        journal={"level": "none"} if journal is None else
        {"level": "checkpoint", "backend": "sqlite", "path": str(journal)}, **extra),
        tools=[tool(lookup, effect="read") if effect == "read" else tool(record, effect="write")])
    return runtime


def events(*keys: str) -> list[TriggerEvent]:
    return [TriggerEvent("t", "manual", {"key": key}, event_id=f"e-{key}") for key in keys]


def succeeded(runtime: AgentRuntime) -> list[str]:
    return [r.event.event_id for r in runtime.get_process("worker").recent_runs()
            if r.state.value == "succeeded"]


def fresh() -> None:
    calls.clear()
    writes.clear()
    gates.append(asyncio.Event())


async def nothing_left_in(journal: Path) -> None:
    """A new program on the journal finds nothing to take back and runs nothing."""
    before = (list(calls), list(writes))
    again = runtime_on(journal)
    await again.start_all()
    try:
        recovered = again.get_process("worker").recovered
        assert recovered is not None
        assert recovered["requeued_events"] == 0 and recovered["resumed_runs"] == 0
        assert (calls, writes) == before
    finally:
        await again.close()


async def test_a_kept_stop_dead_letters_nothing_and_the_next_start_runs_each_once(
        tmp_path: Path) -> None:
    fresh()
    journal = tmp_path / "journal.db"
    runtime = runtime_on(journal)
    await runtime.start_all()
    process = runtime.get_process("worker")
    queued = events("hold", "a", "b", "c")
    for event in queued:
        assert await process.inject(event)
    await wait_for(lambda: calls == ["hold"], what="the first run inside its tool")
    await process.stop(0, keep_queue=True)  # the read in flight is cut short
    assert process.state.value == "stopped"
    assert process.dead_letters == []
    assert [e.event_id for e in process.queued_events()] == [e.event_id for e in queued]
    assert not await process.inject(TriggerEvent("t", "manual", {"key": "late"}))  # refused

    gates[-1].set()
    await process.start()  # the same object: taken back from the journal, once each
    try:
        await wait_for(lambda: len(succeeded(runtime)) == 4, what="the four kept events")
        assert sorted(succeeded(runtime)) == sorted(e.event_id for e in queued)
        assert calls == ["hold", "a", "b", "c"]  # the cut read is not called again
        assert [d["event"].payload["key"] for d in process.dead_letters] == ["late"]
    finally:
        await runtime.close()
    await nothing_left_in(journal)


async def test_kept_twice_and_events_between_still_run_once(tmp_path: Path) -> None:
    fresh()
    gates[-1].set()
    journal = tmp_path / "journal.db"
    runtime = runtime_on(journal)
    await runtime.start_all()
    process = runtime.get_process("worker")
    try:
        await process.suspend()
        for event in events("a", "b"):
            assert await process.inject(event)
        await process.stop(keep_queue=True)
        await process.start()
        await process.suspend()
        for event in events("c"):
            assert await process.inject(event)
        await process.stop(keep_queue=True)
        assert len(process.queued_events()) == 3  # a and b never ran: still kept
        await process.start()
        await wait_for(lambda: len(succeeded(runtime)) == 3, what="the three kept events")
        assert Counter(calls) == {"a": 1, "b": 1, "c": 1}
        assert process.dead_letters == []
    finally:
        await runtime.close()
    await nothing_left_in(journal)


async def test_a_kept_stop_then_a_new_program_runs_each_once(tmp_path: Path) -> None:
    fresh()
    journal = tmp_path / "journal.db"
    first = runtime_on(journal)
    await first.start_all()
    process = first.get_process("worker")
    queued = events("hold", "a", "b")
    for event in queued:
        assert await process.inject(event)
    await wait_for(lambda: calls == ["hold"], what="the first run inside its tool")
    await process.stop(0, keep_queue=True)
    await first.close()  # the program ends: a stopped process has nothing to dead-letter
    assert process.dead_letters == []

    gates[-1].set()
    second = runtime_on(journal)
    await second.start_all()
    try:
        await wait_for(lambda: len(succeeded(second)) == 3, what="the three kept events")
        assert calls == ["hold", "a", "b"]
        assert second.get_process("worker").dead_letters == []
    finally:
        await second.close()
    await nothing_left_in(journal)


async def test_a_write_cut_off_by_a_kept_stop_waits_for_an_operator(tmp_path: Path) -> None:
    fresh()
    runtime = runtime_on(tmp_path / "journal.db", effect="write")
    await runtime.start_all()
    process = runtime.get_process("worker")
    try:
        for event in events("hold", "a"):
            assert await process.inject(event)
        await wait_for(lambda: writes == ["hold"], what="the write in flight")
        await process.stop(0, keep_queue=True)
        gates[-1].set()
        await process.start()
        await wait_for(lambda: succeeded(runtime) == ["e-a"], what="the queued event")
        [waiting] = process.waiting_runs()
        assert waiting.event.event_id == "e-hold"
        assert waiting.waiting_reason == "unknown_write_outcome"
        assert writes == ["hold", "a"]  # the cut write is never made again without an operator
        assert process.dead_letters == []
    finally:
        await runtime.close()


async def test_retries_pending_at_a_kept_stop_are_kept(tmp_path: Path) -> None:
    fresh()
    gates[-1].set()
    journal = tmp_path / "journal.db"
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(
        model={"provider": "scripted", "turns": [{"raise": "upstream said no"}]},
        trigger_delivery={"max_retries": 3, "retry_backoff": 60},
        journal={"level": "checkpoint", "backend": "sqlite", "path": str(journal)}))
    await runtime.start_all()
    process = runtime.get_process("worker")
    try:
        assert await process.inject(TriggerEvent("t", "manual", {"key": "flaky"},
                                                 event_id="e-flaky"))
        await wait_for(lambda: process.status()["pending_retries"] == 1, what="the retry")
        await process.stop(keep_queue=True)
        assert process.dead_letters == []
        assert [e.event_id for e in process.queued_events()] == ["e-flaky"]
        await process.start()  # the retry runs now, not in 60 s: it fails again, retried
        await wait_for(lambda: process.status()["pending_retries"] == 1, what="a retry again")
        assert [r.attempt for r in process.recent_runs()] == [1, 2]
    finally:
        await runtime.close()


async def test_without_a_journal_the_queue_kept_in_memory_runs_once() -> None:
    fresh()
    gates[-1].set()
    runtime = runtime_on(None)
    await runtime.start_all()
    process = runtime.get_process("worker")
    try:
        await process.suspend()
        for event in events("a", "b"):
            assert await process.inject(event)
        await process.stop(keep_queue=True)
        assert process.dead_letters == [] and len(process.queued_events()) == 2
        await process.start()
        await wait_for(lambda: len(succeeded(runtime)) == 2, what="the two kept events")
        assert calls == ["a", "b"]
    finally:
        await runtime.close()


async def test_a_start_after_a_shutdown_on_the_same_object_runs_the_kept_events(
        tmp_path: Path) -> None:
    fresh()
    gates[-1].set()
    journal = tmp_path / "journal.db"
    runtime = runtime_on(journal)
    await runtime.start_all()
    process = runtime.get_process("worker")
    await process.suspend()
    for event in events("a", "b"):
        assert await process.inject(event)
    assert await runtime.shutdown() == {"worker": {"pending": 2, "dead_letters": 0}}
    await runtime.start_all()  # the journal was sealed: this start writes again
    try:
        await wait_for(lambda: len(succeeded(runtime)) == 2, what="the two kept events")
        assert calls == ["a", "b"]
    finally:
        await runtime.close()
    await nothing_left_in(journal)


async def test_stop_from_code_keeps_the_spec_semantics(tmp_path: Path) -> None:
    fresh()
    runtime = runtime_on(tmp_path / "journal.db")
    await runtime.start_all()
    process = runtime.get_process("worker")
    try:
        for event in events("hold", "a", "b"):
            assert await process.inject(event)
        await wait_for(lambda: calls == ["hold"], what="the first run inside its tool")
        await process.stop()
        letters = [(d["event"].event_id, d["reason"], d["error"]) for d in process.dead_letters]
        assert letters == [("e-hold", "process stopped", "run cancelled"),
                           ("e-a", "process stopped", ""), ("e-b", "process stopped", "")]
        assert process.queued_events() == []
        gates[-1].set()
        await process.start()  # nothing comes back by itself: redelivery is the road
        assert process.queued_events() == []
        assert calls == ["hold"]
    finally:
        await runtime.close()


async def test_a_pull_triggers_events_during_a_kept_stops_drain_are_kept(tmp_path: Path) -> None:
    """An interval trigger fires while a host's stop lets a run finish: those events are kept
    with the queue (journaled, run at the next start), never dead-lettered "process stopped"."""
    fresh()
    runtime = AgentRuntime()
    journal = {"level": "checkpoint", "backend": "sqlite", "path": str(tmp_path / "j.db")}
    runtime.add_process("worker", ProcessConfig(
        model={"turns": [{"tool_calls": [{"name": "lookup", "args": {"key": "hold"}}]},
                         {"reply": "done"}]},
        triggers=[{"type": "interval", "seconds": 0.05}], journal=journal),
        tools=[tool(lookup, effect="read")])
    process = runtime.get_process("worker")
    await runtime.start_all()
    try:
        await wait_for(lambda: calls, what="a run in flight")
        stopping = asyncio.ensure_future(process.stop(30, keep_queue=True))
        await wait_for(lambda: process.status_snapshot().draining, what="the drain")
        before = process.status_snapshot().queue_size
        await wait_for(lambda: process.status_snapshot().queue_size > before
                       or process.status()["dead_letter_count"], what="a tick during the drain")
        gates[-1].set()
        await stopping
        assert process.status()["dead_letter_count"] == 0
        assert process.status_snapshot().queue_size > before
    finally:
        await runtime.close()


async def test_an_event_waiting_for_room_at_a_kept_stop_is_kept(tmp_path: Path) -> None:
    """A message trigger's event waits for room in a full queue when a host's shutdown stops
    the process: it is kept with the queue (journaled, run once at the next start), never
    dead-lettered "process stopped" from the listener's hands."""
    fresh()
    journal = {"level": "checkpoint", "backend": "sqlite", "path": str(tmp_path / "j.db")}

    def runtime_with_topic() -> AgentRuntime:
        runtime = AgentRuntime()
        runtime.add_process("worker", ProcessConfig(
            model={"turns": [{"tool_calls": [{"name": "lookup",
                                              "args": {"key": "$payload.content.key"}}]},
                             {"reply": "done"}]},
            triggers=[{"type": "message", "topic": "work"}], queue_size=1, journal=journal),
            tools=[tool(lookup, effect="read")])
        return runtime

    runtime = runtime_with_topic()
    process = runtime.get_process("worker")
    await runtime.start_all()
    try:
        for key in ("hold-1", "second", "third"):  # one runs, one queued, one in hand
            process.broker.publish("work", {"key": key})
        await wait_for(lambda: calls == ["hold-1"] and process.status()["queue_size"] == 1,
                       what="a run in flight and a full queue")
        kept = await runtime.shutdown()
        assert process.dead_letters == []
        assert kept["worker"]["dead_letters"] == 0
    finally:
        await runtime.close()
    gates[-1].set()
    again = runtime_with_topic()
    await again.start_all()
    try:
        await wait_for(lambda: len(succeeded(again)) == 3, what="the cut run and both kept")
        assert calls == ["hold-1", "second", "third"]  # each once (the cut read is not redone)
        assert again.get_process("worker").status()["recovered"]["requeued_events"] == 3
        assert again.get_process("worker").dead_letters == []
    finally:
        await again.close()


async def test_a_retry_coming_due_during_a_kept_stops_drain_is_kept(tmp_path: Path) -> None:
    """A failed run's retry comes due while a host's stop lets another run finish: it goes back
    on the queue and is kept with it, never dead-lettered "process stopped"."""
    fresh()
    runtime = AgentRuntime()
    journal = {"level": "checkpoint", "backend": "sqlite", "path": str(tmp_path / "j.db")}
    runtime.add_process("worker", ProcessConfig(
        model={"turns": [{"tool_calls": [{"name": "lookup", "args": {"key": "$payload.key"}}]},
                         {"reply": "done"}],
               "scripts": {"broken": [{"raise": "the target refused"}]},
               "select": {"by_payload_field": "key"}},
        trigger_delivery={"max_retries": 1, "retry_backoff": 0.3}, journal=journal),
        tools=[tool(lookup, effect="read")])
    process = runtime.get_process("worker")
    await runtime.start_all()
    try:
        for event in events("broken", "hold"):
            await process.inject(event)
        await wait_for(lambda: calls == ["hold"] and process.status()["pending_retries"] == 1,
                       what="a retry pending and a run in flight")
        stopping = asyncio.ensure_future(process.stop(30, keep_queue=True))
        await wait_for(lambda: process.status_snapshot().draining, what="the drain")
        await wait_for(lambda: process.status()["pending_retries"] == 0,
                       what="the retry coming due during the drain")
        gates[-1].set()
        await stopping
        assert process.status()["dead_letter_count"] == 0
        assert [e.event_id for e in process.queued_events()] == ["e-broken"]
    finally:
        await runtime.close()


async def test_an_event_arriving_at_a_full_queue_during_a_kept_stops_drain_is_kept(
        tmp_path: Path) -> None:
    """The queue is full and a run in flight when a host's stop starts draining; a message
    arriving then is kept past the queue's size (journaled, run once at the next start), as the
    stop's other leftovers are, never dead-lettered "process stopped"."""
    fresh()
    runtime = AgentRuntime()
    journal = {"level": "checkpoint", "backend": "sqlite", "path": str(tmp_path / "j.db")}
    runtime.add_process("worker", ProcessConfig(
        model={"turns": [{"tool_calls": [{"name": "lookup",
                                          "args": {"key": "$payload.content.key"}}]},
                         {"reply": "done"}]},
        triggers=[{"type": "message", "topic": "work"}], queue_size=1, journal=journal),
        tools=[tool(lookup, effect="read")])
    process = runtime.get_process("worker")
    await runtime.start_all()
    try:
        for key in ("hold-1", "second"):
            process.broker.publish("work", {"key": key})
        await wait_for(lambda: calls == ["hold-1"] and process.status()["queue_size"] == 1,
                       what="a run in flight and a full queue")
        stopping = asyncio.ensure_future(process.stop(30, keep_queue=True))
        await wait_for(lambda: process.status_snapshot().draining, what="the drain")
        process.broker.publish("work", {"key": "third"})
        await wait_for(lambda: process.status()["queue_size"] == 2
                       or process.status()["dead_letter_count"], what="the third's fate")
        gates[-1].set()
        await stopping
        assert process.dead_letters == []
        assert [e.payload["content"]["key"] for e in process.queued_events()] == ["second",
                                                                                 "third"]
    finally:
        await runtime.close()

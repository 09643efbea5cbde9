"""The room stops its embedded runtime as every host does (issue 31): `q` drains what is in
flight and keeps what is queued in the journal, and the next runtime on that journal runs each
kept event once; the closing line says how many were kept; the `s` key's stop keeps the queue
too, and starting the process again runs it once. Driven by Pilot over a real runtime on a temp
journal."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button

from promptui.cli.ui import room_closing_line
from promptui.screens.dialogs import ChoiceDialog
from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent, tool
from tests.helpers.polling import until, wait_for
from tests.helpers.room import demo_app, load_demo, make_app

calls: list[str] = []
gates: list[asyncio.Event] = []


async def lookup(key: str) -> str:
    calls.append(key)
    if key == "hold":
        await gates[-1].wait()
    return f"found {key}"


def runtime_on(journal: Path) -> AgentRuntime:
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(
        model={"turns": [{"tool_calls": [{"name": "lookup", "args": {"key": "$payload.key"}}]},
                         {"reply": "done"}]},
        journal={"level": "checkpoint", "backend": "sqlite", "path": str(journal)}),
        tools=[tool(lookup, effect="read")])
    return runtime


def events(*keys: str) -> list[TriggerEvent]:
    return [TriggerEvent("t", "manual", {"key": key}, event_id=f"e-{key}") for key in keys]


async def press(pilot: Any, app: Any, choice: str) -> None:
    await until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the dialog")
    app.screen.query_one(f"#choice-{choice}", Button).press()


async def test_q_keeps_the_queue_and_the_next_runtime_runs_each_once(tmp_path: Path) -> None:
    calls.clear()
    gates.append(asyncio.Event())
    journal = tmp_path / "journal.db"
    runtime = runtime_on(journal)
    app = make_app(runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        process = runtime.get_process("worker")
        await until(pilot, lambda: process.state.value == "running", what="worker running")
        for event in events("hold", "a", "b", "c"):
            assert await process.inject(event)
        await until(pilot, lambda: calls == ["hold"], what="the first run in its tool")
        await until(pilot, lambda: app.store.processes["worker"].active_runs == 1,
                    what="the room to see the run in flight")
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the dialog")
        assert "Queued events stay queued in the journal" in app.screen.body
        assert "dead letters" not in app.screen.body
        await press(pilot, app, "now")
        await until(pilot, lambda: app.return_code is not None, what="the room to close")
    assert app.kept == {"worker": {"pending": 4, "dead_letters": 0}}
    assert process.dead_letters == []
    assert room_closing_line(app.kept) == (
        "Stopped cleanly. 4 queued event(s) kept in the journal for the next start; 0 dead "
        "letter(s) kept for redelivery.")

    gates[-1].set()
    again = runtime_on(journal)
    await again.start_all()
    try:
        worker = again.get_process("worker")
        await wait_for(lambda: sum(r.state.value == "succeeded" for r in worker.recent_runs())
                       == 4, what="the four kept events")
        assert calls == ["hold", "a", "b", "c"]  # the cut read goes on, not called again
        assert worker.dead_letters == []
    finally:
        await again.close()


async def test_s_stops_keeping_the_queue_and_s_again_runs_it_once(tmp_path: Path) -> None:
    calls.clear()
    gates.append(asyncio.Event())
    gates[-1].set()
    runtime = runtime_on(tmp_path / "journal.db")
    app = make_app(runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        process = runtime.get_process("worker")
        await until(pilot, lambda: process.state.value == "running", what="worker running")
        await process.suspend()
        for event in events("a", "b"):
            assert await process.inject(event)
        await until(pilot, lambda: app.store.processes["worker"].state == "suspended")
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the dialog")
        assert "run once when it starts again" in app.screen.body
        await press(pilot, app, "now")
        await until(pilot, lambda: process.state.value == "stopped", what="the stop")
        assert process.dead_letters == [] and len(process.queued_events()) == 2
        await until(pilot, lambda: app.store.processes["worker"].state == "stopped")
        await pilot.press("s")  # start
        await until(pilot, lambda: sum(r.state.value == "succeeded"
                                       for r in process.recent_runs()) == 2, what="both run")
        assert Counter(calls) == {"a": 1, "b": 1}
        assert process.dead_letters == []


@pytest.mark.slow
async def test_q_on_the_demo_keeps_loopers_queue(demo_runtime: AgentRuntime,
                                                 tmp_path: Path) -> None:
    app = demo_app(demo_runtime)
    looper = demo_runtime.get_process("looper")
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: looper.state.value == "running", what="looper running")
        await looper.suspend()  # as its health monitor does: its events wait in the queue
        for n in range(5):
            assert await looper.inject(TriggerEvent("t", "manual", {"n": n}))
        queued = len(looper.queued_events())
        assert queued >= 5
        await pilot.press("q")
        await until(pilot, lambda: app.return_code is not None, what="the room to close")
    assert app.kept is not None and app.kept["looper"]["pending"] >= queued
    assert not [d for d in looper.dead_letters if d["reason"] == "process stopped"]
    again = load_demo(tmp_path)
    await again.start_all()
    try:
        recovered = again.get_process("looper").recovered
        assert recovered is not None and recovered["requeued_events"] >= queued
    finally:
        await again.close()

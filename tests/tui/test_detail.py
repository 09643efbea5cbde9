"""The process detail screen, driven by Pilot over a real runtime: each test checks what changed
in the runtime (dead letters, queue, waiting runs) and what the screen shows."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import RichLog, Static

from promptui.screens.dashboard import DashboardScreen
from promptui.screens.detail import ProcessDetailScreen
from promptui.screens.dialogs import ConfirmDialog, ReconcileDialog
from promptui.screens.run_steps import RunStepsDialog
from runtime_core import AgentProcess, AgentRuntime, ProcessConfig, TriggerEvent, tool
from runtime_core.journal import EntryType, ReadFilter
from runtime_core.journal.factory import make_journal
from tests.helpers.polling import until
from tests.helpers.recovery import Ledger, abandon
from tests.helpers.room import (
    FAIL,
    dead_letters,
    make_app,
    make_runtime,
    notes,
    open_detail,
    plain,
    queued_ids,
    running,
    screen_text,
)


def log_text(screen: ProcessDetailScreen, selector: str) -> str:
    return "\n".join(strip.text for strip in screen.query_one(selector, RichLog).lines)


@pytest.mark.slow
async def test_every_tab_shows_its_data_at_80x24() -> None:
    runtime = make_runtime(health={"enabled": True},
                           budget={"enabled": True, "max_runs_per_day": 50})
    app = make_app(runtime)
    async with running(app, (80, 24)) as pilot:
        process = runtime.get_process("worker")
        await until(pilot, lambda: process.state.value == "running")
        await process.inject(TriggerEvent("t", "manual", {"city": "Oslo"}))
        await until(pilot, lambda: process.invocation_count == 1)
        [dead] = await dead_letters(runtime, pilot, 1)
        await process.inject(TriggerEvent("t", "manual", {"city": "Bergen"}, event_id="q-1"))
        screen = await open_detail(app, pilot, "worker")

        await until(pilot, lambda: "idle" in str(screen.query_one("#live-status",
                                                                  Static).content))
        title = screen_text(app).splitlines()[0]
        assert "worker" in title and "suspended" in title and "dead 1" in title

        await pilot.press("2")
        await until(pilot, lambda: screen.table("queue").keys == ["q-1"])
        assert "Bergen" in screen_text(app)

        await pilot.press("3")
        await until(pilot, lambda: screen.table("dead").keys == [dead])
        text = screen_text(app)
        for column in ("Event", "Reason", "Error", "Try", "Age"):
            assert column in text.splitlines()[3]  # every column header on screen
        assert "retries exhausted" in text and FAIL in text  # the full error below

        await pilot.press("4")
        await until(pilot, lambda: screen.table("runs").row_count == 2)
        text = screen_text(app)
        assert "succeeded" in text and "failed" in text and "Steps" in text
        await pilot.press("enter")  # a finished run: its steps in a dialog
        await until(pilot, lambda: isinstance(app.screen, RunStepsDialog))
        assert "boom" in screen_text(app)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)

        await pilot.press("5")
        await until(pilot, lambda: screen.table("context").keys == ["region", "limits"])
        assert '{"cities":3}' in screen_text(app)

        await pilot.press("6")
        await until(pilot, lambda: "assistant: it is sunny" in log_text(screen,
                                                                         "#conversation-log"))

        await pilot.press("7")
        await until(pilot, lambda: "runs_per_day" in plain(
            screen.query_one("#governance-view", Static).content))

        await pilot.press("8")
        await until(pilot, lambda: "max_consecutive_failures: 100" in plain(
            screen.query_one("#config-view", Static).content))
        assert "lookup" in screen_text(app)

        await pilot.press("1")
        await until(pilot, lambda: "idle" in screen_text(app))


async def test_live_tab_follows_a_running_run_step_by_step() -> None:
    gate = asyncio.Event()

    async def slow(city: str) -> str:
        await gate.wait()
        return f"rain in {city}"

    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(model={"provider": "scripted", "turns": [
        {"tool_calls": [{"name": "slow", "args": {"city": "Oslo"}}]}, {"reply": "bring a coat"}]}),
        tools=[tool(slow, effect="read")])
    app = make_app(runtime)
    async with running(app) as pilot:
        screen = await open_detail(app, pilot, "worker")
        await until(pilot, lambda: "no runs yet" in str(
            screen.query_one("#live-status", Static).content))
        await until(pilot, lambda: runtime.get_process("worker").state.value == "running")
        await app.control.inject("worker", {"go": 1})
        await until(pilot, lambda: "running" in str(
            screen.query_one("#live-status", Static).content))
        await until(pilot, lambda: "model slow" in log_text(screen, "#live-log"))
        assert "bring a coat" not in log_text(screen, "#live-log")
        gate.set()
        await until(pilot, lambda: "✓ reply: bring a coat" in log_text(screen, "#live-log"))
        assert 'slow({"city":"Oslo"}) → ✓ rain in Oslo' in log_text(screen, "#live-log")
        await until(pilot, lambda: "idle" in str(screen.query_one("#live-status",
                                                                  Static).content))


@pytest.mark.slow
async def test_space_marks_and_r_redelivers_only_the_marked() -> None:
    runtime = make_runtime()
    app = make_app(runtime)
    async with running(app) as pilot:
        ids = await dead_letters(runtime, pilot, 3)
        screen = await open_detail(app, pilot, "worker")
        await pilot.press("3")
        table = screen.table("dead")
        await until(pilot, lambda: table.keys == ids)
        await pilot.press("space")  # marks the first, moves down
        await pilot.press("down")
        await pilot.press("space")  # marks the third
        assert screen.marked == {ids[0], ids[2]}
        assert [str(table.get_cell(i, "mark")) for i in ids] == ["●", "", "●"]
        await pilot.press("r")
        await until(pilot, lambda: queued_ids(runtime) == [ids[0], ids[2]])
        assert runtime.get_process("worker").status()["dead_letter_count"] == 1
        await until(pilot, lambda: table.keys == [ids[1]])
        assert screen.marked == set()
        await until(pilot, lambda: "2 of 2 redelivered to worker" in notes(app))


@pytest.mark.slow
async def test_r_takes_the_cursor_row_and_R_redelivers_all() -> None:
    runtime = make_runtime()
    app = make_app(runtime)
    async with running(app) as pilot:
        ids = await dead_letters(runtime, pilot, 3)
        screen = await open_detail(app, pilot, "worker")
        await pilot.press("3")
        table = screen.table("dead")
        await until(pilot, lambda: table.keys == ids)
        await pilot.press("down")
        await pilot.press("r")  # nothing marked: the row under the cursor
        await until(pilot, lambda: queued_ids(runtime) == [ids[1]])
        await until(pilot, lambda: table.keys == [ids[0], ids[2]])
        assert table.cursor_key in (ids[0], ids[2])
        await pilot.press("R")  # a bulk action: it asks first (tests/tui/test_confirmations.py)
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.click("#confirm")
        await until(pilot, lambda: queued_ids(runtime) == [ids[1], ids[0], ids[2]])
        await until(pilot, lambda: table.row_count == 0)
        assert runtime.get_process("worker").status()["dead_letter_count"] == 0
        await until(pilot, lambda: "2 redelivered to worker" in notes(app))


@pytest.mark.slow
async def test_rows_update_in_place_and_the_cursor_keeps_its_key() -> None:
    runtime = make_runtime()
    app = make_app(runtime)
    async with running(app) as pilot:
        ids = await dead_letters(runtime, pilot, 2)
        screen = await open_detail(app, pilot, "worker")
        await pilot.press("3")
        table = screen.table("dead")
        await until(pilot, lambda: table.keys == ids)
        await pilot.press("down")
        await pilot.press("space")
        await pilot.press("up")
        assert table.cursor_key == ids[0]
        process = runtime.get_process("worker")
        await process.resume("operator")
        await process.inject(TriggerEvent("t", "fail", {"n": 9}, event_id="dead-new"))
        await until(pilot, lambda: table.keys == [*ids, "dead-new"])
        assert table.cursor_key == ids[0] and screen.marked == {ids[1]}
        await process.suspend("operator")  # so the redelivered event stays in the queue
        await app.control.redeliver("worker", [ids[1]])  # a marked row goes elsewhere
        await until(pilot, lambda: table.keys == [ids[0], "dead-new"])
        assert screen.marked == set() and table.cursor_key == ids[0]


@pytest.mark.slow
async def test_x_asks_first_cancel_keeps_and_confirm_clears() -> None:
    runtime = make_runtime()
    app = make_app(runtime)
    async with running(app) as pilot:
        ids = await dead_letters(runtime, pilot, 2)
        screen = await open_detail(app, pilot, "worker")
        await pilot.press("3")
        await until(pilot, lambda: screen.table("dead").keys == ids)
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        assert app.focused is not None and app.focused.id == "cancel"
        await pilot.press("enter")  # Enter on Cancel keeps them
        await until(pilot, lambda: app.screen is screen)
        assert len(runtime.get_process("worker").dead_letters) == 2
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.click("#confirm")
        await until(pilot, lambda: not runtime.get_process("worker").dead_letters)
        await until(pilot, lambda: screen.table("dead").row_count == 0)
        assert queued_ids(runtime) == []  # cleared, not redelivered
        await until(pilot, lambda: "2 dead letters of worker cleared" in notes(app))


@pytest.mark.slow
async def test_read_only_refuses_every_dead_letter_command() -> None:
    runtime = make_runtime()
    app = make_app(runtime, read_only=True)
    async with running(app) as pilot:
        ids = await dead_letters(runtime, pilot, 2)
        screen = await open_detail(app, pilot, "worker")
        await pilot.press("3")
        await until(pilot, lambda: screen.table("dead").keys == ids)
        for key in ("r", "R", "x"):
            await pilot.press(key)
        await pilot.pause()
        assert app.screen is screen  # no confirm dialog either
        assert notes(app).count(
            "read-only: redeliver is disabled (started with --read-only)") == 2
        assert "read-only: clear dead letters is disabled (started with --read-only)" \
            in notes(app)
        assert [d["event"].event_id for d in runtime.get_process("worker").dead_letters] == ids
        assert queued_ids(runtime) == [] and screen.table("dead").keys == ids


@pytest.mark.slow
async def test_escape_and_backspace_go_back_to_the_dashboard() -> None:
    runtime = make_runtime()
    app = make_app(runtime)
    async with running(app) as pilot:
        await open_detail(app, pilot, "worker")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await open_detail(app, pilot, "worker")
        await pilot.press("4", "backspace")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))


@pytest.mark.slow
async def test_a_process_that_disappears_is_reported_not_a_crash() -> None:
    runtime = make_runtime()
    app = make_app(runtime)
    async with running(app) as pilot:
        screen = await open_detail(app, pilot, "worker")
        await runtime.remove_process("worker")
        await until(pilot, lambda: "no process named 'worker'" in screen.gone)
        await until(pilot, lambda: "esc goes back" in screen_text(app))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))


async def crashed_mid_write(tmp_path: Path, ledger: Ledger) -> tuple[AgentRuntime, ProcessConfig]:
    """A runtime whose process "p" recovers a run that died inside a write tool: the run waits
    with ``unknown_write_outcome`` (the recovery tests' approach, over an SQLite file)."""
    config = ProcessConfig(
        model={"provider": "scripted", "turns": [
            {"tool_calls": [{"name": "record", "args": {"item": "$payload.i"}}]},
            {"reply": "done"}]},
        journal={"level": "checkpoint", "path": str(tmp_path / "j.db")})
    ledger.gate = asyncio.Event()  # the write hangs: the process dies inside it
    journal = make_journal(config.journal)
    first = AgentProcess("p", config, journal=journal, tools=ledger.tools())
    await first.start()
    await first.inject(TriggerEvent("t", "manual", {"i": "1"}, event_id="ev-1"))
    deadline = asyncio.get_running_loop().time() + 5
    while not await journal.read(ReadFilter(process="p", entry_type=EntryType.TOOL_INTENT)):
        assert asyncio.get_running_loop().time() < deadline, "no tool intent journaled"
        await asyncio.sleep(0.005)
    await abandon(first)
    await journal.close()
    ledger.gate = None
    runtime = AgentRuntime()
    runtime.add_process("p", config, tools=ledger.tools())
    return runtime, config


@pytest.mark.slow
async def test_enter_on_a_waiting_run_reconciles_it(tmp_path: Path) -> None:
    ledger = Ledger()
    runtime, _ = await crashed_mid_write(tmp_path, ledger)
    app = make_app(runtime)
    async with running(app) as pilot:
        process = runtime.get_process("p")
        await until(pilot, lambda: len(process.waiting_runs()) == 1, what="a waiting run")
        run_id = process.waiting_runs()[0].run_id
        screen = await open_detail(app, pilot, "p")
        await pilot.press("4")
        table = screen.table("runs")
        await until(pilot, lambda: table.keys[:1] == [run_id])
        assert "waiting" in str(table.get_cell(run_id, "state"))
        assert "waiting 1" in screen_text(app).splitlines()[0]

        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ReconcileDialog))
        assert "record" in screen_text(app) and f"{run_id}:2" in screen_text(app)
        await pilot.press("escape")  # cancel: nothing changes
        await until(pilot, lambda: app.screen is screen)
        assert len(process.waiting_runs()) == 1

        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ReconcileDialog))
        await pilot.click("#not_applied")
        await until(pilot, lambda: not process.waiting_runs(), what="the run reconciled")
        await until(pilot, lambda: process.invocation_count == 1)
        assert process.recent_runs()[-1].state.value == "succeeded"
        assert ledger.writes == []  # the unknown write was never re-run blindly
        await until(pilot, lambda: "succeeded" in str(table.get_cell(run_id, "state")))
        await until(pilot, lambda: f"run {run_id[:8]} reconciled: not applied" in notes(app))


@pytest.mark.slow
async def test_read_only_shows_a_waiting_run_but_does_not_reconcile(tmp_path: Path) -> None:
    runtime, _ = await crashed_mid_write(tmp_path, Ledger())
    app = make_app(runtime, read_only=True)
    async with running(app) as pilot:
        process = runtime.get_process("p")
        await until(pilot, lambda: len(process.waiting_runs()) == 1, what="a waiting run")
        screen = await open_detail(app, pilot, "p")
        await pilot.press("4")
        await until(pilot, lambda: screen.table("runs").row_count == 1)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunStepsDialog))
        assert "read-only: reconcile is disabled (started with --read-only)" in notes(app)
        assert len(process.waiting_runs()) == 1


@pytest.mark.slow
async def test_a_run_waiting_for_evidence_is_answered_from_its_dialog() -> None:
    from promptui.screens.evidence_dialog import EvidenceDialog
    from tests.helpers.completion import DISPATCH, TOOLS
    from tests.helpers.completion import config as evidence_config

    runtime = AgentRuntime()
    process = runtime.add_process("deployer", evidence_config(DISPATCH, {"reply": "dispatched"}),
                                  tools=TOOLS)
    app = make_app(runtime)
    async with running(app) as pilot:
        await until(pilot, lambda: process.state.value == "running", what="running")
        await process.inject(TriggerEvent("t", "manual", {"branch": "main"}))
        await until(pilot, lambda: len(process.waiting_runs()) == 1, what="a waiting run")
        run_id = process.waiting_runs()[0].run_id
        screen = await open_detail(app, pilot, "deployer")
        await pilot.press("4")
        table = screen.table("runs")
        await until(pilot, lambda: table.keys[:1] == [run_id])
        await until(pilot, lambda: "enter: evidence" in screen_text(app))
        assert "profile deployer@3" not in screen_text(app)  # shown in the run's steps only
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, EvidenceDialog))
        text = screen_text(app)
        assert "has no verification linked to it" in text and "dispatched" in text
        await pilot.click("#supplied")  # nothing typed: refused, the dialog stays
        assert isinstance(app.screen, EvidenceDialog)
        await pilot.click("#evidence")
        await pilot.press(*'{"pipeline": "green"}')
        await pilot.click("#supplied")
        await until(pilot, lambda: process.invocation_count == 1, what="the run succeeded")
        assert process.recent_runs()[-1].state.value == "succeeded"
        await until(pilot, lambda: f"run {run_id[:8]}: evidence supplied" in notes(app))
        await until(pilot, lambda: "succeeded" in str(table.get_cell(run_id, "state")))
        await pilot.press("enter")  # the finished run's steps show what it executed
        await until(pilot, lambda: isinstance(app.screen, RunStepsDialog))
        assert "profile deployer@3 · completion action_with_verification" in screen_text(app)

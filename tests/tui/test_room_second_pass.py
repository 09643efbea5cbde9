"""Issue 36's room bugs, driven the way an operator met them: a `:` jump leaving the focus in a
feed, focus that cannot be seen, a screen that freezes behind a dialog, tables that ignore
Home/End/g/G and reorder under the cursor, the palette's two "Theme" entries, the detail help
titled with a class name, anomalies from before an attach, the timeline's short type list and
the panel that cannot be maximised."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from textual.widgets import Label

from promptui.app import ControlRoom
from promptui.screens.dashboard import DashboardScreen
from promptui.screens.detail import ProcessDetailScreen
from promptui.screens.dialogs import ChoiceDialog, clear_dead_dialog
from promptui.screens.help import HelpScreen
from promptui.screens.jump import JumpPrompt
from promptui.screens.timeline import TYPE_FILTERS
from promptui.store import UIStore
from promptui.widgets.feeds import ActivityLog, AnomalyFeed
from promptui.widgets.header import StatusHeader
from promptui.widgets.process_table import ProcessTable
from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent, tool
from runtime_core.control import LocalControl
from runtime_core.journal.entry import EntryType
from tests.helpers.polling import until, wait_for
from tests.helpers.room import DEMO, demo_app, open_detail, rows, select, table_of
from tests.helpers.scenes import summary


@pytest.mark.slow
async def test_a_jump_moves_the_focus_to_the_table_on_the_process(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await select(app, pilot, "health-checker")
        activity = app.screen.query_one(ActivityLog)
        await until(pilot, lambda: activity.line_count > 0, what="an activity line")
        await pilot.press("tab", "tab")
        await until(pilot, lambda: app.focused is activity, what="the activity log focused")
        await pilot.press("up")
        await until(pilot, lambda: activity.cursor is not None)
        await pilot.press("colon", *"inv")
        await until(pilot, lambda: isinstance(app.screen, JumpPrompt))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await until(pilot, lambda: table_of(app).selected_name == "invoice-watcher")
        await until(pilot, lambda: isinstance(app.focused, ProcessTable),
                    what="the focus on the process table")
        await pilot.pause(0.5)  # and it stays there (closing the prompt gives focus back)
        assert isinstance(app.focused, ProcessTable)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
        screen = app.screen
        assert isinstance(screen, ProcessDetailScreen)
        assert screen.process == "invoice-watcher" and not screen.focus_run


# -- the screen behind a dialog stays live -------------------------------------------------------
@pytest.mark.slow
async def test_the_dashboard_stays_live_behind_the_jump_prompt(
        demo_runtime: AgentRuntime) -> None:
    ticks = [1_700_000_000.0]
    app = demo_app(demo_runtime, clock=lambda: ticks[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        dashboard = app.screen
        header = dashboard.query_one(StatusHeader)
        activity = dashboard.query_one(ActivityLog)
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, JumpPrompt))
        before_lines, before_header = activity.line_count, str(header.render())
        ticks[0] += 61.0  # a minute later: the header's clock must say so behind the prompt
        await until(pilot, lambda: str(header.render()) != before_header,
                    what="the header's clock to move behind the prompt")
        await until(pilot, lambda: activity.line_count > before_lines,
                    what="new activity lines behind the prompt")
        assert isinstance(app.screen, JumpPrompt)


def gated_tool(gate: asyncio.Event) -> Any:
    async def deploy() -> str:
        """A write that waits for the test."""
        await gate.wait()
        return "deployed"

    return tool(deploy)


def gated_runtime(gates: dict[str, asyncio.Event]) -> AgentRuntime:
    """One process per gate whose run waits in a tool until the test opens its gate."""
    runtime = AgentRuntime()
    for name, gate in gates.items():
        runtime.add_process(name, ProcessConfig(model={"provider": "scripted", "turns": [
            {"tool_calls": [{"name": "deploy"}]}, {"reply": "ok"}]}), tools=[gated_tool(gate)])
    return runtime


@pytest.mark.slow
async def test_the_quit_question_counts_the_runs_in_flight_while_it_is_open() -> None:
    gates = {"deployer": asyncio.Event(), "shipper": asyncio.Event()}
    runtime = gated_runtime(gates)
    app = ControlRoom(LocalControl(runtime, name="t"), refresh_hz=20)
    async with app.run_test(size=(80, 24)) as pilot:
        for name in gates:
            process = runtime.get_process(name)
            await until(pilot, lambda p=process: p.state.value == "running",  # type: ignore[misc]
                        what=f"{name} running")
            await process.inject(TriggerEvent("t", "manual", {}))
        await until(pilot, lambda: sum(r.active_runs for r in app.store.processes.values()) == 2)
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ChoiceDialog))
        title = app.screen.query_one(".dialog-title", Label)
        assert str(title.content) == "Quit? 2 run(s) in flight in 2 process(es)"
        gates["deployer"].set()  # one run ends while the question is open
        await until(pilot, lambda: str(title.content)
                    == "Quit? 1 run(s) in flight in 1 process(es)", what="the count to follow")
        await pilot.press("escape")
        gates["shipper"].set()


def test_a_dead_letter_question_counts_what_is_there_now() -> None:
    dialog = clear_dead_dialog("worker", 3)
    store = UIStore()
    store.update_processes([summary("worker", "running", dead_letters=5)])
    assert dialog.figures is not None
    assert dialog.figures(store, 0.0) == (
        "Clear 5 dead letters of worker?", "All 5 are dropped and cannot be redelivered after.")


# -- tables: Home/End/g/G, and a live sort that does not move rows under the cursor ------------
@pytest.mark.slow
async def test_home_end_g_and_G_move_the_table_cursor(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        table = table_of(app)
        await select(app, pilot, "demo-feeder")
        for key, name in (("end", DEMO[-1]), ("home", DEMO[0]), ("G", DEMO[-1]),
                          ("g", DEMO[0])):
            await pilot.press(key)
            await until(pilot, lambda n=name: table.selected_name == n,  # type: ignore[misc]
                        what=f"{key} to reach {name}")


@pytest.mark.slow
async def test_a_live_sort_holds_the_rows_still_until_o_sorts_again(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        table = table_of(app)
        table.cycle_sort("invocations")  # Done: it grows every second in the demo
        sorted_once = rows(app)
        table.select(sorted_once[3])
        await until(pilot, lambda: table.order_stale, what="a Done figure to move")
        assert "order stale" in str(table.border_title)
        start = app.pump_count
        while app.pump_count < start + 10:  # ten ticks of live figures: nothing moves
            await pilot.pause(0.05)
            assert rows(app) == sorted_once
            assert table.cursor_row == 3 and table.selected_name == sorted_once[3]
        await pilot.press("o")  # sorts again, by the same column, the same way
        assert table.sort_column == "invocations" and not table.sort_reverse
        done = {name: app.store.processes[name].invocations for name in DEMO}
        shown = rows(app)
        assert [done[n] for n in shown] == sorted(done[n] for n in shown) or table.order_stale
        assert table.selected_name == sorted_once[3]  # the selection followed its process


# -- smaller bugs --------------------------------------------------------------------------------
@pytest.mark.slow
async def test_the_palette_offers_one_theme_command(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert titles.count("Theme") == 1, titles
        assert "Theme: promptui-light" in titles


@pytest.mark.slow
async def test_the_detail_help_names_the_screen_in_words(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_detail(app, pilot, "looper")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        title = str(app.screen.query_one(".dialog-title", Label).content)
        assert title == "Keys on this screen (Process detail)"


@pytest.mark.slow
async def test_anomalies_found_before_the_room_opened_are_in_the_feed(
        demo_runtime: AgentRuntime) -> None:
    control = LocalControl(demo_runtime, name="demo")
    await control.start_all()  # the runtime runs before the room attaches to it

    async def looper_stuck() -> bool:
        return bool(await control.health_anomalies("looper"))

    await wait_for(looper_stuck, 30, "looper's stuck anomaly", pause=asyncio.sleep)
    opened = time.time()
    app = ControlRoom(control, refresh_hz=20, start_runtime=False)
    async with app.run_test(size=(80, 24)) as pilot:
        feed = app.screen.query_one(AnomalyFeed)
        # (looper may find more once the room is open: those come live, and later)
        await until(pilot, lambda: any(line.process == "looper" and line.at < opened
                                       for line in app.store.feed),
                    what="the stuck anomaly from before the room opened, in the store")
        await until(pilot, lambda: any("looper: stuck: " in line for line in feed.lines),
                    what="the stuck anomaly in the feed")
        # none twice (one found again live later has its own time)
        recalled = [line for line in app.store.feed if line.kind == "health.anomaly"]
        assert len({(line.process, line.text, line.at) for line in recalled}) == len(recalled)


def test_the_timeline_offers_every_journal_entry_type() -> None:
    assert set(TYPE_FILTERS) == {None, *(value for key, value in vars(EntryType).items()
                                         if key.isupper() and isinstance(value, str))}


# -- a panel maximised and back ------------------------------------------------------------------
@pytest.mark.slow
async def test_z_maximises_the_focused_panel_and_z_or_escape_restores_it(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        screen = app.screen
        await pilot.press("z")
        await until(pilot, lambda: isinstance(screen.maximized, ProcessTable))
        await pilot.press("z")
        await until(pilot, lambda: screen.maximized is None)
        await pilot.press("tab")
        await until(pilot, lambda: isinstance(app.focused, AnomalyFeed))
        await pilot.press("z")
        await until(pilot, lambda: isinstance(screen.maximized, AnomalyFeed))
        await pilot.press("escape")
        await until(pilot, lambda: screen.maximized is None)

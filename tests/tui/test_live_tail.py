"""The live tail (`L`): every process's runs and steps as they happen, filtered by the
dashboard's filter, with search (n/N), go-to-time, follow/hold, and Enter drilling down to the
line's run (its steps) with Esc walking back the same way."""

from __future__ import annotations

import time

import pytest
from textual.widgets import Input

from promptui.screens.dashboard import DashboardScreen
from promptui.screens.detail import ProcessDetailScreen
from promptui.screens.dialogs import AskDialog
from promptui.screens.live_tail import LiveTailScreen, TailLog
from promptui.screens.run_steps import RunStepsDialog
from promptui.screens.timeline import TimelineScreen
from runtime_core import AgentRuntime
from tests.helpers.polling import until
from tests.helpers.room import DEMO, demo_app, rows

pytestmark = pytest.mark.slow


def tail_of(app: object) -> TailLog:
    return app.screen.query_one(TailLog)  # type: ignore[attr-defined, no-any-return]


async def test_the_tail_shows_runs_and_steps_as_they_happen(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, LiveTailScreen))
        log = tail_of(app)
        since = time.time()

        def kinds() -> set[str]:
            return {log.item_at(i).kind for i in range(log.line_count)
                    if log.item_at(i) is not None and log.item_at(i).at > since}

        await until(pilot, lambda: {"run.started", "run.step", "run.finished"} <= kinds(),
                    timeout=20, what="runs and their steps")
        assert log.following and log.scroll_y == log.max_scroll_y
        newest = log.item_at(log.line_count - 1)
        assert abs(time.time() - newest.at) < 10
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("q")


async def test_the_dashboard_filter_search_and_time(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await pilot.press("slash")
        await pilot.press(*"^health")
        await pilot.press("enter")
        await until(pilot, lambda: rows(app) == ["health-checker"])
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, LiveTailScreen))
        log = tail_of(app)
        await until(pilot, lambda: log.line_count >= 4, timeout=20)
        shown = {log.item_at(i).process for i in range(log.line_count)}
        assert shown <= {"health-checker", ""}, shown
        assert "filter /^health" in str(app.screen.query_one("#tail-title").render())

        await pilot.press("slash")
        search = app.screen.query_one("#tail-search", Input)
        assert search.display and search.has_focus
        await pilot.press(*"step")
        await pilot.press("enter")
        assert not log.following and log.cursor is not None
        first = log.cursor
        assert "step" in log.lines[first]
        title = str(app.screen.query_one("#tail-title").render())
        assert "match " in title and "/" in title
        await pilot.press("N")  # the one before
        if sum("step" in line for line in log.lines) > 1:
            assert log.cursor < first and "step" in log.lines[log.cursor]
            await pilot.press("n")
            assert log.cursor == first

        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, AskDialog))
        moment = log.item_at(1).at
        field = app.screen.query_one(Input)
        field.value = time.strftime("%H:%M:%S", time.localtime(moment))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LiveTailScreen))
        assert log.cursor is not None and log.item_at(log.cursor).at >= int(moment)
        await pilot.press("F")
        assert log.following and log.cursor is None
        await pilot.press("q")


async def test_enter_drills_down_to_the_run_and_escape_walks_back(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, LiveTailScreen))
        log = tail_of(app)

        def finished_line() -> int | None:
            return next((i for i in range(log.line_count - 1, -1, -1)
                         if log.item_at(i).kind == "run.finished"), None)

        await until(pilot, lambda: finished_line() is not None, timeout=20)
        index = finished_line()
        assert index is not None
        item = log.item_at(index)
        log.move_cursor(index - log.line_count)
        assert log.cursor == index
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunStepsDialog), timeout=10)
        assert app.screen.run_view.run_id == item.run_id
        assert app.screen.process == item.process
        first = app.screen.run_view.steps[0]
        await pilot.press("enter")  # the first step's journal entry, on the timeline
        await until(pilot, lambda: isinstance(app.screen, TimelineScreen) and app.screen.loaded,
                    timeout=10)
        entry = app.screen.table.current
        assert entry is not None and entry.run_id == item.run_id
        if first.kind == "model":  # a model turn rides in the run's next intent or its end
            assert "model turn" in entry.summary
        else:
            assert entry.step == first.index
        assert app.screen.opened_at is not None and app.screen.opened_at.seq == entry.seq
        await pilot.press("escape")  # back to the steps
        await until(pilot, lambda: isinstance(app.screen, RunStepsDialog))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
        assert app.screen.process == item.process and app.screen.active_tab == "runs"
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, LiveTailScreen))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("q")

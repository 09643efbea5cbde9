"""The dashboard's feeds stay live: through a trip to a process and back, the `/` filter bar, a
resize, they keep following (at the end, scrolled left, new lines with current times); scrolled
up they hold still and count what waits, and end or F follows again."""

from __future__ import annotations

import time
from typing import Any

import pytest

from promptui.app import ControlRoom
from promptui.screens.dashboard import DashboardScreen
from promptui.screens.detail import ProcessDetailScreen
from promptui.widgets.feeds import ActivityLog, FollowLog
from runtime_core import AgentRuntime
from tests.helpers.polling import until
from tests.helpers.room import DEMO, demo_app, rows

pytestmark = pytest.mark.slow


def activity(app: ControlRoom) -> ActivityLog:
    dashboard = next(s for s in app.screen_stack if isinstance(s, DashboardScreen))
    return dashboard.query_one(ActivityLog)


def at_end(log: FollowLog) -> bool:
    return log.following and log.scroll_y == log.max_scroll_y and log.scroll_x == 0


def fresh_line(log: FollowLog, since: float) -> bool:
    """A line newer than ``since`` is shown, stamped with a current time."""
    if not log.line_count:
        return False
    item = log.item_at(log.line_count - 1)
    return item is not None and item.at > since and abs(time.time() - item.at) < 10 \
        and log.lines[-1][:8] == time.strftime("%H:%M:%S", time.localtime(item.at))


async def still_live(pilot: Any, app: ControlRoom, what: str) -> None:
    since = time.time()
    log = activity(app)
    await until(pilot, lambda: fresh_line(log, since) and at_end(log), timeout=20,
                what=f"the activity feed to show new lines at its end after {what}")


async def test_the_feeds_keep_following_through_screens_filters_and_resizes(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await still_live(pilot, app, "the start")
        await pilot.press("enter")  # open the selected process ...
        await until(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
        await pilot.pause(1.0)  # ... long enough for the dashboard to miss lines
        await pilot.press("escape")  # ... and back
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await still_live(pilot, app, "a trip to a process and back")
        await pilot.press("slash")  # the filter bar takes rows from the feeds
        await still_live(pilot, app, "the filter bar opened")
        await pilot.press("escape")
        await still_live(pilot, app, "the filter bar closed")
        await pilot.resize_terminal(120, 40)
        await still_live(pilot, app, "a resize to 120x40")
        await pilot.resize_terminal(80, 24)
        await still_live(pilot, app, "a resize back to 80x24")
        await pilot.press("q")


async def test_scrolled_up_the_feed_holds_and_counts_then_follows_again(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        log = activity(app)
        await until(pilot, lambda: log.line_count > 3, timeout=20)
        log.focus()
        await pilot.press("up", "up")
        assert not log.following and log.cursor == log.line_count - 2
        shown, chosen = log.line_count, log.cursor
        await until(pilot, lambda: log.pending > 0, timeout=20, what="lines to wait")
        assert log.line_count == shown and log.cursor == chosen  # the view holds still
        assert f"+{log.pending} new" in str(log.border_subtitle)
        await pilot.press("F")
        assert log.following and log.cursor is None and log.border_subtitle == ""
        assert log.line_count > shown
        await until(pilot, lambda: at_end(log))
        await pilot.press("up", "end")  # end follows too
        assert log.following
        await pilot.press("q")


async def test_v_on_a_feed_line_shows_it_whole_and_enter_opens_its_run(
        demo_runtime: AgentRuntime) -> None:
    from promptui.screens.pager import PagerScreen
    from promptui.screens.run_steps import RunStepsDialog

    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        log = activity(app)

        def a_run_line() -> int | None:
            return next((i for i in range(log.line_count - 1, -1, -1)
                         if log.item_at(i) is not None and log.item_at(i).run_id), None)

        await until(pilot, lambda: a_run_line() is not None, timeout=20)
        log.focus()
        index = a_run_line()
        assert index is not None
        log.move_cursor(index - log.line_count)
        item = log.item_at(log.cursor)
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        assert item.text in app.screen.text  # the whole line, not cut at 80 columns
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunStepsDialog), timeout=10)
        assert app.screen.run_view.run_id == item.run_id
        await pilot.press("escape", "escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("q")

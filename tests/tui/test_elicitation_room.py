"""An MCP server's question answered from the control room, driven by Pilot over a real runtime
with the asking server (helpers/workers/asking_server.py over stdio): the anomaly feed flags the run
as needing an operator and Enter on that line opens the answer dialog; the dialog is built from
the server's schema (an Input per text or number, a Select for a choice, a Switch for yes/no),
Cancel is focused first, bad values are refused under their field, and the answer reaches the
server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from textual.widgets import Button, Input, Select, Switch

from promptui.screens.dashboard import DashboardScreen
from promptui.screens.elicit_dialog import ElicitationDialog
from runtime_core import AgentRuntime, TriggerEvent
from tests.helpers.elicitation import BOOK, config, finished, tool_result
from tests.helpers.polling import until
from tests.helpers.room import make_app, notes, open_detail, running, screen_text

pytestmark = pytest.mark.slow


def runtime_with_asking_process() -> AgentRuntime:
    runtime = AgentRuntime()
    runtime.add_process("p", config(BOOK, {"reply": "booked"}))
    return runtime


def asking(runtime: AgentRuntime) -> bool:
    return any(r.waiting_reason == "elicitation"
               for r in runtime.get_process("p").waiting_runs())


async def test_the_question_is_answered_from_its_dialog() -> None:
    runtime = runtime_with_asking_process()
    process = runtime.get_process("p")
    app = make_app(runtime)
    async with running(app, size=(80, 24)) as pilot:
        await until(pilot, lambda: process.state.value == "running", timeout=30,
                    what="running")
        await process.inject(TriggerEvent("t", "manual", {}))
        await until(pilot, lambda: asking(runtime), timeout=30, what="the server's question")
        run_id = process.waiting_runs()[0].run_id
        screen = await open_detail(app, pilot, "p")
        await pilot.press("4")
        table = screen.table("runs")
        await until(pilot, lambda: table.keys[:1] == [run_id])
        await until(pilot, lambda: "enter: answer" in screen_text(app))

        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ElicitationDialog))
        dialog = app.screen
        assert isinstance(dialog, ElicitationDialog)
        assert app.focused is not None and app.focused.id == "cancel"
        text = screen_text(app)
        assert "asking asks" in text and "Booking LH123" in text
        for button in ("Cancel", "Accept", "Decline", "Dismiss"):  # all on an 80x24 screen
            assert button in text
        assert isinstance(dialog.query_one("#field-0"), Input)  # name
        assert isinstance(dialog.query_one("#field-1"), Input)  # seats
        assert isinstance(dialog.query_one("#field-2"), Switch)  # window
        assert isinstance(dialog.query_one("#field-3"), Select)  # meal
        await pilot.press("escape")  # Cancel: the dialog closes, nothing is answered
        await until(pilot, lambda: app.screen is screen)
        assert asking(runtime)

        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ElicitationDialog))
        dialog = app.screen
        assert isinstance(dialog, ElicitationDialog)
        dialog.query_one("#accept", Button).press()  # nothing typed: refused, field by field
        await until(pilot, lambda: "required" in str(dialog.query_one("#field-0-error")
                                                      .render()))
        assert isinstance(app.screen, ElicitationDialog) and asking(runtime)
        dialog.query_one("#field-0", Input).value = "Eve"
        dialog.query_one("#field-1", Input).value = "12"
        dialog.query_one("#accept", Button).press()
        await until(pilot, lambda: "at most 9" in str(dialog.query_one("#field-1-error")
                                                       .render()))
        assert "required" not in str(dialog.query_one("#field-0-error").render())
        dialog.query_one("#field-1", Input).value = "2"
        dialog.query_one("#field-2", Switch).value = True
        dialog.query_one("#field-3", Select).value = "fish"
        dialog.query_one("#accept", Button).press()
        done = await finished(process, timeout=30)
        assert json.loads(tool_result(done, "book").removeprefix("accept ")) == {
            "meal": "fish", "name": "Eve", "seats": 2, "window": True}
        await until(pilot, lambda: f"run {run_id[:8]}: answer accepted" in notes(app))


async def test_enter_on_the_feed_line_opens_the_question_and_dismiss_cancels() -> None:
    runtime = runtime_with_asking_process()
    process = runtime.get_process("p")
    app = make_app(runtime)
    async with running(app) as pilot:
        await until(pilot, lambda: process.state.value == "running", timeout=30,
                    what="running")
        await process.inject(TriggerEvent("t", "manual", {}))
        await until(pilot, lambda: asking(runtime), timeout=30, what="the server's question")
        run_id = process.waiting_runs()[0].run_id
        dashboard = app.screen
        assert isinstance(dashboard, DashboardScreen)
        feed = dashboard.feed

        def flagged() -> int | None:
            return next((i for i in range(feed.line_count)
                         if (item := feed.item_at(i)) is not None and item.run_id == run_id
                         and "asks the operator: book" in item.text), None)

        await until(pilot, lambda: flagged() is not None, what="the feed's line")
        await until(pilot, lambda: dashboard.table.row_count == 1)
        assert "1!" in screen_text(app)  # the process row flags its waiting run
        feed.focus()
        index = flagged()
        assert index is not None
        feed.move_cursor(index - feed.line_count)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ElicitationDialog), timeout=10)
        dialog: Any = app.screen
        assert dialog.detail["run_id"] == run_id
        dialog.query_one("#dismiss", Button).press()
        done = await finished(process, timeout=30)
        assert tool_result(done, "book") == "cancel"
        await until(pilot, lambda: f"run {run_id[:8]}: question dismissed" in notes(app))

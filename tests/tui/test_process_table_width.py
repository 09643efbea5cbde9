"""The process table uses the width it has: a long name in full on a wide terminal and cut with
an ellipsis at 80 columns (never silently), the sort column and direction in the header, and a
`/` filter that is still there when the box is opened again. Over the frozen scene."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from promptui.app import ControlRoom
from promptui.widgets.process_table import ProcessTable
from tests.helpers import scenes
from tests.helpers.polling import until
from tests.helpers.scenes import scene_app, summary

LONG_NAME = "health-checker-fork-eu-west-1-canary-042"  # 40 characters


@pytest.fixture
def long_name(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(LONG_NAME) == 40
    monkeypatch.setattr(scenes, "PROCESSES", [
        *scenes.PROCESSES, summary(LONG_NAME, "running", invocations=3)])


def lines(app: ControlRoom) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def header(app: ControlRoom) -> str:
    return next(line for line in lines(app) if "State" in line and "Queue" in line)


def row_line(app: ControlRoom, start: str) -> str:
    return next(line for line in lines(app) if line.startswith(f"│ {start}"))


async def pumped(app: ControlRoom, pilot: Pilot[Any]) -> ProcessTable:
    await pilot.pause()
    await app.pump()
    await app.pump()
    await pilot.pause()
    return app.screen.query_one(ProcessTable)


async def test_a_long_name_is_whole_at_160_columns(long_name: None) -> None:
    app = scene_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await pumped(app, pilot)
        line = row_line(app, "health-checker-")
        assert f"│ {LONG_NAME} running" in line  # whole, the next column right after it
        assert "…" not in line
        assert "│ alert-handler " in row_line(app, "alert-handler")


async def test_a_long_name_ends_in_an_ellipsis_at_80_columns(long_name: None) -> None:
    app = scene_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pumped(app, pilot)
        line = row_line(app, "health-checker-")
        assert LONG_NAME not in line
        name = line[2:].split(" ")[0]
        assert name.endswith("…") and LONG_NAME.startswith(name[:-1]) and len(name) >= 15
        assert "running" in line and line.rstrip().endswith("│")  # every column still fits
        for column in ("State", "Queue", "Done", "Dead", "Last"):
            assert column in header(app)


async def test_the_name_column_follows_the_names_and_the_terminal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = scene_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await pumped(app, pilot)
        assert "│ invoice-watcher suspended*" in row_line(app, "invoice-watcher")
        monkeypatch.setattr(scenes, "PROCESSES", [
            *scenes.PROCESSES, summary(LONG_NAME, "running")])  # a fork appears
        await pumped(app, pilot)
        assert f"│ {LONG_NAME} running" in row_line(app, "health-checker-")
        await pilot.resize_terminal(80, 24)
        await pumped(app, pilot)
        assert "…" in row_line(app, "health-checker-")
        await pilot.resize_terminal(160, 40)
        await pumped(app, pilot)
        assert f"│ {LONG_NAME} running" in row_line(app, "health-checker-")


async def test_the_header_shows_the_sort_column_and_direction() -> None:
    app = scene_app()
    async with app.run_test(size=(80, 24)) as pilot:
        table = await pumped(app, pilot)
        assert "▲" not in header(app) and "▼" not in header(app)  # the runtime's order
        await pilot.press("o")
        await until(pilot, lambda: "Process ▲" in header(app))
        assert table.sort_column == "name" and not table.sort_reverse
        await pilot.press("O")
        await until(pilot, lambda: "Process ▼" in header(app))
        assert "Process ▲" not in header(app)
        await pilot.press("o", "o", "o", "o")  # state, queue, runs, done
        await until(pilot, lambda: "Done▲" in header(app))
        assert "Process ▲" not in header(app) and "Process ▼" not in header(app)
        await pilot.press("O")
        await until(pilot, lambda: "Done▼" in header(app))
        names = [str(table.get_row_at(i)[0]).strip() for i in range(table.row_count)]
        done = {p.name: p.invocations for p in scenes.PROCESSES}
        assert [done[n] for n in names] == sorted(done.values(), reverse=True)


@pytest.mark.slow
async def test_slash_opens_the_filter_with_the_kept_text() -> None:
    app = scene_app()
    async with app.run_test(size=(80, 24)) as pilot:
        table = await pumped(app, pilot)
        await pilot.press("slash", *"flaky", "enter")
        await until(pilot, lambda: table.row_count == 1)
        assert table.has_focus
        await pilot.press("slash")
        box = app.screen.query_one("#filter", Input)
        assert box.display and box.has_focus and box.value == "flaky"
        await pilot.press(*"|looper")  # added to, not typed over
        await until(pilot, lambda: table.row_count == 2)
        assert box.value == "flaky|looper"
        await pilot.press("enter", "escape")  # esc still clears it
        await until(pilot, lambda: table.row_count == len(scenes.PROCESSES))
        assert box.value == "" and not box.display
        await pilot.press("slash")
        assert box.value == ""

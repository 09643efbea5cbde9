"""Snapshot tests of every screen at 80x24 and 120x40, from a frozen scene (fixed clock, seeded
data, pumped by hand). Update with ``pytest tests/tui/test_snapshots.py --snapshot-update`` and
review the diff report."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from tests.helpers.scenes import scene_app
from tests.helpers.snapshots import SIZES, opened, pumped

pytestmark = pytest.mark.usefixtures("utc")  # the scene's times read the same everywhere
THEMES = ["promptui-dark", "promptui-light", "promptui-terminal", "promptui-contrast"]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_dashboard(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped(), terminal_size=size)


@pytest.mark.parametrize("theme", THEMES)
def test_dashboard_in_each_theme(snap_compare: Any, theme: str) -> None:
    assert snap_compare(scene_app(theme=theme), run_before=pumped(), terminal_size=(120, 40))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_read_only_dashboard(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(read_only=True), run_before=pumped(), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_attached_dashboard_while_reconnecting(snap_compare: Any, size: tuple[int, int]) -> None:
    app = scene_app(link="reconnecting (12s): cannot reach 127.0.0.1:8765: connection refused")
    assert snap_compare(app, run_before=pumped(), terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_filtered_dashboard(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped("slash", *"!run"),
                        terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_confirm_stop_dialog(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped("s"), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_inject_dialog(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped("i"), terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped("question_mark"), terminal_size=size)


def test_too_small(snap_compare: Any) -> None:
    assert snap_compare(scene_app(), run_before=pumped(), terminal_size=(64, 18))


TABS = ["1", "2", "3", "4", "5", "6", "7", "8", "9"]


@pytest.mark.slow
@pytest.mark.parametrize("tab", TABS)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_process_tab(snap_compare: Any, size: tuple[int, int], tab: str) -> None:
    assert snap_compare(scene_app(), run_before=opened(tab), terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_dead_letters_with_marks(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=opened("3", "space", "down", "down", "space"),
                        terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_clear_dead_letters_confirm(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=opened("3", "x"), terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_reconcile_dialog(snap_compare: Any, size: tuple[int, int]) -> None:
    async def wait_dialog(pilot: Pilot[Any]) -> None:
        for _ in range(50):  # the dialog opens after an awaited control call
            if type(pilot.app.screen).__name__ == "ReconcileDialog":
                return
            await pilot.pause(0.01)

    async def go(pilot: Pilot[Any]) -> None:
        await opened("4", "enter")(pilot)
        await wait_dialog(pilot)

    assert snap_compare(scene_app(), run_before=go, terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_detail_help(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=opened("question_mark"), terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_pager_on_a_dead_letter(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=opened("3", "enter"), terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_pager_searching_a_run(snap_compare: Any, size: tuple[int, int]) -> None:
    keys = ("4", "v", "slash", *"customer", "enter", "n")
    assert snap_compare(scene_app(), run_before=opened(*keys), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_dashboard_sorted_by_done_descending(snap_compare: Any, size: tuple[int, int]) -> None:
    async def sort(pilot: Pilot[Any]) -> None:  # as o/O do, without their toasts
        table = pilot.app.screen.query_one("#processes")
        table.cycle_sort("invocations")  # type: ignore[attr-defined]
        table.cycle_sort("invocations")  # type: ignore[attr-defined]

    assert snap_compare(scene_app(), run_before=pumped(then=sort), terminal_size=size)


async def _until_screen(pilot: Pilot[Any], name: str) -> None:
    for _ in range(100):  # a screen that opens after an awaited control call
        if type(pilot.app.screen).__name__ == name:
            return
        await pilot.pause(0.01)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_redeliver_all_confirm(snap_compare: Any, size: tuple[int, int]) -> None:
    async def go(pilot: Pilot[Any]) -> None:
        await opened("3", "R")(pilot)
        await _until_screen(pilot, "ConfirmDialog")

    assert snap_compare(scene_app(), run_before=go, terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_live_tail(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped("L"), terminal_size=size)

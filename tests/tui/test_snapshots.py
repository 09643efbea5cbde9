"""Snapshot tests of every screen at 80x24 and 120x40, from a frozen scene (fixed clock, seeded
data, pumped by hand). Update with ``pytest tests/tui/test_snapshots.py --snapshot-update`` and
review the diff report."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from tests.tui.scenes import scene_app

SIZES = [(80, 24), (120, 40)]
THEMES = ["promptui-dark", "promptui-light", "promptui-terminal", "promptui-contrast"]


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


def pumped(*keys: str, then: Callable[[Pilot[Any]], Awaitable[None]] | None = None
           ) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """Pump the frozen scene twice, press ``keys``, pump again, freeze cursors."""

    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        await pilot.pause()
        await app.pump()  # type: ignore[attr-defined]
        await app.pump()  # type: ignore[attr-defined]
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
            await pilot.pause()
        if then is not None:
            await then(pilot)
        await app.pump()  # type: ignore[attr-defined]
        await pilot.pause()
        for widget in app.screen.query("Input, TextArea"):
            if isinstance(widget, Input | TextArea):
                widget.cursor_blink = False
        await pilot.pause()

    return run_before


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
def test_filtered_dashboard(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped("slash", *"!run"),
                        terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_confirm_stop_dialog(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped("s"), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_inject_dialog(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped("i"), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped("question_mark"), terminal_size=size)


def test_too_small(snap_compare: Any) -> None:
    assert snap_compare(scene_app(), run_before=pumped(), terminal_size=(64, 18))

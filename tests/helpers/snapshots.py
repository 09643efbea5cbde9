"""What drives the frozen scene (tests/helpers/scenes.py) before a snapshot or a check: the two
sizes, pumping it by hand, opening a process or its timeline, and the UTC zone its times show
in."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from promptui.screens.timeline import TimelineScreen
from tests.helpers.polling import until

SIZES = [(80, 24), (120, 40)]


@contextmanager
def utc_zone() -> Iterator[None]:
    """TZ=UTC while the block runs (the scene's times then read the same everywhere)."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
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


def opened(*keys: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """Open payments-sync (it has a waiting run, dead letters, context...) then press keys."""

    async def open_detail(pilot: Pilot[Any]) -> None:
        pilot.app.open_process("payments-sync")  # type: ignore[attr-defined]
        await pilot.pause()
        await pilot.app.pump()  # type: ignore[attr-defined]
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
            await pilot.pause()
            await pilot.app.pump()  # type: ignore[attr-defined]
            await pilot.pause()

    return pumped(then=open_detail)


async def open_timeline(pilot: Pilot[Any], process: str = "payments-sync") -> TimelineScreen:
    app = pilot.app
    app.open_process(process)  # type: ignore[attr-defined]
    await pilot.pause()
    await pilot.press("w")
    await until(pilot, lambda: isinstance(app.screen, TimelineScreen) and app.screen.loaded,
                what="the timeline's first page")
    assert isinstance(app.screen, TimelineScreen)
    return app.screen

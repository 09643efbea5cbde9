"""The incidents screen: snapshots of the frozen scene (80x24, 120x40), resolve and reopen with a
confirm that sends the generation and version on screen, a stale view refused and refreshed,
read-only refusals, and a round trip on a real runtime fed by a real webhook request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import httpx
import pytest
from textual.pilot import Pilot

from promptui.app import ControlRoom
from promptui.screens.dialogs import ConfirmDialog
from promptui.screens.incidents import IncidentsScreen
from runtime_core import AgentRuntime, ProcessConfig
from runtime_core.control import LocalControl
from tests.helpers.polling import until
from tests.helpers.room import notes
from tests.helpers.scenes import INCIDENTS, SceneControl, scene_app
from tests.helpers.snapshots import SIZES, pumped

pytestmark = pytest.mark.usefixtures("utc")  # the scene's times read the same everywhere


def incidents_open(*keys: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """From the dashboard: I, wait for the first read, then press ``keys``."""

    async def go(pilot: Pilot[Any]) -> None:
        app = pilot.app
        await pilot.press("I")
        await until(pilot, lambda: isinstance(app.screen, IncidentsScreen)
                    and app.screen.loaded, what="the incidents")
        if keys:
            await pilot.press(*keys)
            await pilot.pause()

    return pumped(then=go)


# -- snapshots ------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_incidents_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=incidents_open(), terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_resolve_incident_confirm(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=incidents_open("r"), terminal_size=size)


# -- behaviour against the frozen scene ------------------------------------------------------
async def open_screen(pilot: Pilot[Any]) -> IncidentsScreen:
    app = pilot.app
    await pilot.press("I")
    await until(pilot, lambda: isinstance(app.screen, IncidentsScreen) and app.screen.loaded)
    screen = app.screen
    assert isinstance(screen, IncidentsScreen)
    return screen


async def confirm(pilot: Pilot[Any]) -> None:
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the confirm")
    assert app.focused is not None and app.focused.id == "cancel"  # Enter does no harm
    await pilot.click("#confirm")


@pytest.mark.slow
async def test_resolve_sends_the_generation_and_version_on_screen() -> None:
    app = scene_app()
    control = app.control
    assert isinstance(control, SceneControl)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(pilot)
        assert screen.table.row_count == len(INCIDENTS)
        assert screen.current == INCIDENTS[0]
        assert app.current_process() == "alert-handler"  # s, p, i act on its process
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("escape")  # cancel: nothing sent
        await until(pilot, lambda: app.screen is screen)
        assert control.calls == []
        await pilot.press("r")
        await confirm(pilot)
        first = INCIDENTS[0]
        await until(pilot, lambda: bool(control.calls))
        assert control.calls == [("resolve_incident", ("alert-handler", first.incident_id,
                                                       first.generation, first.version, ""))]
        await until(pilot, lambda: any("resolved (generation 1, version 5)" in n
                                       for n in notes(app)), what="the answer")
        await pilot.press("escape")
        await until(pilot, lambda: type(app.screen).__name__ == "DashboardScreen")


@pytest.mark.slow
async def test_a_stale_view_is_refused_and_refreshed() -> None:
    app = scene_app()
    control = app.control
    assert isinstance(control, SceneControl)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(pilot)
        shown = screen.current
        assert shown is not None and shown.version == 4
        # Another occurrence lands after the operator looked.
        control.incident_list[0] = replace(INCIDENTS[0], version=5, occurrences=4)
        await pilot.press("r")
        await confirm(pilot)
        await until(pilot, lambda: any("changed since it was read" in n for n in notes(app)),
                    what="the refusal")
        refusal = next(n for n in notes(app) if "changed since it was read" in n)
        assert "version 5" in refusal and "version 4" in refusal
        await until(pilot, lambda: screen.current is not None
                    and screen.current.version == 5, what="the fresh view")
        assert "version 5" in str(screen.query_one("#incidents-detail").render())


@pytest.mark.slow
async def test_reopen_only_closed_incidents_and_read_only_refuses() -> None:
    app = scene_app()
    control = app.control
    assert isinstance(control, SceneControl)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_screen(pilot)
        await pilot.press("o")  # the first one is open
        await until(pilot, lambda: any("is open" in n for n in notes(app)))
        assert not isinstance(app.screen, ConfirmDialog)
        await pilot.press("down", "down")  # the recovered one
        assert screen.current == INCIDENTS[2]
        await pilot.press("r")
        await until(pilot, lambda: any("is recovered" in n for n in notes(app)))
        await pilot.press("o")
        await confirm(pilot)
        third = INCIDENTS[2]
        await until(pilot, lambda: bool(control.calls))
        assert control.calls == [("reopen_incident", ("health-checker", third.incident_id, 1,
                                                      3, ""))]
        await until(pilot, lambda: any("open (generation 2" in n for n in notes(app)))

    watcher = scene_app(read_only=True)
    async with watcher.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot)
        await pilot.press("r")
        await until(pilot, lambda: any("read-only: resolve is disabled" in n
                                       for n in notes(watcher)))
        assert not isinstance(watcher.screen, ConfirmDialog)


@pytest.mark.slow
async def test_a_real_webhook_incident_is_resolved_from_the_screen() -> None:
    runtime = AgentRuntime()
    process = runtime.add_process("alerts", ProcessConfig(
        model={"turns": [{"reply": "paged"}]},
        triggers=[{"type": "webhook", "webhook_port": 0, "webhook_path": "/alerts"}],
        incidents={"fingerprint": "payload.alert"},
        journal={"level": "checkpoint", "backend": "memory"}))
    control = LocalControl(runtime, name="t")
    app = ControlRoom(control, refresh_hz=20)
    app.animation_level = "none"
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: process.state.value == "running", what="alerts running")
        url = f"http://127.0.0.1:{process.status()['triggers'][0]['port']}/alerts"
        async with httpx.AsyncClient(trust_env=False) as client:
            for host in ("db-1", "db-2"):
                answer = await client.post(url, json={"alert": "disk full", "host": host})
                assert answer.status_code == 202
        await until(pilot, lambda: process.invocation_count == 1, what="the one run")
        screen = await open_screen(pilot)
        await until(pilot, lambda: screen.current is not None
                    and screen.current.occurrences == 2 and bool(screen.current.run_ids),
                    what="the incident with its run")
        await pilot.press("r")
        await confirm(pilot)
        await until(pilot, lambda: process.incidents()[0].state == "resolved",
                    what="the resolve")
        await until(pilot, lambda: screen.current is not None
                    and screen.current.state == "resolved", what="the screen to show it")
        assert process.invocation_count == 1
        await pilot.press("q")

"""The rewind timeline: snapshots of the timeline and of the rewind preview in each mode (frozen
scene), paging, filters and the dialogs against the scene, and a preview / cancel / apply
round trip against a real runtime with a SQLite journal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, Input

from promptui.app import ControlRoom
from promptui.screens.dialogs import AskDialog
from promptui.screens.rewind_dialog import RewindPreview
from promptui.screens.timeline import PAGE, TYPE_FILTERS, TimelineScreen, parse_when
from runtime_core import AgentRuntime, ProcessConfig, ToolContext, TriggerEvent
from runtime_core.control import LocalControl
from tests.helpers.polling import until
from tests.helpers.scenes import NOW, REWIND_SEQ, SceneControl, scene_app
from tests.helpers.snapshots import SIZES, open_timeline, pumped

pytestmark = pytest.mark.usefixtures("utc")  # the scene's times read the same everywhere

MODES = ["both", "conversation_only", "code_only", "summarize", "cancel"]
MODE_KEYS = dict(zip(MODES, "12345", strict=True))


async def settle(pilot: Pilot[Any], ready: Callable[[], bool]) -> None:
    """Workers answer the frozen scene at once; give them a bounded number of turns."""
    for _ in range(200):
        if ready():
            return
        await pilot.pause(0.01)
    pytest.fail("the screen never got its data")


def timeline(*keys: str, preview: bool = False) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """Open payments-sync, its timeline (w), press ``keys``; ``preview``: wait for the plan."""

    async def go(pilot: Pilot[Any]) -> None:
        app = pilot.app
        app.open_process("payments-sync")  # type: ignore[attr-defined]
        await pilot.pause()
        await pilot.press("w")
        await settle(pilot, lambda: isinstance(app.screen, TimelineScreen)
                     and app.screen.loaded)
        if keys:
            await pilot.press(*keys)
        if preview:
            await settle(pilot, lambda: isinstance(app.screen, RewindPreview)
                         and app.screen.plan is not None)
        await pilot.pause()

    return pumped(then=go)


# -- snapshots ------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_timeline(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=timeline(), terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_rewind_preview(snap_compare: Any, size: tuple[int, int], mode: str) -> None:
    keys = ["down"] * 7 + ["p", MODE_KEYS[mode]]  # entry #53, just after the rewind entry
    assert snap_compare(scene_app(), run_before=timeline(*keys, preview=True),
                        terminal_size=size)


@pytest.mark.slow
def test_read_only_preview(snap_compare: Any) -> None:
    assert snap_compare(scene_app(read_only=True), run_before=timeline("p", preview=True),
                        terminal_size=(80, 24))


# -- behaviour against the frozen scene ------------------------------------------------------
@pytest.mark.slow
async def test_w_on_the_dashboard_opens_the_selected_process_timeline() -> None:
    """As the docs say: `w` on a process opens its timeline, from the dashboard as from its
    detail screen."""
    app = scene_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        # the frozen scene is pumped by hand
        await app.pump()  # type: ignore[attr-defined]
        await pilot.pause()
        dashboard = app.screen
        dashboard.show_process("payments-sync")  # type: ignore[attr-defined]
        await pilot.pause()
        await pilot.press("w")
        await settle(pilot, lambda: isinstance(app.screen, TimelineScreen) and app.screen.loaded)
        assert isinstance(app.screen, TimelineScreen) and app.screen.process == "payments-sync"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is dashboard, what="back to the dashboard")


@pytest.mark.slow
async def test_a_long_journal_is_read_a_page_at_a_time() -> None:
    app = scene_app(journal_size=100_000)
    control = app.control
    assert isinstance(control, SceneControl)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_timeline(pilot)
        assert len(screen.table.entries) == PAGE and len(control.reads) == 1
        assert screen.table.entries[0].seq == 100_000
        await pilot.press("end")  # the cursor nears the end: the next page comes
        await until(pilot, lambda: len(screen.table.entries) >= 2 * PAGE, what="page 2")
        assert control.reads[1]["before_seq"] == 100_000 - PAGE + 1
        assert len(screen.table.entries) < 5 * PAGE  # never everything
        await pilot.press("home")
        assert screen.table.current is not None and screen.table.current.seq == 100_000


@pytest.mark.slow
async def test_filters_reach_the_journal_query() -> None:
    app = scene_app()
    control = app.control
    assert isinstance(control, SceneControl)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_timeline(pilot)
        await pilot.press("T")  # the first type in the cycle
        await until(pilot, lambda: control.reads[-1]["entry_type"] == "run_finished"
                    and all(e.entry_type == "run_finished" for e in screen.table.entries))
        for _ in range(5):
            await pilot.press("T")
        await until(pilot, lambda: [e.seq for e in screen.table.entries] == [REWIND_SEQ],
                    what="only the rewind entry")
        await pilot.press(*["T"] * (len(TYPE_FILTERS) - 6))  # past the last: every type again
        await until(pilot, lambda: control.reads[-1]["entry_type"] is None)
        await pilot.press("slash", *"charged")
        await until(pilot, lambda: control.reads[-1]["text"] == "charged"
                    and bool(screen.table.entries)
                    and all("charged" in e.summary.lower() for e in screen.table.entries))
        await pilot.press("enter", "g")  # keep the filter; go to a time
        await until(pilot, lambda: isinstance(app.screen, AskDialog))
        box = app.screen.query_one(Input)
        box.value = "20:10"
        await pilot.press("enter")
        await until(pilot, lambda: control.reads[-1]["at_or_before"] is not None)
        assert all(e.timestamp <= control.reads[-1]["at_or_before"]
                   for e in screen.table.entries)
        await pilot.press("n")  # back to the newest
        await until(pilot, lambda: control.reads[-1]["at_or_before"] is None)


def test_times_are_read_today_or_as_iso() -> None:
    assert parse_when("20:00", NOW) == NOW - 26 * 60 - 40
    assert parse_when("21:00:00", NOW) == NOW - 86400 + 33 * 60 + 20  # still to come: yesterday
    assert parse_when("2026-05-28T20:26:40+00:00", NOW) == NOW
    assert parse_when("soon", NOW) is None


@pytest.mark.slow
async def test_an_irreversible_plan_needs_the_name_and_cancel_changes_nothing() -> None:
    app = scene_app()
    control = app.control
    assert isinstance(control, SceneControl)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_timeline(pilot)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, RewindPreview)
                    and app.screen.plan is not None)
        dialog = app.screen
        assert isinstance(dialog, RewindPreview)
        apply = dialog.query_one("#apply", Button)
        assert dialog.focused is dialog.query_one("#cancel", Button)
        await pilot.press("y")  # an irreversible plan: y does not apply
        assert app.screen is dialog and apply.disabled
        await pilot.press("5")  # cancel: preview only
        await until(pilot, lambda: dialog.mode == "cancel" and dialog.plan is not None)
        dialog.query_one("#rewind-confirm", Input).value = "payments-sync"
        await pilot.pause()
        assert apply.disabled
        await pilot.press("2")
        await until(pilot, lambda: dialog.plan is not None
                    and dialog.plan.mode.value == "conversation_only")
        await pilot.pause()
        assert not apply.disabled
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, TimelineScreen))
        assert control.calls == []
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, RewindPreview)
                    and app.screen.plan is not None)
        dialog = app.screen
        assert isinstance(dialog, RewindPreview)
        await pilot.press("3")
        await until(pilot, lambda: dialog.plan is not None
                    and dialog.plan.mode.value == "code_only")
        dialog.query_one("#rewind-confirm", Input).value = "payments-sync"
        await pilot.pause()
        await pilot.click("#apply")
        await until(pilot, lambda: control.calls != [], what="the rewind command")
        assert control.calls == [("rewind", ("payments-sync", "payments-sync:60", "code_only"))]


@pytest.mark.slow
async def test_read_only_shows_the_plan_but_never_applies() -> None:
    app = scene_app(read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_timeline(pilot)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, RewindPreview)
                    and app.screen.plan is not None)
        dialog = app.screen
        assert dialog.query_one("#apply", Button).disabled
        assert not dialog.query_one("#rewind-confirm", Input).display
        await pilot.press("y", "escape", "f")
        assert isinstance(app.screen, TimelineScreen)  # no fork dialog either


@pytest.mark.slow
async def test_fork_asks_for_a_name() -> None:
    app = scene_app()
    control = app.control
    assert isinstance(control, SceneControl)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_timeline(pilot)
        await pilot.press("down", "f")
        await until(pilot, lambda: isinstance(app.screen, AskDialog))
        assert app.screen.query_one(Input).value == "payments-sync-fork"
        await pilot.press("enter")
        await until(pilot, lambda: control.calls != [])
        assert control.calls == [("fork", ("payments-sync", "payments-sync:59",
                                           "payments-sync-fork"))]
        await until(pilot, lambda: any("payments-sync-fork" in str(n.message)
                                       for n in app._notifications))


# -- a real runtime: preview, cancel, preview, apply ------------------------------------------
def book(ctx: ToolContext) -> int:
    booked = int(ctx.get("booked", 0)) + 1
    ctx.set("booked", booked)
    return booked


def booking_runtime(tmp_path: Path) -> AgentRuntime:
    runtime = AgentRuntime()
    runtime.add_process("booker", ProcessConfig(
        model={"provider": "scripted", "turns": [{"tool_calls": [{"name": "book"}]},
                                                 {"reply": "booked"}]},
        journal={"level": "checkpoint", "backend": "sqlite", "path": str(tmp_path / "j.db")},
    ), tools=[book])  # undeclared: a write, so the plan lists it as an outside effect
    return runtime


@pytest.mark.slow
async def test_preview_cancel_then_apply_on_a_real_runtime(tmp_path: Path) -> None:
    runtime = booking_runtime(tmp_path)
    control = LocalControl(runtime, name="t")
    app = ControlRoom(control, refresh_hz=20)
    app.animation_level = "none"
    process = runtime.get_process("booker")
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: process.state.value == "running", what="booker running")
        for n in (1, 2):
            await process.inject(TriggerEvent("t", "manual", {}))
            await until(pilot, lambda n=n: process.context.get("booked") == n,  # type: ignore[misc]
                        what=f"booking {n}")
        await until(pilot, lambda: not process.active_runs(), what="the run to finish")
        screen = await open_timeline(pilot, "booker")
        # each run's start rides in its first intent (schema 9): "run started · write book()"
        starts = [i for i, e in enumerate(screen.table.entries)
                  if e.entry_type == "run_started" or e.summary.startswith("run started")]
        assert len(starts) == 2
        screen.table.move_cursor(row=starts[0], animate=False)  # the second run's start
        await pilot.pause()

        async def preview() -> RewindPreview:
            await pilot.press("p")
            await until(pilot, lambda: isinstance(app.screen, RewindPreview)
                        and app.screen.plan is not None, what="the plan")
            assert isinstance(app.screen, RewindPreview)
            return app.screen

        dialog = await preview()
        plan = dialog.plan
        assert plan is not None and plan.irreversible
        assert [fx.tool for fx in plan.outside_effects] == ["book"]
        assert any(c.key == "booked" and c.before == 2 and c.after == 1
                   for c in plan.context_changes)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        assert process.context.get("booked") == 2
        assert await control.journal_entries("booker", entry_type="rewind") == []

        dialog = await preview()
        assert app.focused is not None and app.focused.id == "cancel"
        await pilot.press(*"booker")  # keyboard only: typing goes to the confirmation box
        await until(pilot, lambda: not dialog.query_one("#apply", Button).disabled)
        await pilot.press("enter")
        await until(pilot, lambda: process.context.get("booked") == 1, what="the rewind")
        rewinds = await control.journal_entries("booker", entry_type="rewind")
        assert len(rewinds) == 1
        # On top (only a checkpoint and the resume may follow it), with its marker.
        await until(pilot, lambda: any(e.entry_type == "rewind"
                                       for e in screen.table.entries[:4]),
                    what=f"the rewind entry on top: {screen.table.entries[:4]}")
        row = next(i for i, e in enumerate(screen.table.entries) if e.entry_type == "rewind")
        assert screen.table.get_row_at(row)[2].plain.startswith("⟲")
        await pilot.press("q")


@pytest.mark.slow
async def test_the_timeline_tab_shows_the_newest_entries_and_opens_the_screen() -> None:
    from promptui.screens.detail import TIMELINE_ROWS, ProcessDetailScreen

    app = scene_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_process("payments-sync")
        await until(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
        detail = app.screen
        assert isinstance(detail, ProcessDetailScreen)
        await pilot.press("9")
        await until(pilot, lambda: detail.table("timeline").row_count == TIMELINE_ROWS)
        assert str(detail.table("timeline").get_row_at(0)[1]) == "60"  # newest first
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TimelineScreen))
        await pilot.press("q")

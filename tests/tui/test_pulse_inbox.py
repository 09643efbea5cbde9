"""Pulse (the last hour's charts), the fleet inbox (every dead letter and waiting run, marks
across processes) and alerts (the bell and "new since you last looked"), driven by Pilot over
the frozen scene, plus snapshots of both screens at 80x24 and 120x40."""

from __future__ import annotations

from typing import Any

import pytest

from promptui.app import ControlRoom
from promptui.screens.dashboard import DashboardScreen
from promptui.screens.detail import ProcessDetailScreen
from promptui.screens.dialogs import ConfirmDialog, ReconcileDialog
from promptui.screens.inbox import InboxScreen
from promptui.screens.pulse import PulseScreen
from promptui.store import UIStore
from promptui.widgets.charts import ALL
from promptui.widgets.feeds import AnomalyFeed
from promptui.widgets.header import StatusHeader
from runtime_core.events import RunFinished, RunStep
from tests.helpers.polling import until
from tests.helpers.room import notes, screen_text
from tests.helpers.scenes import NOW, PROCESSES, SceneControl, scene_app, scene_pulse
from tests.helpers.snapshots import SIZES, pumped

pytestmark = pytest.mark.usefixtures("utc")


async def _pump(app: ControlRoom, pilot: Any) -> None:
    await pilot.pause()
    await app.pump()
    await pilot.pause()


def _control(app: ControlRoom) -> SceneControl:
    assert isinstance(app.control, SceneControl)
    return app.control


# -- Pulse -------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_pulse_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped("P"), terminal_size=size)


async def test_pulse_reads_the_hour_from_the_journal_and_opens_a_process() -> None:
    app = scene_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _pump(app, pilot)
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, PulseScreen) and app.screen.loaded)
        screen = app.screen
        assert isinstance(screen, PulseScreen)
        await _pump(app, pilot)
        expected = sum(sum(scene_pulse(row.name, i).runs) for i, row in enumerate(PROCESSES))
        every = app.store.pulse_of(PROCESSES[0].name)
        assert sum(every.view(NOW).runs) == sum(scene_pulse(PROCESSES[0].name, 0).runs)
        assert [item.name for item in screen.rows.children] == \
            [ALL, *sorted(row.name for row in PROCESSES)]
        text = screen_text(app)
        assert "runs/min" in text and "p95" in text and "tokens" in text
        assert "cost: not recorded" in text
        assert expected > 0
        await pilot.press("down", "enter")  # the first process under the all row
        await until(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
        assert app.screen.current_process() == sorted(r.name for r in PROCESSES)[0]
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, PulseScreen))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))


async def test_pulse_shows_only_the_essentials_at_80_columns() -> None:
    app = scene_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _pump(app, pilot)
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, PulseScreen) and app.screen.loaded)
        await _pump(app, pilot)
        text = screen_text(app)
        assert "runs/min" in text and "failed" in text and "p95" in text and "queue" in text
        assert "tokens" not in text


def test_the_store_folds_live_runs_and_tokens_into_the_minute() -> None:
    store = UIStore()
    store.ingest([RunFinished(process="w", timestamp=NOW - 1, run_id="r1", event_id="e1",
                              state="succeeded", duration_ms=200.0),
                  RunFinished(process="w", timestamp=NOW - 1, run_id="r2", event_id="e2",
                              state="failed", duration_ms=900.0),
                  RunStep(process="w", timestamp=NOW - 1, run_id="r1", step=1,
                          step_kind="model", input_tokens=30, output_tokens=12)], NOW, 0.1)
    view = store.pulse_of("w").view(NOW)
    assert (view.runs[-1], view.failures[-1], view.tokens[-1]) == (2, 1, 42)
    assert view.p95_ms[-1] == 900.0


# -- the fleet inbox ---------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_inbox_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(scene_app(), run_before=pumped("B"), terminal_size=size)


async def _inbox(app: ControlRoom, pilot: Any) -> InboxScreen:
    await _pump(app, pilot)
    await pilot.press("B")
    await until(pilot, lambda: isinstance(app.screen, InboxScreen))
    await _pump(app, pilot)
    screen = app.screen
    assert isinstance(screen, InboxScreen)
    await until(pilot, lambda: screen.loaded and screen.table.row_count > 0)
    return screen


async def test_inbox_lists_every_process_and_filters() -> None:
    app = scene_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _inbox(app, pilot)
        kinds = {(item.kind, item.process) for item in screen.items}
        assert ("waiting", "payments-sync") in kinds
        assert {p for k, p in kinds if k == "dead"} == {"flaky-deployer", "looper",
                                                        "report-builder"}
        times = [item.at for item in screen.items]
        assert times == sorted(times, reverse=True)  # newest first
        await pilot.press("slash", *"payments", "enter")
        await until(pilot, lambda: [i.process for i in screen.items] == ["payments-sync"])
        await pilot.press("escape")  # clears the filter first
        await until(pilot, lambda: len(screen.items) > 1)
        assert isinstance(app.screen, InboxScreen)


async def test_marks_across_processes_ask_first_then_redeliver_each() -> None:
    app = scene_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _inbox(app, pilot)
        dead = [i for i in screen.items if i.kind == "dead"]
        first = next(i for i in dead if i.process == "flaky-deployer")
        second = next(i for i in dead if i.process == "looper")
        for item in (first, second):
            screen.table.move_cursor(row=screen.table.keys.index(item.key))
            await pilot.press("space")
        assert screen.marked == {first.key, second.key}
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert dialog.title_text == ("Redeliver 2 dead letters of 2 processes "
                                     "(flaky-deployer, looper)?")
        assert _control(app).calls == []  # nothing before the answer
        await pilot.click("#confirm")
        await until(pilot, lambda: len(_control(app).calls) == 2)
        assert sorted(_control(app).calls) == [
            ("redeliver", ("flaky-deployer", [first.ident])),
            ("redeliver", ("looper", [second.ident]))]


async def test_enter_on_a_waiting_run_opens_the_reconcile_dialog() -> None:
    app = scene_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _inbox(app, pilot)
        waiting = next(i for i in screen.items if i.kind == "waiting")
        screen.table.move_cursor(row=screen.table.keys.index(waiting.key))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ReconcileDialog))


async def test_a_read_only_inbox_refuses_redeliver_and_reconcile() -> None:
    app = scene_app(read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _inbox(app, pilot)
        await pilot.press("R")
        await until(pilot, lambda: any("read-only" in n for n in notes(app)))
        assert isinstance(app.screen, InboxScreen) and _control(app).calls == []
        waiting = next(i for i in screen.items if i.kind == "waiting")
        screen.table.move_cursor(row=screen.table.keys.index(waiting.key))
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, InboxScreen)


# -- alerts ------------------------------------------------------------------------------------
def _header(app: ControlRoom) -> str:
    return str(app.screen.query_one(StatusHeader).render())


async def test_new_alerts_ring_once_and_show_until_the_operator_looks() -> None:
    app = scene_app()  # its events hold health anomalies and a waiting run
    async with app.run_test(size=(120, 40)) as pilot:
        await _pump(app, pilot)
        assert app.bells == 1  # a burst rings once
        assert app.store.unseen_alerts > 0
        await _pump(app, pilot)
        assert "new" in _header(app)
        app.screen.query_one(AnomalyFeed).focus()
        await until(pilot, lambda: app.store.unseen_alerts == 0)
        await _pump(app, pilot)
        assert "⚑" not in _header(app)


async def test_the_bell_setting_turns_it_off_and_opening_the_inbox_counts_as_looking() -> None:
    app = scene_app()
    app.bell_on = False
    async with app.run_test(size=(120, 40)) as pilot:
        await _pump(app, pilot)
        assert app.bells == 0 and app.store.unseen_alerts > 0
        await pilot.press("B")
        await until(pilot, lambda: app.store.unseen_alerts == 0)

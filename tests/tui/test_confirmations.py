"""One rule for confirmations in the room (issue 18): a bulk or irreversible action asks, with
Cancel focused, and says what it will do; an action whose outside effects cannot be undone asks
for the process name. Driven by Pilot: R and x on dead letters, q with runs in flight (embedded
only: attached, q just detaches), and `y` in the rewind preview once the name is typed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from textual.widgets import Button, Input

from promptui.app import ControlRoom
from promptui.screens.dialogs import ChoiceDialog, ConfirmDialog
from promptui.screens.rewind_dialog import RewindPreview
from promptui.widgets.header import StatusHeader
from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.agent.tools import tool
from runtime_core.control import LocalControl
from tests.helpers.polling import until
from tests.helpers.room import (
    dead_letters,
    make_app,
    make_runtime,
    notes,
    open_detail,
    queued_ids,
    select,
)
from tests.helpers.scenes import SceneControl, scene_app
from tests.helpers.snapshots import open_timeline


# -- R and x: bulk dead-letter actions say how many ------------------------------------------
@pytest.mark.slow
async def test_R_asks_how_many_and_how_many_distinct_payloads() -> None:
    runtime = make_runtime()
    app = make_app(runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        process = runtime.get_process("worker")
        await until(pilot, lambda: process.state.value == "running", what="worker running")
        for i in range(5):  # five letters, two payloads: a poison event repeated
            await process.inject(TriggerEvent("t", "fail", {"n": i % 2}, event_id=f"dead-{i}"))
        await until(pilot, lambda: len(process.dead_letters) == 5, what="dead letters")
        await process.suspend("operator")  # redelivered events wait in the queue
        screen = await open_detail(app, pilot, "worker")
        await pilot.press("3")
        await until(pilot, lambda: screen.table("dead").row_count == 5)
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert dialog.title_text == "Redeliver 5 dead letters (2 distinct payloads)?"
        assert "worker" in dialog.body
        assert app.focused is not None and app.focused.id == "cancel"
        await pilot.press("enter")  # Enter on Cancel: nothing is redelivered
        await until(pilot, lambda: app.screen is screen)
        assert queued_ids(runtime) == [] and len(process.dead_letters) == 5
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.click("#confirm")
        await until(pilot, lambda: len(queued_ids(runtime)) == 5, what="all five queued")
        assert not process.dead_letters
        await until(pilot, lambda: "5 redelivered to worker" in notes(app))


@pytest.mark.slow
async def test_x_says_how_many_go_and_that_they_cannot_come_back() -> None:
    runtime = make_runtime()
    app = make_app(runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        ids = await dead_letters(runtime, pilot, 3)
        screen = await open_detail(app, pilot, "worker")
        await pilot.press("3")
        await until(pilot, lambda: screen.table("dead").keys == ids)
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert dialog.title_text == "Clear 3 dead letters of worker?"
        assert "All 3" in dialog.body and "cannot be redelivered after" in dialog.body
        assert app.focused is not None and app.focused.id == "cancel"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        assert len(runtime.get_process("worker").dead_letters) == 3


# -- q: quitting an embedded room stops its agents ------------------------------------------
def blocked_runtime(release: asyncio.Event) -> AgentRuntime:
    """Two processes whose runs wait (in a write tool) until the test releases them."""

    async def deploy() -> str:
        """A write that waits for the test."""
        await release.wait()
        return "deployed"

    runtime = AgentRuntime()
    for name in ("deployer", "shipper"):
        runtime.add_process(name, ProcessConfig(model={"provider": "scripted", "turns": [
            {"tool_calls": [{"name": "deploy"}]}, {"reply": "ok"}]}), tools=[tool(deploy)])
    return runtime


async def in_flight(app: ControlRoom, pilot: Any, runtime: AgentRuntime) -> None:
    for name in ("deployer", "shipper"):
        process = runtime.get_process(name)
        await until(pilot, lambda p=process: p.state.value == "running",  # type: ignore[misc]
                    what=f"{name} running")
        await process.inject(TriggerEvent("t", "manual", {}))
    await until(pilot, lambda: sum(r.active_runs for r in app.store.processes.values()) == 2,
                what="two runs in flight")


async def test_q_with_runs_in_flight_asks_and_cancel_keeps_them_running() -> None:
    release = asyncio.Event()
    runtime = blocked_runtime(release)
    app = ControlRoom(LocalControl(runtime, name="t"), refresh_hz=20)
    async with app.run_test(size=(80, 24)) as pilot:
        await in_flight(app, pilot, runtime)
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ChoiceDialog))
        dialog = app.screen
        assert isinstance(dialog, ChoiceDialog)
        assert dialog.title_text == "Quit? 2 run(s) in flight in 2 process(es)"
        assert [label for _, label in dialog.choices] == ["Drain, then quit", "Quit now"]
        assert app.focused is not None and app.focused.id == "cancel"
        await pilot.press("enter")  # Cancel
        await until(pilot, lambda: not isinstance(app.screen, ChoiceDialog))
        assert not app.runtime_closed
        assert all(p.state.value == "running" for p in runtime.processes.values())
        assert sum(len(p.active_runs()) for p in runtime.processes.values()) == 2
        release.set()


async def test_drain_then_quit_lets_the_runs_finish_first() -> None:
    release = asyncio.Event()
    runtime = blocked_runtime(release)
    app = ControlRoom(LocalControl(runtime, name="t"), refresh_hz=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await in_flight(app, pilot, runtime)
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ChoiceDialog))
        app.screen.query_one("#choice-drain", Button).press()
        await until(pilot, lambda: not isinstance(app.screen, ChoiceDialog))
        await until(pilot, lambda: "draining 2 run(s)" in str(
            app.screen.query_one(StatusHeader).render()), what="the header's drain badge")
        assert not app.runtime_closed  # still draining: the room stays up
        release.set()
        await until(pilot, lambda: app.return_code is not None, what="the room to close")
    for process in runtime.processes.values():
        assert process.state.value == "stopped"
        assert [r.state.value for r in process.recent_runs()] == ["succeeded"]


async def test_quit_now_cancels_the_runs_in_flight() -> None:
    release = asyncio.Event()
    runtime = blocked_runtime(release)
    app = ControlRoom(LocalControl(runtime, name="t"), refresh_hz=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await in_flight(app, pilot, runtime)
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ChoiceDialog))
        app.screen.query_one("#choice-now", Button).press()
        await until(pilot, lambda: app.return_code is not None, what="the room to close")
    assert all(p.state.value == "stopped" for p in runtime.processes.values())
    assert not any(r.state.value == "succeeded" for p in runtime.processes.values()
                   for r in p.recent_runs())


async def test_attached_q_detaches_without_asking() -> None:
    app = scene_app()  # not embedded: its alert-handler has a run in flight
    assert isinstance(app.control, SceneControl)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.pump()
        assert any(r.active_runs for r in app.store.processes.values())
        await pilot.press("q")
        await until(pilot, lambda: app.return_code is not None, what="the room to close")
        assert not isinstance(app.screen, ChoiceDialog)


# -- the rewind preview: y applies once the name is typed ------------------------------------
@pytest.mark.slow
async def test_y_applies_an_irreversible_rewind_once_the_name_is_typed() -> None:
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
        assert dialog.focused is dialog.query_one("#cancel", Button)
        await pilot.press("y")  # no name yet: nothing happens
        assert app.screen is dialog and control.calls == []
        # Typed with Cancel focused; the name has a y in it, which types, not applies.
        await pilot.press(*"payments-sync")
        box = dialog.query_one("#rewind-confirm", Input)
        apply = dialog.query_one("#apply", Button)
        await until(pilot, lambda: box.value == "payments-sync", what="the name typed")
        assert control.calls == []
        assert not apply.disabled and dialog.focused is apply  # the name is the key to it
        await pilot.press("y")
        await until(pilot, lambda: control.calls != [], what="the rewind command")
        assert control.calls == [("rewind", ("payments-sync", "payments-sync:60", "both"))]
        assert box.value == "payments-sync"  # the y applied; it was not typed


# -- a health-paused process: resume, or resume and watch again ------------------------------------
@pytest.mark.parametrize(("choice", "expected"), [
    ("#choice-resume", ("resume", ("looper",))),
    ("#choice-watch", ("resume", ("looper", "watch_again"))),
])
async def test_p_on_a_health_paused_process_asks_resume_or_resume_and_watch_again(
        choice: str, expected: tuple[str, tuple[str, ...]]) -> None:
    app = scene_app()  # its looper is suspended by health
    control = app.control
    assert isinstance(control, SceneControl)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.pump()
        await select(app, pilot, "looper")
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the question")
        assert "health monitor paused it" in str(app.screen.query_one(".dialog-title").render())
        assert control.calls == []  # nothing yet: it asks first
        await pilot.click(choice)
        await until(pilot, lambda: control.calls != [], what="the resume command")
        assert control.calls == [expected]

"""The control room under Pilot: a room over a runtime, the keys an operator types, and what
the screen shows (rows, notifications, text)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from textual import events
from textual.pilot import Pilot

from promptui.app import ControlRoom
from promptui.cli.options import BUNDLED_DEMO, load_runtime
from promptui.screens.dashboard import DashboardScreen
from promptui.screens.detail import ProcessDetailScreen
from promptui.themes import load_themes
from promptui.widgets.process_table import ProcessTable
from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent, tool
from runtime_core.control import LocalControl
from tests.helpers.polling import until

#: The bundled demo's processes, as the table lists them.
DEMO = ["alert-handler", "changelog", "demo-feeder", "flaky-deployer", "health-checker",
        "invoice-watcher", "looper"]


def load_demo(folder: Path) -> AgentRuntime:
    """The bundled demo as a real runtime, its journal in ``folder`` (the caller points
    PROMPTUI_DEMO_DIR and PROMPTUI_DEMO_WEBHOOK_PORT somewhere safe first)."""
    runtime, _ = load_runtime([BUNDLED_DEMO], journal=folder / "journal.db")
    return runtime


# -- a room over the demo ------------------------------------------------------------------------
def demo_app(runtime: AgentRuntime, **kwargs: Any) -> ControlRoom:
    """The room as ``promptui demo`` opens it: the bundled themes, its control named "demo"."""
    read_only = kwargs.pop("read_only", False)
    themes, _ = load_themes(None)
    return ControlRoom(LocalControl(runtime, name="demo", read_only=read_only),
                       refresh_hz=20, themes=themes, **kwargs)


def table_of(app: ControlRoom) -> ProcessTable:
    dashboard = next(s for s in app.screen_stack if isinstance(s, DashboardScreen))
    return dashboard.query_one(ProcessTable)


def rows(app: ControlRoom) -> list[str]:
    table = table_of(app)
    return [str(table.get_row_at(i)[0]).strip() for i in range(table.row_count)]


async def select(app: ControlRoom, pilot: Any, name: str) -> None:
    table = app.screen.query_one(ProcessTable)
    table.select(name)
    await until(pilot, lambda: table.selected_name == name)


# -- a room over one worker process -------------------------------------------------------------
FAIL = "boom: the upstream API said no"


async def lookup(city: str) -> str:
    return f"sunny in {city}"


def worker_config(**extra: Any) -> ProcessConfig:
    """Manual events reply after one tool call; "fail" events raise (one attempt: a dead
    letter at once)."""
    return ProcessConfig(
        model={"provider": "scripted", "scripts": {"fail": [{"raise": FAIL}]}, "turns": [
            {"tool_calls": [{"name": "lookup", "args": {"city": "$payload.city"}}]},
            {"reply": "it is sunny"}]},
        trigger_delivery={"max_retries": 0}, max_consecutive_failures=100,
        context={"initial_state": {"region": "north", "limits": {"cities": 3}}},
        **extra)


def make_runtime(**extra: Any) -> AgentRuntime:
    runtime = AgentRuntime()
    runtime.add_process("worker", worker_config(**extra), tools=[tool(lookup, effect="read")])
    return runtime


def make_app(runtime: AgentRuntime, *, read_only: bool = False) -> ControlRoom:
    """The room over ``runtime`` (its control named "t"), animations off."""
    app = ControlRoom(LocalControl(runtime, name="t", read_only=read_only), refresh_hz=20)
    app.animation_level = "none"  # Pilot waits for the tab underline to glide otherwise
    return app


@asynccontextmanager
async def running(app: ControlRoom,
                  size: tuple[int, int] = (120, 40)) -> AsyncIterator[Pilot[Any]]:
    async with app.run_test(size=size) as pilot:
        yield pilot
        # Quit as an operator does: the pump and the runtime stop before the screens go.
        await pilot.press("q")


def notes(app: ControlRoom) -> list[str]:
    return [str(n.message) for n in app._notifications]


def screen_text(app: ControlRoom) -> str:
    """What the terminal shows, as plain lines (checks that nothing essential is cut off)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def plain(renderable: Any, width: int = 100) -> str:
    out = io.StringIO()
    Console(width=width, file=out, color_system=None).print(renderable)
    return out.getvalue()


async def open_detail(app: ControlRoom, pilot: Pilot[Any], name: str) -> ProcessDetailScreen:
    await until(pilot, lambda: name in app.store.processes, what="the process row")
    app.open_process(name)
    await until(pilot, lambda: isinstance(app.screen, ProcessDetailScreen)
                and app.screen.detail is not None, what="the detail screen")
    screen = app.screen
    assert isinstance(screen, ProcessDetailScreen)
    return screen


async def dead_letters(runtime: AgentRuntime, pilot: Pilot[Any], count: int) -> list[str]:
    """``count`` dead letters with the process suspended after, so redelivered events wait
    in the queue where the test can see them."""
    process = runtime.get_process("worker")
    await until(pilot, lambda: process.state.value == "running", what="worker running")
    for i in range(count):
        await process.inject(TriggerEvent("t", "fail", {"n": i}, event_id=f"dead-{i}"))
    await until(pilot, lambda: len(process.dead_letters) == count, what="dead letters")
    await process.suspend("operator")
    return [d["event"].event_id for d in process.dead_letters]


def queued_ids(runtime: AgentRuntime) -> list[str]:
    return [e.event_id for e in runtime.get_process("worker").queued_events()]


# -- the terminal ----------------------------------------------------------------------------------
async def tap(pilot: Pilot[object], *keys: str, gap: bool = True) -> None:
    """Send keys as the terminal would, without ``pilot.press``'s wait for the whole process
    to go idle after each one: a live runtime's threads keep the CPU busy, so that wait runs to
    its one-second cap per key. The caller waits for what the key should bring, with ``until``.
    ``gap=False`` queues all the keys before the app handles the first (a paste, fast typing)."""
    driver = pilot.app._driver
    assert driver is not None
    for index, key in enumerate(keys):
        if index and gap:
            await pilot.pause(0.02)
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(pilot.app)
        driver.send_message(event)
    await pilot.pause(0.02)

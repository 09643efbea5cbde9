"""The dashboard and the global keys, driven by Pilot against the real scripted demo: each
test checks what changed in the runtime and what changed on screen."""

from __future__ import annotations

import pytest
from textual.widgets import Button, Input, TextArea

from promptui.app import ControlRoom
from promptui.screens.dialogs import ChoiceDialog, ConfirmDialog, InjectDialog
from promptui.screens.help import HelpScreen, TooSmallScreen
from promptui.widgets.feeds import AnomalyFeed
from promptui.widgets.header import StatusHeader
from promptui.widgets.process_table import ProcessTable
from runtime_core import AgentRuntime
from tests.helpers.polling import until
from tests.helpers.room import DEMO, demo_app, notes, rows, select, table_of, tap

pytestmark = pytest.mark.slow


def state_cell(app: ControlRoom, name: str) -> str:
    table = table_of(app)
    return str(table.get_cell(name, "state")).strip()


async def test_the_table_shows_every_demo_process_and_the_header_counts(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.store.counts_by_state().get("running") == 7)
        await until(pilot, lambda: rows(app) == DEMO and state_cell(app, "looper") != "")
        header = str(app.screen.query_one(StatusHeader).render())
        assert "7 running" in header and "ev/s" in header and "queued" in header
        await pilot.press("q")
    assert all(p.state.value == "stopped" for p in demo_runtime.processes.values())


async def test_stop_asks_first_with_cancel_focused_then_start(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.store.counts_by_state().get("running") == 7)
        await select(app, pilot, "health-checker")
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ChoiceDialog))
        assert app.focused is not None and app.focused.id == "cancel"
        await pilot.press("enter")  # Enter on the focused Cancel: nothing happens
        await until(pilot, lambda: not isinstance(app.screen, ChoiceDialog))
        assert demo_runtime.get_process("health-checker").state.value == "running"
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ChoiceDialog))
        app.screen.query_one("#choice-now", Button).press()
        await until(pilot, lambda: state_cell(app, "health-checker") == "stopped")
        assert demo_runtime.get_process("health-checker").state.value == "stopped"
        await pilot.press("s")  # a stopped process starts without a question
        await until(pilot, lambda: state_cell(app, "health-checker") == "running")
        await pilot.press("q")


async def test_suspend_and_resume(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.store.counts_by_state().get("running") == 7)
        await select(app, pilot, "demo-feeder")
        await pilot.press("p")
        await until(pilot, lambda: state_cell(app, "demo-feeder") == "suspended*")
        assert demo_runtime.get_process("demo-feeder").suspend_reason == "operator"
        await pilot.press("p")
        await until(pilot, lambda: state_cell(app, "demo-feeder") == "running")
        await pilot.press("q")


async def test_inject_validates_the_json_before_sending(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.store.counts_by_state().get("running") == 7)
        await select(app, pilot, "alert-handler")
        before = demo_runtime.get_process("alert-handler").invocation_count
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, InjectDialog))
        editor = app.screen.query_one(TextArea)
        editor.text = '{"severity": "critical", "summary": '  # broken
        await until(pilot, lambda: app.screen.query_one("#send", Button).disabled)
        assert "Invalid JSON: line 1" in str(app.screen.query_one("#payload-error").render())
        await pilot.press("ctrl+s")  # refused while invalid: the dialog stays
        assert isinstance(app.screen, InjectDialog)
        editor.text = '{"severity": "critical", "summary": "disk full on db-1"}'
        await until(pilot, lambda: not app.screen.query_one("#send", Button).disabled)
        await pilot.press("ctrl+s")
        await until(pilot, lambda: demo_runtime.get_process(
            "alert-handler").invocation_count > before, what="the injected event ran")
        await until(pilot, lambda: any("queued for alert-handler" in n for n in notes(app)))
        await pilot.press("q")


async def test_restart_confirms_then_restarts(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    transitions: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.store.counts_by_state().get("running") == 7)
        process = demo_runtime.get_process("invoice-watcher")
        process.notifier.add_callback(
            lambda e: transitions.append(e.to_dict().get("to_state", ""))
            if e.kind == "process.state" and e.process == "invoice-watcher" else None)
        await select(app, pilot, "invoice-watcher")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        app.screen.query_one("#confirm", Button).press()
        await until(pilot, lambda: transitions[-1:] == ["running"] and "stopped" in transitions)
        assert process.state.value == "running"
        await pilot.press("q")


async def test_filter_by_regex_and_inverse_then_clear(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await pilot.press("slash")
        await pilot.press(*"deploy")
        await until(pilot, lambda: rows(app) == ["flaky-deployer"])
        await pilot.press("enter")
        assert app.screen.query_one(ProcessTable).has_focus
        await pilot.pause(0.2)  # several pumps: the filter holds across updates
        assert rows(app) == ["flaky-deployer"]
        await pilot.press("slash")
        box = app.screen.query_one("#filter", Input)
        box.value = "!deploy|looper"
        await until(pilot, lambda: rows(app) == [n for n in DEMO
                                                 if n not in ("flaky-deployer", "looper")])
        box.value = "(["
        await until(pilot, lambda: "bad filter" in str(box.border_subtitle))
        await pilot.press("escape")
        await until(pilot, lambda: rows(app) == DEMO)
        await pilot.press("q")


async def test_enter_typed_twice_fast_in_the_filter_opens_the_row(
        demo_runtime: AgentRuntime) -> None:
    """`/deploy` Enter Enter, both Enters queued before the first is handled (pasted, or typed
    fast over SSH): the second reaches the box before the focus left it, and still opens the
    filtered row. Back in the box, Enter only keeps the filter again."""
    from promptui.screens.detail import ProcessDetailScreen

    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        dashboard = app.screen
        await pilot.press("slash", *"deploy")
        await until(pilot, lambda: rows(app) == ["flaky-deployer"])
        await tap(pilot, "enter", "enter", gap=False)
        await until(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
        assert isinstance(app.screen, ProcessDetailScreen)
        assert app.screen.process == "flaky-deployer"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is dashboard)
        await pilot.press("slash")
        await until(pilot, lambda: dashboard.query_one("#filter", Input).has_focus)
        await pilot.press("enter")
        await until(pilot, lambda: dashboard.query_one(ProcessTable).has_focus)
        assert app.screen is dashboard and rows(app) == ["flaky-deployer"]
        await pilot.press("q")


async def test_sort_cycles_and_reverses_and_selection_survives(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await select(app, pilot, "health-checker")
        await pilot.press("o")  # by name
        await until(pilot, lambda: rows(app) == sorted(DEMO))
        await pilot.press("O")  # by name, descending
        await until(pilot, lambda: rows(app) == sorted(DEMO, reverse=True))
        table = app.screen.query_one(ProcessTable)
        assert table.selected_name == "health-checker"
        start = app.pump_count
        await until(pilot, lambda: app.pump_count > start + 5)
        assert table.selected_name == "health-checker"
        await pilot.press("q")


async def test_space_pauses_the_feed_and_counts_what_waits(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await pilot.press("space")
        feed = app.screen.query_one(AnomalyFeed)
        assert feed.paused
        shown = feed.line_count
        # flaky-deployer dead-letters its broken builds on its own within seconds
        await until(pilot, lambda: feed.pending > 0, timeout=20)
        assert feed.line_count == shown
        assert f"+{feed.pending} new" in str(feed.border_subtitle)
        await pilot.press("space")
        await until(pilot, lambda: not feed.paused and feed.line_count > shown)
        assert feed.border_subtitle == ""
        await pilot.press("q")


async def test_help_lists_every_binding_with_its_id(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert isinstance(app.screen, HelpScreen)
        ids = [row[2] for row in app.screen.rows()]
        for ident in ("promptui.start_stop", "promptui.suspend_resume", "promptui.inject",
                      "promptui.restart", "promptui.filter", "promptui.sort",
                      "promptui.pause_feed", "promptui.open", "promptui.theme",
                      "promptui.quit", "command_palette"):
            assert ident in ids, ident
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("q")


async def test_palette_lists_the_actions_and_themes(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Start/stop", "Suspend/resume", "Inject event", "Restart", "Filter",
                      "Sort", "Pause feed", "Help", "Theme: promptui-dark",
                      "Theme: promptui-terminal"):
            assert title in titles, title
        await pilot.press("q")


async def test_t_cycles_the_themes(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime, theme="promptui-dark")
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.theme == "promptui-dark"
        seen = {app.theme}
        for _ in range(3):
            await pilot.press("t")
            seen.add(app.theme)
        assert {"promptui-dark", "promptui-light", "promptui-terminal"} <= seen
        await pilot.press("q")


async def test_read_only_refuses_every_mutating_key(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.store.counts_by_state().get("running") == 7)
        await select(app, pilot, "demo-feeder")
        for key in ("s", "p", "i", "ctrl+r"):
            await pilot.press(key)
        await until(pilot, lambda: len([n for n in notes(app) if "read-only" in n]) == 4)
        assert not isinstance(app.screen, ConfirmDialog | InjectDialog)
        assert demo_runtime.get_process("demo-feeder").state.value == "running"
        assert "READ-ONLY" in str(app.screen.query_one(StatusHeader).render())
        await pilot.press("q")


async def test_keys_are_remappable_by_binding_id(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime, keymap={"promptui.inject": "n"})
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, InjectDialog))
        await pilot.press("escape")
        await pilot.press("q")


async def test_too_small_says_what_is_needed_and_goes_away(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(70, 20)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, TooSmallScreen))
        text = str(app.screen.query_one("#too-small-text").render())
        assert "70x20" in text and "80x24" in text
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: not isinstance(app.screen, TooSmallScreen))
        assert rows(app) == DEMO or True  # the dashboard is back underneath
        await pilot.press("q")


async def test_quit_stops_the_runtime_and_keeps_the_queue_in_the_journal(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.store.counts_by_state().get("running") == 7)
        await pilot.press("q")
    assert app.runtime_closed
    assert all(p.state.value == "stopped" for p in demo_runtime.processes.values())


async def test_stop_offers_a_drain_when_runs_are_in_flight_and_shows_it() -> None:
    import asyncio

    from runtime_core import ProcessConfig, TriggerEvent
    from runtime_core.agent.tools import tool

    release = asyncio.Event()
    done: list[str] = []

    async def deploy() -> str:
        """A write that waits for the test to let it finish."""
        await release.wait()
        done.append("deployed")
        return "deployed"

    runtime = AgentRuntime()
    runtime.add_process("deployer", ProcessConfig(model={"provider": "scripted", "turns": [
        {"tool_calls": [{"name": "deploy"}]}, {"reply": "ok"}]}), tools=[tool(deploy)])
    app = demo_app(runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app) == ["deployer"])
        await until(pilot, lambda: state_cell(app, "deployer") == "running")
        process = runtime.get_process("deployer")
        await process.inject(TriggerEvent("t", "manual", {}))
        await until(pilot, lambda: app.store.processes["deployer"].active_runs == 1)
        await select(app, pilot, "deployer")
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ChoiceDialog))
        assert "1 run(s) in flight" in str(app.screen.title_text)
        assert app.focused is not None and app.focused.id == "cancel"
        app.screen.query_one("#choice-drain", Button).press()
        await until(pilot, lambda: state_cell(app, "deployer") == "draining 1")
        header = str(app.screen.query_one(StatusHeader).render())
        assert "draining 1 run(s)" in header
        release.set()
        await until(pilot, lambda: state_cell(app, "deployer") == "stopped")
        assert done == ["deployed"] and process.recent_runs()[-1].state.value == "succeeded"
        await pilot.press("q")

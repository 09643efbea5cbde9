"""Progress of a running MCP tool call on the Live tab (a bar with the server's message), and a
server's log messages in the activity log."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual.widgets import Static

from promptui.store import UIStore
from promptui.widgets.live_view import progress_text
from promptui.widgets.process_views import config_view
from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.events import McpServerLog, RunFinished, RunStep, ToolProgress
from tests.helpers.polling import until
from tests.helpers.room import make_app, open_detail, plain, running
from tests.helpers.workers import EXTRAS_SERVER


@pytest.mark.slow
async def test_the_running_step_shows_the_servers_progress_bar(tmp_path: Path) -> None:
    release = tmp_path / "release"
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(
        model={"provider": "scripted", "turns": [
            {"tool_calls": [{"name": "slow_job", "args": {"steps": 4,
                                                          "release": str(release)}}]},
            {"reply": "done"}]},
        servers={"jobs": {"command": sys.executable, "args": [str(EXTRAS_SERVER)], "timeout": 30}}))
    app = make_app(runtime)
    async with running(app, (80, 24)) as pilot:
        process = runtime.get_process("worker")
        await until(pilot, lambda: process.state.value == "running", 30, "the server")
        screen = await open_detail(app, pilot, "worker")
        await process.inject(TriggerEvent("t", "manual", {}))
        bar = screen.query_one("#live-progress", Static)
        await until(pilot, lambda: "working on part 4" in str(bar.content), 20, "the bar")
        shown = str(bar.content)
        assert bar.display
        assert "step 2 slow_job " + "█" * 20 + " 100% 4/4" in shown
        release.write_text("go")
        await until(pilot, lambda: process.invocation_count == 1, 20, "the run's end")
        await until(pilot, lambda: not bar.display, 5, "the bar to go")
        assert process.recent_runs()[-1].state.value == "succeeded"


def test_progress_without_a_total_has_no_bar() -> None:
    store = UIStore()
    store.ingest([ToolProgress(process="p", run_id="r1", step=3, tool="fetch", progress=7,
                               message="pages")], 0.0, 0.1)
    assert progress_text(store.progress["r1"]).plain == "  ⋯ step 3 fetch 7 so far  pages"
    store.ingest([RunStep(process="p", run_id="r1", step=2, step_kind="model")], 0.0, 0.1)
    assert "r1" in store.progress  # an earlier step's news: the call still runs
    store.ingest([RunStep(process="p", run_id="r1", step=3, step_kind="tool")], 0.0, 0.1)
    assert store.progress == {}
    store.ingest([ToolProgress(process="p", run_id="r2", step=1, tool="t", progress=1,
                               total=2),
                  RunFinished(process="p", run_id="r2", event_id="e", state="failed")],
                 0.0, 0.1)
    assert store.progress == {}


def test_server_logs_are_activity_lines() -> None:
    store = UIStore()
    _, activity = store.ingest([McpServerLog(process="p", server="files", level="warning",
                                             text="disk almost full")], 0.0, 0.1)
    assert [(a.process, a.kind, a.text) for a in activity] == [
        ("p", "mcp.log", "files [warning] disk almost full")]


def test_the_config_tab_shows_skipped_tools_and_resources() -> None:
    shown = plain(config_view({"config": {}, "servers": [{
        "server": "everything", "type": "stdio", "connected": True,
        "tools": [{"name": "read_resource", "effect": "read", "idempotent": None}],
        "skipped": [{"name": "simulate-research-query", "reason": "needs tasks"}],
        "resources": [], "resource_count": 7, "resource_templates": ["demo://{id}"]}]}))
    assert "simulate-research-query skipped: needs tasks" in shown
    assert "7 resource(s), 1 template(s)" in shown

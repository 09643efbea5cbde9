"""The protocol extras against the reference server, not only our own: the npm registry's
``@modelcontextprotocol/server-everything`` (pinned), over stdio, through AgentProcess and the
room (Pilot). Its logging (switched on by a tool), progress, resources, resource links, tiny
image, and ``simulate-research-query``, which needs MCP tasks and so is not offered.

Skipped, with the reason, where node or npm is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from promptui.screens.dashboard import DashboardScreen
from promptui.widgets.feeds import ActivityLog
from runtime_core import AgentProcess, AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.agent.mcp import notices as mcp_notices
from runtime_core.agent.mcp.tools import probe_servers
from runtime_core.events import McpServerLog, RuntimeEvent, ToolProgress
from runtime_core.journal import InMemoryJournal
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from tests.helpers.mcp import install
from tests.helpers.polling import until, wait_for
from tests.helpers.room import make_app, open_detail, running

pytestmark = pytest.mark.slow

CONNECT = 60.0


@pytest.fixture(scope="module")
def everything() -> Path:
    return install().everything


def server(bin_path: Path) -> dict[str, Any]:
    return {"command": str(bin_path), "args": ["stdio"], "timeout": CONNECT}


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


async def test_tools_needing_tasks_are_skipped_and_resources_listed(everything: Path) -> None:
    [row] = await probe_servers(ProcessConfig(servers={"everything": server(everything)})
                                .servers)
    assert row["connected"] is True, row
    assert row["skipped"] == [{"name": "simulate-research-query", "reason": "needs tasks"}]
    names = {t["name"] for t in row["tools"]}
    assert "simulate-research-query" not in names
    assert {"read_resource", "get-tiny-image", "trigger-long-running-operation"} <= names
    assert "demo://resource/static/document/architecture.md" in {
        r["uri"] for r in row["resources"]}
    assert "demo://resource/dynamic/text/{resourceId}" in row["resource_templates"]


async def test_logs_progress_images_and_resources_of_the_reference_server(
        everything: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_notices, "LOG_LIMIT", 1)  # the feed's limit, seen at work
    journal = InMemoryJournal()
    process = AgentProcess("p", ProcessConfig(
        model={"provider": "scripted", "turns": [
            call("toggle-simulated-logging"),
            call("trigger-long-running-operation", duration=1, steps=4),
            call("get-tiny-image"),
            call("get-resource-links", count=2),
            call("read_resource", uri="demo://resource/dynamic/blob/1"),
            call("read_resource", uri="demo://resource/static/document/architecture.md"),
            {"reply": "done"}]},
        servers={"everything": server(everything)},
        journal={"level": "full", "backend": "memory"}), journal=journal)
    seen: list[RuntimeEvent] = []
    process.notifier.add_callback(seen.append)
    await process.start()
    try:
        assert "simulate-research-query" not in process.tools()
        await process.inject(TriggerEvent("t", "manual", {}))
        await wait_for(lambda: process.invocation_count == 1, 60, "the run")
        run = process.recent_runs()[-1]
        assert run.state.value == "succeeded", run.error
        _, _, image, links, blob, document = (s for s in run.steps if s.kind == "tool")
        progress = [e for e in seen if isinstance(e, ToolProgress)]
        assert progress and {e.total for e in progress} == {4.0}
        assert {e.tool for e in progress} == {"trigger-long-running-operation"}
        assert "[image: image/png, " in image.result
        [result] = [e.data for e in await journal.read(ReadFilter(
            process="p", entry_type=EntryType.TOOL_RESULT)) if e.data["tool"] == "get-tiny-image"]
        [attached] = result["attachments"]
        assert attached["mime_type"] == "image/png" and "data" in attached  # small: kept whole
        assert "read it with the tool read_resource and uri=" in links.result
        assert blob.ok and blob.result.startswith("Resource 1:")  # a text/plain blob, decoded
        assert document.ok and len(document.result) > 100
        # The server logs every few seconds once switched on; the feed gets one line per
        # window (LOG_LIMIT 1 here), the rest are counted.
        await wait_for(lambda: any(isinstance(e, McpServerLog) for e in seen), 30,
                       "a log message from the server")
        log = next(e for e in seen if isinstance(e, McpServerLog))
        assert (log.process, log.server) == ("p", "everything") and log.text
    finally:
        await process.close()


async def test_the_room_shows_its_progress_bar_and_log_lines(everything: Path) -> None:
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(
        model={"provider": "scripted", "turns": [
            call("toggle-simulated-logging"),
            call("trigger-long-running-operation", duration=4, steps=4),
            {"reply": "done"}]},
        servers={"everything": server(everything)}))
    app = make_app(runtime)
    async with running(app, (80, 24)) as pilot:
        process = runtime.get_process("worker")
        await until(pilot, lambda: process.state.value == "running", 60, "the server")
        dashboard = app.screen
        assert isinstance(dashboard, DashboardScreen)
        screen = await open_detail(app, pilot, "worker")
        await process.inject(TriggerEvent("t", "manual", {}))
        bar = screen.query_one("#live-progress", Static)
        await until(pilot, lambda: "trigger-long-running-operation" in str(bar.content), 30,
                    "the progress bar")
        assert "/4" in str(bar.content) and "█" in str(bar.content)
        await until(pilot, lambda: process.invocation_count == 1, 30, "the run's end")
        await until(pilot, lambda: not bar.display, 5, "the bar to go")
        await pilot.press("escape")
        log = dashboard.query_one(ActivityLog)
        await until(pilot, lambda: any("everything [" in str(line) for line in log.lines), 30,
                    "a server log line in the activity log")

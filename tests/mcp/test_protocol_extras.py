"""More of the MCP protocol, against a small server of our own (helpers/workers/extras_server.py):
server log messages (logged, and rate-limited into the activity feed), progress on the running
step, resources as a read tool, images and binary content, and tools that need MCP tasks."""

from __future__ import annotations

import base64
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.agent.mcp import notices as mcp_notices
from runtime_core.agent.mcp.tools import probe_servers
from runtime_core.events import McpServerLog, RuntimeEvent, ToolProgress
from runtime_core.journal import InMemoryJournal
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from tests.helpers.cli import promptui_command
from tests.helpers.models import FakeOpenAI
from tests.helpers.polling import wait_for
from tests.helpers.workers import EXTRAS_SERVER

pytestmark = pytest.mark.slow

CONNECT = 20.0


def extras(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(EXTRAS_SERVER)], "timeout": CONNECT, **extra}


def scripted(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"provider": "scripted", "turns": list(turns)}


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def collect(process: AgentProcess) -> list[RuntimeEvent]:
    seen: list[RuntimeEvent] = []
    process.notifier.add_callback(seen.append)
    return seen


async def run_once(process: AgentProcess, count: int = 1) -> Any:
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == count, 30, "the run")
    run = process.recent_runs()[-1]
    assert run.state.value == "succeeded", run.error
    return run


async def test_a_tool_that_needs_tasks_is_not_offered_and_resources_are(tmp_path: Path
                                                                       ) -> None:
    process = AgentProcess("p", ProcessConfig(model=scripted({"reply": "ok"}),
                                              servers={"notes": extras()}))
    await process.start()
    try:
        assert "deep_research" not in process.tools()
        [row] = process.status()["servers"]
        assert row["skipped"] == [{"name": "deep_research", "reason": "needs tasks"}]
        tools = {t["name"]: t["effect"] for t in row["tools"]}
        assert tools["read_resource"] == "read" and tools["chatter"] == "read"
        assert [r["uri"] for r in row["resources"]] == ["memo://notes/first",
                                                        "memo://blob/logo"]
        assert row["resource_templates"] == ["memo://notes/{name}"]
        spec = process.tools()["read_resource"].spec()
        assert spec.parameters["required"] == ["uri"]
        assert "memo://notes/first" in spec.description
        assert "memo://notes/{name}" in spec.description
    finally:
        await process.close()


async def test_resources_are_read_by_uri_and_links_say_how(tmp_path: Path) -> None:
    journal = InMemoryJournal()
    process = AgentProcess("p", ProcessConfig(
        model=scripted(call("n_linked"), call("n_read_resource", uri="memo://notes/first"),
                       call("n_read_resource", uri="memo://notes/bob"),
                       call("n_read_resource", uri="memo://blob/logo"),
                       call("n_read_resource", uri="memo://nowhere"), {"reply": "read"}),
        servers={"notes": extras(tool_prefix="n_")},
        journal={"level": "full", "backend": "memory"}), journal=journal)
    await process.start()
    try:
        run = await run_once(process)
        linked, first, bob, logo, nowhere = (s for s in run.steps if s.kind == "tool")
        assert linked.result == ('[resource link: memo://notes/first (first note, text/plain); '
                                 'read it with the tool n_read_resource and '
                                 'uri="memo://notes/first"]')
        assert first.result == "remember the milk" and bob.result == "note bob"
        assert logo.result.startswith("[image from memo://blob/logo: image/png, 300 B, sha256 ")
        assert not nowhere.ok and "memo://nowhere" in nowhere.result
        intents = [e.data for e in await journal.read(ReadFilter(
            process="p", entry_type=EntryType.TOOL_INTENT))]
        assert intents[1]["effect"] == "read"
        assert intents[1]["mcp_method"] == "resources/read"
    finally:
        await process.close()


async def test_server_logs_go_to_the_python_log_and_rate_limited_to_the_feed(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(mcp_notices, "LOG_LIMIT", 5)
    monkeypatch.setattr(mcp_notices, "LOG_WINDOW", 0.5)
    caplog.set_level(logging.DEBUG, logger="runtime_core.mcp")
    process = AgentProcess("p", ProcessConfig(model=scripted(call("chatter", count=12),
                                                             {"reply": "ok"}),
                                              servers={"notes": extras()}))
    seen = collect(process)
    await process.start()
    try:
        await run_once(process)
        logs = lambda: [e for e in seen if isinstance(e, McpServerLog)]  # noqa: E731
        await wait_for(lambda: len(logs()) == 6, 5, "five lines and one summary")
        shown = logs()
        assert [e.text for e in shown[:5]] == [f"line {n} of 12" for n in range(5)]
        assert {(e.process, e.server, e.level, e.logger) for e in shown[:5]} == {
            ("p", "notes", "info", "chatter")}
        assert shown[5].text.startswith("… 7 more log message(s) from notes left out")
        # Every line is in the process's Python log, under a logger of its own, at its level;
        # the server's debug line (below the level asked for) is not in the feed.
        records = [r for r in caplog.records if r.name == "runtime_core.mcp.p.notes"]
        assert [(r.levelname, r.getMessage()) for r in records] == [
            ("DEBUG", "a debug line nobody asked for"),
            *(("INFO", f"[chatter] line {n} of 12") for n in range(12))]
    finally:
        await process.close()


async def test_progress_reaches_the_room_as_events_of_the_running_step() -> None:
    process = AgentProcess("p", ProcessConfig(
        model=scripted(call("slow_job", steps=3, release="/"), {"reply": "ok"}),
        servers={"notes": extras()}))
    seen = collect(process)
    await process.start()
    try:
        run = await run_once(process)
        progress = [e for e in seen if isinstance(e, ToolProgress)]
        assert progress, "no progress event"
        first = progress[0]
        assert (first.process, first.run_id, first.step, first.tool, first.total) == (
            "p", run.run_id, 2, "slow_job", 3.0)
        assert first.message.startswith("working on part")
    finally:
        await process.close()


def png(size: int) -> bytes:
    return (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * (size // 256 + 1))[:size]


async def test_images_go_to_an_openai_model_and_big_ones_are_journaled_by_digest(
        server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.port}/v1")
    server.tool_call("picture", {"size": 100})
    server.tool_call("picture", {"size": 70_000})
    server.reply("Two pictures.")
    journal = InMemoryJournal()
    process = AgentProcess("p", ProcessConfig(model="openai:vision", servers={"notes": extras()},
                                              journal={"level": "full", "backend": "memory"}),
                           journal=journal)
    await process.start()
    try:
        run = await run_once(process)
        small, big = (s for s in run.steps if s.kind == "tool")
        assert small.result.startswith("here is the picture\n[image: image/png, 100 B, sha256 ")
        assert "68.4 kB" in big.result
        # The model got each image right after the tool messages, as a data: URI.
        second = server.requests[1]["json"]["messages"]
        assert second[-2]["role"] == "tool"
        assert second[-1]["role"] == "user"
        urls = [p["image_url"]["url"] for p in second[-1]["content"] if p["type"] == "image_url"]
        assert urls == ["data:image/png;base64," + base64.b64encode(png(100)).decode()]
        third = server.requests[2]["json"]["messages"]
        images = [m for m in third if m["role"] == "user" and isinstance(m["content"], list)]
        assert len(images) == 2
        # The journal keeps the small image whole, the big one by digest and size.
        results = [e.data for e in await journal.read(ReadFilter(
            process="p", entry_type=EntryType.TOOL_RESULT))]
        [kept], [digest] = results[0]["attachments"], results[1]["attachments"]
        assert kept["data"] == base64.b64encode(png(100)).decode()
        assert "data" not in digest and digest["size"] == 70_000
        import hashlib
        assert digest["sha256"] == hashlib.sha256(png(70_000)).hexdigest()
        usage = [e.data for e in await journal.read(ReadFilter(
            process="p", entry_type=EntryType.MODEL_USAGE))]
        prompt = usage[-1]["prompt"]  # the audit level keeps the prompt: no bytes in it
        assert all("data" not in a for m in prompt for a in m.get("attachments", []))
    finally:
        await process.close()


async def test_probe_lists_resources_and_skipped_tools() -> None:
    [row] = await probe_servers({"notes": ProcessConfig(servers={"notes": extras()})
                                 .servers["notes"]})
    assert row["connected"] is True
    assert row["skipped"] == [{"name": "deep_research", "reason": "needs tasks"}]
    assert row["resource_templates"] == ["memo://notes/{name}"]


def test_validate_connect_shows_resources_and_skipped_tools(tmp_path: Path) -> None:
    manifest = tmp_path / "notes.agent"
    manifest.write_text(f"name: notes\nservers:\n  notes:\n    command: {sys.executable}\n"
                        f"    args: ['{EXTRAS_SERVER}']\n    timeout: 30\n")
    out = subprocess.run([*promptui_command(), "validate", "--connect",
                          str(manifest)], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "read_resource (read)" in out.stdout
    assert "skipped: needs tasks: deep_research" in out.stdout
    assert ("resources: memo://notes/first (text/plain), memo://blob/logo (image/png), "
            "memo://notes/{name}") in out.stdout

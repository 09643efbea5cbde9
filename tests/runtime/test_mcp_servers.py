"""MCP servers through AgentProcess: real stdio servers (the demo's and a test ledger server) and
streamable HTTP on loopback, with the scripted model and the OpenAI-compatible one."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent
from runtime_core.agent.mcp.link import McpServerError
from runtime_core.control import LocalControl, shown_config
from runtime_core.journal import InMemoryJournal
from runtime_core.journal.entry import EntryType
from runtime_core.journal.left_out import intent_key
from runtime_core.journal.provider import ReadFilter
from runtime_core.lifecycle import ProcessState
from runtime_core.runtime import AgentRuntime
from tests.helpers.models import FakeOpenAI
from tests.helpers.polling import wait_for
from tests.helpers.ports import free_port
from tests.helpers.workers import LEDGER_SERVER

ROOT = Path(__file__).resolve().parents[2]
DEMO_SERVER = ROOT / "demo_manifests" / "promptui_demo_mcp.py"
CONNECT = 20.0  # a cold stdio server imports the SDK first; slow CI boxes need headroom


def ledger_server(tmp: Path, **extra: Any) -> dict[str, Any]:
    return {"type": "stdio", "command": "python", "args": [str(LEDGER_SERVER)],
            "env": {"LEDGER": str(tmp / "ledger.txt")}, "timeout": CONNECT, **extra}


def demo_server(tmp: Path) -> dict[str, Any]:
    return {"command": "python", "args": [str(DEMO_SERVER)],
            "env": {"PROMPTUI_DEMO_DIR": str(tmp)}, "timeout": CONNECT}


def scripted(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"provider": "scripted", "turns": list(turns)}


def journaled() -> dict[str, Any]:
    return {"level": "full", "backend": "memory"}


async def entries(journal: InMemoryJournal, kind: EntryType) -> list[dict[str, Any]]:
    return [e.data for e in await journal.read(ReadFilter(process="p", entry_type=kind))]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; it only waits to be reaped by its parent.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


async def whoami(process: AgentProcess) -> dict[str, Any]:
    tool = process.tools()["whoami"]
    ctx = ToolContext("p", "r", 1, TriggerEvent("t", "manual", {}), {})
    return dict(json.loads(await tool.invoke({}, ctx)))


# -- unusable entries ---------------------------------------------------------------------------

@pytest.mark.parametrize(("entry", "says"), [
    ({"type": "ftp", "url": "x"}, "does not match any of the expected tags"),
    ({"type": "http", "url": "ftp://example.com"}, "must be http:// or https://"),
    ({"type": "http"}, "url"),
    ({"type": "stdio", "command": "no-such-program-xyz"}, "not on PATH"),
    ({"type": "stdio", "command": "python", "cwd": "/no/such/folder"}, "is not a folder"),
    ({"type": "stdio", "command": "python", "tool_prefix": "bad prefix!"}, "tool_prefix"),
    ({"type": "stdio", "command": "python", "colour": "red"}, "Extra inputs"),
])
def test_the_constructor_refuses_an_unusable_server_entry(entry: dict[str, Any],
                                                           says: str) -> None:
    with pytest.raises(ValueError, match=says):
        AgentProcess("p", {"servers": {"tools": entry}})


def test_a_bad_server_name_is_refused() -> None:
    with pytest.raises(ValueError, match="server name"):
        AgentProcess("p", {"servers": {"my tools": {"command": "python"}}})


# -- stdio --------------------------------------------------------------------------------------

@pytest.mark.slow
async def test_stdio_tools_join_the_run_with_effects_from_their_annotations(
        tmp_path: Path) -> None:
    journal = InMemoryJournal()
    process = AgentProcess("p", ProcessConfig(
        model=scripted(
            {"tool_calls": [{"name": "lookup_build", "args": {"build": 7}}]},
            {"tool_calls": [{"name": "append_changelog",
                             "args": {"build": 7, "line": "shipped"}}]},
            {"reply": "done"}),
        servers={"changelog": demo_server(tmp_path)}, journal=journaled()), journal=journal)
    await process.start()
    try:
        tools = {t["name"]: t for t in process.status()["servers"][0]["tools"]}
        assert tools["lookup_build"]["effect"] == "read"  # readOnlyHint
        assert tools["append_changelog"] == {"name": "append_changelog", "effect": "write",
                                             "idempotent": True}
        assert tools["clear_changelog"]["effect"] == "write"  # destructiveHint
        await process.inject(TriggerEvent("t", "manual", {}))
        await wait_for(lambda: process.invocation_count == 1, 20)
        run = process.recent_runs()[-1]
        assert run.state.value == "succeeded", run.error
        assert json.loads(run.steps[1].result)["tests"] == "failed"
        intents = await entries(journal, EntryType.TOOL_INTENT)
        assert [(i["tool"], i["effect"], i["mcp_server"]) for i in intents] == [
            ("lookup_build", "read", "changelog"), ("append_changelog", "write", "changelog")]
        assert intents[1]["idempotent"] is True
        # The runtime filled in the idempotency key; the model never saw the argument.
        key = intent_key(intents[1], run.run_id)  # run_id:step, left out (schema 6 on)
        assert f"<!-- {key} -->" in (tmp_path / "changelog.md").read_text()
        assert "idempotency_key" not in intents[1]["args"]
        spec = process.tools()["append_changelog"].spec()
        assert "idempotency_key" not in spec.parameters["properties"]
    finally:
        await process.close()


@pytest.mark.slow
async def test_stop_closes_the_server_and_an_automatic_restart_reconnects(
        tmp_path: Path) -> None:
    process = AgentProcess("p", ProcessConfig(
        model=scripted({"raise": "model unavailable"}),
        servers={"ledger": ledger_server(tmp_path)},
        restart_policy="on_failure", restart_backoff=0.01, max_consecutive_failures=1))
    await process.start()
    first = (await whoami(process))["pid"]
    assert alive(first)
    await process.inject(TriggerEvent("t", "manual", {}))  # fails -> FAILED -> restart
    await wait_for(lambda: process.restart_count == 1 and process.state is ProcessState.RUNNING,
                   30, "the automatic restart")
    second = (await whoami(process))["pid"]
    assert second != first
    await wait_for(lambda: not alive(first), 10, "the old server to exit")
    assert process.status()["servers"][0]["connections"] == 2
    await process.stop()
    await wait_for(lambda: not alive(second), 10, "the server to exit on stop")
    assert process.status()["servers"][0]["connected"] is False
    await process.start()  # an explicit start connects again
    assert alive((await whoami(process))["pid"])
    await process.close()


@pytest.mark.slow
async def test_a_server_killed_underneath_is_reconnected_before_the_next_call(
        tmp_path: Path) -> None:
    process = AgentProcess("p", ProcessConfig(
        model=scripted({"tool_calls": [{"name": "peek"}]}, {"reply": "ok"}),
        servers={"ledger": ledger_server(tmp_path)}))
    await process.start()
    try:
        pid = (await whoami(process))["pid"]
        os.kill(pid, signal.SIGKILL)
        await wait_for(lambda: not process.status()["servers"][0]["connected"], 10,
                       "the runtime to notice the server is gone")
        await process.inject(TriggerEvent("t", "manual", {}))
        await wait_for(lambda: process.invocation_count == 1, 20)
        run = process.recent_runs()[-1]
        # The connection's end was noticed: the next call reconnected first, then ran.
        assert run.steps[1].ok and run.steps[1].result == "0"
        assert (await whoami(process))["pid"] != pid
        assert process.status()["servers"][0]["connections"] == 2
    finally:
        await process.close()


@pytest.mark.slow
async def test_a_tool_error_is_an_observation_not_a_failed_run(tmp_path: Path) -> None:
    process = AgentProcess("p", ProcessConfig(
        model=scripted({"tool_calls": [{"name": "refuse", "args": {"reason": "quota"}}]},
                       {"tool_calls": [{"name": "refuse", "args": {}}]},
                       {"reply": "gave up"}),
        servers={"ledger": ledger_server(tmp_path)}))
    await process.start()
    try:
        await process.inject(TriggerEvent("t", "manual", {}))
        await wait_for(lambda: process.invocation_count == 1, 20)
        run = process.recent_runs()[-1]
        assert run.state.value == "succeeded"
        failed, refused = run.steps[1], run.steps[3]
        assert not failed.ok and "McpToolFailed" in failed.result and "quota" in failed.result
        # Plainly missing arguments are refused before anything is journaled or sent.
        assert refused.kind == "refused" and "missing required reason" in refused.result
    finally:
        await process.close()


@pytest.mark.slow
async def test_a_server_that_never_answers_fails_the_start_naming_it() -> None:
    process = AgentProcess("p", ProcessConfig(servers={"slow": {
        "command": "python", "args": ["-c", "import time; time.sleep(60)"], "timeout": 1}}))
    with pytest.raises(McpServerError, match=r"MCP server 'slow' did not answer within 1 s"):
        await process.start()
    assert process.state is ProcessState.FAILED
    await process.close()


@pytest.mark.slow
async def test_a_server_that_exits_at_once_shows_its_stderr() -> None:
    script = "import sys; sys.stderr.write('config.toml: missing api_url\\n'); sys.exit(3)"
    process = AgentProcess("p", ProcessConfig(servers={"broken": {
        "command": "python", "args": ["-c", script], "timeout": 10}}))
    with pytest.raises(McpServerError) as caught:
        await process.start()
    assert "MCP server 'broken'" in str(caught.value)
    assert "config.toml: missing api_url" in str(caught.value)
    await process.close()


@pytest.mark.slow
async def test_a_tool_name_taken_twice_fails_the_start_unless_prefixed(tmp_path: Path) -> None:
    def peek() -> int:
        return 0

    clash = AgentProcess("p", ProcessConfig(servers={"ledger": ledger_server(tmp_path)}),
                         tools=[peek])
    with pytest.raises(McpServerError, match="'peek' of MCP server 'ledger' is already used by "
                                             "a Python tool; give the server a tool_prefix"):
        await clash.start()
    await clash.close()
    prefixed = AgentProcess("p", ProcessConfig(
        servers={"ledger": ledger_server(tmp_path, tool_prefix="ledger_")}), tools=[peek])
    await prefixed.start()
    try:
        names = {t["name"] for t in prefixed.status()["servers"][0]["tools"]}
        assert {"ledger_peek", "ledger_record"} <= names
    finally:
        await prefixed.close()


async def test_a_missing_environment_variable_names_the_server_and_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_TOKEN_XYZ", raising=False)
    process = AgentProcess("p", ProcessConfig(servers={"ledger": ledger_server(
        tmp_path, env={"LEDGER": "${LEDGER_TOKEN_XYZ}"})}))
    with pytest.raises(McpServerError, match=r"servers\.ledger\.env\.LEDGER needs environment "
                                             r"variable LEDGER_TOKEN_XYZ"):
        await process.start()
    await process.close()


# -- streamable HTTP on loopback ----------------------------------------------------------------

@pytest.fixture
async def http_ledger(tmp_path: Path) -> AsyncIterator[str]:
    env = {**os.environ, "LEDGER": str(tmp_path / "ledger.txt")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(LEDGER_SERVER), "--http", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), CONNECT)).decode()
    assert line.startswith("LISTENING "), line
    try:
        yield line.split()[1]
    finally:
        proc.terminate()
        await proc.wait()


@pytest.mark.slow
async def test_a_server_over_streamable_http_on_loopback(
        http_ledger: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_BEARER", "s3cret-token-value")
    runtime = AgentRuntime()
    process = runtime.add_process("p", ProcessConfig(
        model=scripted({"tool_calls": [{"name": "record",
                                        "args": {"item": "x", "event_id": "$event_id"}}]},
                       {"reply": "recorded"}),
        servers={"remote": {"type": "http", "url": http_ledger,
                            "bearer_token": "${LEDGER_BEARER}",
                            "headers": {"X-Team": "ops"}}},
        journal={"level": "full", "path": str(tmp_path / "journal.db")}))
    await process.start()
    journal = process.journal
    assert journal is not None
    try:
        assert (await whoami(process))["authorization"] == "Bearer s3cret-token-value"
        await process.inject(TriggerEvent("t", "manual", {}, event_id="ev-1"))
        await wait_for(lambda: process.invocation_count == 1, 20)
        assert process.recent_runs()[-1].state.value == "succeeded"
        intent = await journal.read(ReadFilter(process="p", entry_type=EntryType.TOOL_INTENT))
        key = intent_key(intent[0].data, intent[0].run_id)
        assert (tmp_path / "ledger.txt").read_text() == f"{key} ev-1 x\n"
        # The token is resolved when connecting: the config, the detail view and the journal
        # hold the reference only.
        detail = await LocalControl(runtime).process_detail("p")
        shown = json.dumps(detail.config)
        assert "${LEDGER_BEARER}" in shown and "s3cret" not in shown
        everything = json.dumps([e.data for e in await journal.read(ReadFilter(process="p"))])
        assert "s3cret" not in everything
    finally:
        await runtime.close()


async def test_literal_credentials_are_redacted_in_the_detail_view() -> None:
    config = ProcessConfig(servers={
        "a": {"type": "http", "url": "https://mcp.example.com/mcp", "bearer_token": "abc123",
              "headers": {"X-Key": "k-999", "X-Ref": "${KEY_REF}"}},
        "b": {"command": "python", "env": {"TOKEN": "t-777", "HOME_REF": "${HOME}"}}})
    shown = shown_config(config)
    assert shown["servers"]["a"]["bearer_token"] == "[redacted]"
    assert shown["servers"]["a"]["headers"] == {"X-Key": "[redacted]", "X-Ref": "${KEY_REF}"}
    assert shown["servers"]["b"]["env"] == {"TOKEN": "[redacted]", "HOME_REF": "${HOME}"}
    assert not {"abc123", "k-999", "t-777"} & set(json.dumps(shown).split('"'))


async def test_an_unreachable_http_server_fails_the_start_naming_it() -> None:
    port = free_port()  # a port nobody listens on
    process = AgentProcess("p", ProcessConfig(servers={"gone": {
        "type": "http", "url": f"http://127.0.0.1:{port}/mcp", "timeout": 10}}))
    with pytest.raises(McpServerError, match="MCP server 'gone'"):
        await process.start()
    assert process.state is ProcessState.FAILED
    await process.close()


# -- a real model and an MCP server, with budgets and health ------------------------------------

@pytest.mark.slow
async def test_an_openai_model_drives_mcp_tools_with_budget_and_health(
        server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.port}/v1")
    server.tool_call("record", {"item": "invoice-9", "event_id": "ev-9"})
    for _ in range(3):  # the same read three times in a row: the health monitor sees it stuck
        server.tool_call("peek", {})
    server.reply("Recorded invoice-9.")
    journal = InMemoryJournal()
    process = AgentProcess("p", ProcessConfig(
        model="openai:test-model", instructions="Record what you are sent.",
        servers={"ledger": ledger_server(tmp_path)}, journal=journaled(),
        budget={"enabled": True, "max_tool_calls_per_day": 10},
        health={"enabled": True, "stuck_threshold": 3}), journal=journal)
    await process.start()
    try:
        await process.inject(TriggerEvent("t", "manual", {"item": "invoice-9"}, event_id="ev-9"))
        await wait_for(lambda: process.invocation_count == 1, 20)
        run = process.recent_runs()[-1]
        assert run.state.value == "succeeded" and run.reply == "Recorded invoice-9."
        assert [s.result for s in run.steps if s.kind == "tool"] == ["written", "1", "1", "1"]
        # The model was shown the MCP tool's schema without the runtime-filled key.
        offered = {t["function"]["name"]: t["function"]["parameters"]
                   for t in server.requests[0]["json"]["tools"]}
        assert set(offered["record"]["properties"]) == {"item", "event_id"}
        kinds = [e.entry_type for e in await journal.read(ReadFilter(process="p"))]
        assert kinds.index(EntryType.MODEL_USAGE) < kinds.index(EntryType.TOOL_INTENT)
        assert (tmp_path / "ledger.txt").read_text().split()[1:] == ["ev-9", "invoice-9"]
        status = process.status()
        assert status["budget"]["tool_calls_per_day"] == 6
        assert status["health"]["anomalies_by_type"]["stuck"] == 1
        assert status["health"]["anomaly_count"] == 1
    finally:
        await process.close()


@pytest.mark.slow
async def test_the_demo_server_over_streamable_http(tmp_path: Path) -> None:
    env = {**os.environ, "PROMPTUI_DEMO_DIR": str(tmp_path)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(DEMO_SERVER), "--http", "--port", "0", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), CONNECT)).decode()
        assert line.startswith("LISTENING http://127.0.0.1:"), line
        process = AgentProcess("p", ProcessConfig(
            model=scripted({"tool_calls": [{"name": "append_changelog",
                                            "args": {"build": 3, "line": "over http"}}]},
                           {"reply": "ok"}),
            servers={"demo": {"type": "http", "url": line.split()[1]}}))
        await process.start()
        try:
            tools = {t["name"]: t["effect"] for t in process.status()["servers"][0]["tools"]}
            assert tools == {"lookup_build": "read", "append_changelog": "write",
                             "clear_changelog": "write"}
            await process.inject(TriggerEvent("t", "manual", {}))
            await wait_for(lambda: process.invocation_count == 1, 20)
            assert process.recent_runs()[-1].state.value == "succeeded"
            assert "- build 3: over http <!-- " in (tmp_path / "changelog.md").read_text()
        finally:
            await process.close()
    finally:
        proc.terminate()
        await proc.wait()

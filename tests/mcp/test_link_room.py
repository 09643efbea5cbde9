"""Links that come back, as the control room shows them (Pilot): the Config tab says
``reconnecting (attempt N, next in S s)`` with the last error, then ``connected``; a write parked
live is reconciled from the Runs tab with its cause shown. And a program whose link is still
reconnecting exits once it stops its process (no keeper task left behind)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from promptui.screens.dialogs import ReconcileDialog
from runtime_core import (
    AgentRuntime,
    OutcomeUnknown,
    ProcessConfig,
    ToolContext,
    TriggerEvent,
    tool,
)
from tests.helpers.mcp import HttpServer
from tests.helpers.polling import until
from tests.helpers.room import make_app, notes, open_detail, running, screen_text
from tests.helpers.workers import FLAKY_SERVER

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


async def test_the_config_tab_shows_the_link_reconnecting_then_connected(
        flaky_server: HttpServer) -> None:
    runtime = AgentRuntime()
    process = runtime.add_process("p", ProcessConfig(
        model={"provider": "scripted", "turns": [{"tool_calls": [{"name": "peek"}]},
                                                 {"reply": "ok"}]},
        servers={"flaky": {"type": "http", "url": flaky_server.url, "call_timeout": 1}}))
    app = make_app(runtime)
    async with running(app, size=(120, 40)) as pilot:
        await until(pilot, lambda: process.state.value == "running", 30, "running")
        screen = await open_detail(app, pilot, "p")
        await pilot.press("8")
        await until(pilot, lambda: "flaky (http) connected" in screen_text(app), 10)
        await flaky_server.kill()
        await process.inject(TriggerEvent("t", "manual", {}))  # its call finds the link down
        await until(pilot, lambda: "reconnecting (attempt 3, next in" in screen_text(app), 20,
                    "the Config tab to show the backoff")
        shown = screen_text(app)
        assert "last error: MCP server 'flaky' could not be connected:" in shown
        assert "connection refused" in shown
        await until(pilot, lambda: process.invocation_count == 1, 20)
        run = process.recent_runs()[-1]
        assert "'peek' was not sent" in run.steps[1].result  # not sent: a plain error
        await flaky_server.start()
        await until(pilot, lambda: "flaky (http) connected" in screen_text(app), 40,
                    "the backoff to reconnect")
        assert screen.detail is not None


async def test_a_write_parked_live_is_reconciled_from_the_room() -> None:
    async def transfer(amount: int, ctx: ToolContext) -> str:
        raise OutcomeUnknown("MCP server 'bank' went away during 'transfer' (Connection "
                             "closed); whether the call took effect is unknown")

    runtime = AgentRuntime()
    process = runtime.add_process("p", ProcessConfig(model={"provider": "scripted", "turns": [
        {"tool_calls": [{"name": "transfer", "args": {"amount": 5}}]}, {"reply": "paid"}]}),
        tools=[tool(transfer, effect="write")])
    app = make_app(runtime)
    async with running(app) as pilot:
        await until(pilot, lambda: process.state.value == "running", what="running")
        await process.inject(TriggerEvent("t", "manual", {}))
        await until(pilot, lambda: len(process.waiting_runs()) == 1, what="a waiting run")
        run_id = process.waiting_runs()[0].run_id
        screen = await open_detail(app, pilot, "p")
        await pilot.press("4")
        await until(pilot, lambda: screen.table("runs").keys[:1] == [run_id])
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ReconcileDialog))
        text = screen_text(app)
        assert "unknown_write_outcome: MCP server 'bank' went away during 'transfer'" in text
        assert f"{run_id}:2" in text
        await pilot.click("#applied")
        await until(pilot, lambda: process.invocation_count == 1, what="the run to go on")
        assert process.recent_runs()[-1].reply == "paid"
        await until(pilot, lambda: f"run {run_id[:8]} reconciled: applied" in notes(app))


PROGRAM = textwrap.dedent('''
    import asyncio, os, socket, subprocess, sys, time
    from runtime_core import AgentProcess, ProcessConfig, TriggerEvent

    SERVER, TMP = sys.argv[1], sys.argv[2]

    def unused_port():
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    async def main():
        port = unused_port()
        server = subprocess.Popen([sys.executable, SERVER, "--http", "--port", str(port)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        server.stdout.readline()  # LISTENING ...
        process = AgentProcess("p", ProcessConfig(
            model={"provider": "scripted", "turns": [{"tool_calls": [{"name": "peek"}]},
                                                     {"reply": "ok"}]},
            servers={"flaky": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp",
                               "call_timeout": 0.5}}))
        await process.start()
        server.kill()
        server.wait()
        await process.inject(TriggerEvent("t", "manual", {}))
        deadline = time.monotonic() + 30
        while not process.status()["servers"][0]["link"].startswith("reconnecting (attempt 2"):
            assert time.monotonic() < deadline, process.status()["servers"][0]
            await asyncio.sleep(0.01)
        await process.stop()
        left = [t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        print("LEFT", left, flush=True)

    asyncio.run(main())
''')


def test_a_program_whose_link_is_reconnecting_exits_after_stop(tmp_path: Path) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(FLAKY_SERVER), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "LEFT []" in done.stdout, done.stdout
    assert time.monotonic() - started < 110

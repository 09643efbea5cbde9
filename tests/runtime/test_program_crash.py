"""A program that dies of its own exception with a run in flight (the exception leaves
``asyncio.run()``, which cancels every task) has crashed, not stopped: what it acknowledged is
still owed. The next start runs the event again, or, when a write tool was running, parks the
run for an operator, as after a SIGKILL; nothing waits in the dead letters as "process stopped"
(that is what ``stop()`` does, when the program asks for it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime_core import AgentProcess, ProcessConfig, ToolContext
from runtime_core.agent.tools import tool
from tests.helpers.polling import wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent('''
    import asyncio, sys
    from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent
    from runtime_core.agent.tools import tool

    JOURNAL, WITH_WRITE = sys.argv[1], sys.argv[2] == "write"
    started = asyncio.Event()

    async def book(ref: str, ctx: ToolContext) -> str:
        """A write that takes its time: the program dies while it runs."""
        started.set()
        await asyncio.sleep(30)
        return "booked " + ref

    TURNS = ([{"tool_calls": [{"name": "book", "args": {"ref": "inv-1"}}]}, {"reply": "booked"}]
             if WITH_WRITE else [{"sleep": 30, "reply": "late"}])

    async def main():
        process = AgentProcess("scripty", ProcessConfig(
            model={"provider": "scripted", "turns": TURNS}, journal={"path": JOURNAL}),
            tools=[tool(book, effect="write")])
        await process.start()
        assert await process.inject(TriggerEvent("t", "manual", {"ref": "inv-1"}))
        await asyncio.wait_for(started.wait(), 10) if WITH_WRITE else await asyncio.sleep(0.3)
        raise RuntimeError("the program's own bug")

    asyncio.run(main())
''')


def crash(tmp_path: Path, mode: str) -> Path:
    journal = tmp_path / "journal.db"
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(journal), mode], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "the program's own bug" in done.stderr, done.stderr
    return journal


async def test_an_event_whose_run_was_cut_by_the_programs_crash_runs_at_the_next_start(
        tmp_path: Path) -> None:
    journal = crash(tmp_path, "reply")
    process = AgentProcess("scripty", ProcessConfig(
        model={"provider": "scripted", "turns": [{"reply": "done now"}]},
        journal={"path": str(journal)}))
    await process.start()
    try:
        await wait_for(lambda: process.invocation_count == 1, 10, "the event to run again")
        assert process.dead_letters == []
    finally:
        await process.stop()


async def test_a_write_cut_by_the_programs_crash_waits_for_an_operator(tmp_path: Path) -> None:
    journal = crash(tmp_path, "write")
    calls: list[str] = []

    def book(ref: str, ctx: ToolContext) -> str:
        """Must not run again: its outcome before the crash is unknown."""
        calls.append(ref)
        return "booked " + ref

    process = AgentProcess("scripty", ProcessConfig(
        model={"provider": "scripted", "turns": [{"reply": "done now"}]},
        journal={"path": str(journal)}), tools=[tool(book, effect="write")])
    await process.start()
    try:
        await wait_for(lambda: process.waiting_runs(), 10, "the run to wait for an operator")
        [run] = process.waiting_runs()
        assert process.waiting_detail(run.run_id)["tool"] == "book"
        assert process.dead_letters == [] and calls == []
    finally:
        await process.stop()

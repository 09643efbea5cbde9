"""How many group commits one durable agent run costs, and that a write's result is durable
before anything outside hears of the write (issue 37, the serial limit).

The workload: a scripted model turn asks for one tool call, the tool (``effect: write``)
appends its idempotency key to a ledger, a final scripted reply ends the run. Run one after
another, each run needs three durable points: its event accepted, its tool intent, and its
result with the run's end."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.agent.tools import ToolContext, tool
from runtime_core.events import RunFinished
from runtime_core.governance.hooks import HookContext


def _workload(journal: Path, **extra: Any) -> ProcessConfig:
    return ProcessConfig(
        model={"provider": "scripted",
               "turns": [{"tool_calls": [{"name": "book", "args": {"ref": "inv-1"}}]},
                         {"reply": "booked"}]},
        journal={"path": str(journal)}, **extra)


def _book(ledger: Path) -> Any:
    async def book(ref: str, ctx: ToolContext) -> str:
        """Book a reference in the ledger."""
        with ledger.open("a") as out:
            out.write(f"{ctx.idempotency_key} {ref}\n")
        return "booked " + ref
    return tool(book, effect="write")


async def _serial_runs(process: AgentProcess, count: int) -> list[RunFinished]:
    """Inject ``count`` events one after another, each once the previous run has ended."""
    ended: asyncio.Queue[RunFinished] = asyncio.Queue()
    process.notifier.add_callback(
        lambda e: ended.put_nowait(e) if isinstance(e, RunFinished) else None)
    finished = []
    for i in range(count):
        await process.inject(TriggerEvent("bench", "manual", {"i": i}))
        finished.append(await asyncio.wait_for(ended.get(), 10))
    return finished


async def test_a_serial_write_run_costs_at_most_three_commits(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    process = AgentProcess("bench", _workload(tmp_path / "j.db"), tools=[_book(ledger)])
    await process.start()
    journal = process.journal
    before = journal.batches  # type: ignore[attr-defined]
    runs = 20
    finished = await _serial_runs(process, runs)
    commits = journal.batches - before  # type: ignore[attr-defined]
    await process.stop()
    assert [f.state for f in finished] == ["succeeded"] * runs
    keys = [line.split()[0] for line in ledger.read_text().splitlines()]
    assert len(keys) == runs == len(set(keys))
    # event accepted | run start, model usage, tool intent | result, model usage, run end
    assert commits <= 3 * runs, f"{commits / runs:.2f} commits a run"


@pytest.mark.slow  # PostgreSQL
async def test_a_serial_write_run_costs_at_most_three_commits_on_postgres(
    tmp_path: Path, pg_dsn: str
) -> None:
    ledger = tmp_path / "ledger.txt"
    config = ProcessConfig(
        model={"provider": "scripted",
               "turns": [{"tool_calls": [{"name": "book", "args": {"ref": "inv-1"}}]},
                         {"reply": "booked"}]},
        journal={"backend": "postgres", "dsn": pg_dsn})
    process = AgentProcess("bench", config, tools=[_book(ledger)])
    await process.start()
    journal = process.journal
    before = journal.batches  # type: ignore[attr-defined]
    finished = await _serial_runs(process, 10)
    commits = journal.batches - before  # type: ignore[attr-defined]
    await process.stop()
    assert [f.state for f in finished] == ["succeeded"] * 10
    assert commits <= 3 * 10, f"{commits / 10:.2f} commits a run"


def _results_in(journal: Path, run_id: str) -> int:
    conn = sqlite3.connect(journal)  # another connection: sees only what is committed
    try:
        return int(conn.execute("SELECT count(*) FROM entries WHERE entry_type = 'tool_result' "
                                "AND run_id = ?", (run_id,)).fetchone()[0])
    finally:
        conn.close()


async def test_a_post_tool_hook_hears_of_a_write_only_once_its_result_is_durable(
    tmp_path: Path
) -> None:
    db = tmp_path / "j.db"
    seen: list[int] = []

    async def after_tool(ctx: HookContext) -> None:
        seen.append(_results_in(db, ctx.data["run_id"]))

    process = AgentProcess("hooked", _workload(db, hooks=[
        {"event": "post_tool", "callback": after_tool}]), tools=[_book(tmp_path / "l.txt")])
    await process.start()
    finished = await _serial_runs(process, 3)
    await process.stop()
    assert [f.state for f in finished] == ["succeeded"] * 3
    assert seen == [1, 1, 1]


async def test_a_message_a_write_sent_is_delivered_once_its_result_is_durable(
    tmp_path: Path
) -> None:
    db = tmp_path / "j.db"
    heard: list[int] = []

    async def announce(ctx: ToolContext) -> str:
        """Write, and tell the bus."""
        ctx.emit("booked", {"run_id": ctx.run_id})
        return "ok"

    process = AgentProcess("teller", ProcessConfig(
        model={"provider": "scripted", "turns": [{"tool_calls": [{"name": "announce"}]},
                                                  {"reply": "told"}]},
        journal={"path": str(db)}), tools=[tool(announce, effect="write")])
    process.event_bus.subscribe("booked", lambda message: heard.append(
        _results_in(db, message["data"]["run_id"])))
    await process.start()
    finished = await _serial_runs(process, 2)
    await process.stop()
    assert [f.state for f in finished] == ["succeeded"] * 2
    assert heard == [1, 1]


async def test_the_next_pre_tool_hook_hears_of_a_write_only_once_its_result_is_durable(
    tmp_path: Path
) -> None:
    db = tmp_path / "j.db"
    seen: list[int] = []

    async def before_tool(ctx: HookContext) -> None:
        seen.append(_results_in(db, ctx.data["run_id"]))

    config = ProcessConfig(
        model={"provider": "scripted",
               "turns": [{"tool_calls": [{"name": "book", "args": {"ref": "a"}},
                                         {"name": "book", "args": {"ref": "b"}}]},
                         {"reply": "booked"}]},
        journal={"path": str(db)}, hooks=[{"event": "pre_tool", "callback": before_tool}])
    process = AgentProcess("hooked", config, tools=[_book(tmp_path / "l.txt")])
    await process.start()
    finished = await _serial_runs(process, 1)
    await process.stop()
    assert finished[0].state == "succeeded"
    assert seen == [0, 1]  # the second call's hook: the first call's result is durable

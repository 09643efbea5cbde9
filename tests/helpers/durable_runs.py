"""Issue 37's workload in a test: a process whose every event is one durable agent run (a
scripted model turn asking for one write tool call, the call, a final reply) on an SQLite
journal, and the bytes that journal uses."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent
from runtime_core.agent.tools import tool
from tests.helpers.polling import wait_for

MODEL = {"provider": "scripted", "turns": [
    {"tool_calls": [{"name": "book", "args": {"ref": "$payload.ref"}}]}, {"reply": "booked"}]}


def book(ref: str, ctx: ToolContext) -> str:
    """Book a reference (a write: the ledger is the test's, the key is the run's step)."""
    return f"booked {ref} as {ctx.idempotency_key}"


def config(path: Path) -> ProcessConfig:
    """The workload's process configuration, journaling to ``path``."""
    return ProcessConfig(model=MODEL, journal={"path": str(path)})


def workload_process(path: Path) -> AgentProcess:
    """A process named ``bench`` running the workload on the journal at ``path``."""
    return AgentProcess("bench", config(path), tools=[tool(book, effect="write")])


async def run_workload(path: Path, runs: int) -> AgentProcess:
    """Run ``runs`` events one after the other on the journal at ``path``, then stop."""
    process = workload_process(path)
    await process.start()
    for i in range(runs):
        await process.inject(TriggerEvent("bench", "manual", {"ref": f"inv-{i}"}))
        await wait_for(lambda n=i: process.invocation_count > n,  # type: ignore[misc]
                       timeout=30)
    await process.stop()
    return process


def used_bytes(path: Path) -> int:
    """The bytes the journal's pages in use take (its WAL checkpointed first)."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        return int((pages - free) * conn.execute("PRAGMA page_size").fetchone()[0])

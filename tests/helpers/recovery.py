"""A process dropped the way a crash drops it, and an outside system whose writes show whether a
recovered run wrote twice."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime_core import AgentProcess, ToolContext, tool


class Ledger:
    """An outside system: records every write with its idempotency key."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.gate: asyncio.Event | None = None  # set: the write blocks until released

    def tools(self) -> list[Any]:
        async def record(item: str, ctx: ToolContext) -> str:
            if self.gate is not None:
                await self.gate.wait()
            self.writes.append(ctx.idempotency_key)
            ctx.set("count", int(ctx.get("count", 0)) + 1)
            return f"recorded {item}"

        async def peek(ctx: ToolContext) -> int:
            if self.gate is not None:
                await self.gate.wait()
            return int(ctx.get("count", 0))

        return [tool(record, effect="write"), tool(peek, effect="read")]


async def abandon(process: AgentProcess) -> None:
    """Drop a process without stop(): its tasks die, nothing more is journaled (a crash)."""
    recorder = process._core.recorder  # a crash: from here on nothing reaches the journal
    assert recorder is not None
    recorder.sealed = True
    tasks = [t for t in asyncio.all_tasks() if t.get_name().startswith(f"{process.name}-")]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

"""A journal a real process wrote: "books" booked three invoices, one run each, with a
checkpoint journal at a path (for the rewind, fork and confirmation tests)."""

from __future__ import annotations

from pathlib import Path

from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent
from tests.helpers.polling import wait_for

MODEL = {"provider": "scripted", "turns": [
    {"tool_calls": [{"name": "book", "args": {"invoice": "$payload.invoice"}}]},
    {"reply": "Booked."}]}


def book(ctx: ToolContext, invoice: str) -> str:
    ctx.set("booked", int(ctx.get("booked", 0)) + 1)
    return f"booked {invoice}"


def config(path: Path) -> ProcessConfig:
    return ProcessConfig(model=MODEL, journal={"level": "checkpoint", "path": str(path)})


async def make_history(path: Path) -> None:
    """Three runs of "books" (invoices A-1, A-2, A-3) journaled at ``path``."""
    process = AgentProcess("books", config(path), tools=[book])
    await process.start()
    for invoice in ("A-1", "A-2", "A-3"):
        before = process.invocation_count
        await process.inject(TriggerEvent("t", "manual", {"invoice": invoice}))
        await wait_for(lambda b=before: process.invocation_count > b)  # type: ignore[misc]
    await process.close()


async def state_after_start(path: Path, name: str = "books") -> tuple[object, int]:
    """(how many bookings the context holds, how many messages) once ``name`` recovered."""
    process = AgentProcess(name, config(path), tools=[book])
    await process.start()
    state = (process.context.get("booked"), len(process.conversation.messages()))
    await process.close()
    return state

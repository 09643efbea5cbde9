"""A process to rewind in every mode, on any transport: ``books`` books invoices through its
context (``booked`` counts them) and keeps a conversation; ``what_mode_did`` says which of the
spec's modes a rewind to the second run's start behaved as."""

from __future__ import annotations

from typing import Any

from runtime_core import AgentProcess, AgentRuntime, ProcessConfig, ToolContext, TriggerEvent
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from tests.helpers.polling import wait_for

MODEL = {"provider": "scripted", "turns": [
    {"tool_calls": [{"name": "book", "args": {"invoice": "$payload.invoice"}}]},
    {"reply": "Booked."}]}


def book(ctx: ToolContext, invoice: str) -> str:
    ctx.set("booked", int(ctx.get("booked", 0)) + 1)
    return f"booked {invoice}"


def books_runtime() -> AgentRuntime:
    """A runtime with ``books`` (an in-memory journal), not started."""
    runtime = AgentRuntime()
    runtime.add_process("books", ProcessConfig(
        model=MODEL, journal={"level": "checkpoint", "backend": "memory"}), tools=[book])
    return runtime


async def booked_twice(process: AgentProcess) -> str:
    """Run two invoices; the id of the second run's start (PROCESS:SEQ), to rewind to."""
    for n, invoice in enumerate(("A-1", "A-2"), start=1):
        await process.inject(TriggerEvent("t", "manual", {"invoice": invoice}))
        await wait_for(lambda n=n: process.invocation_count == n,  # type: ignore[misc]
                       what=f"run {n}")
    journal = process.journal
    assert journal is not None
    await journal.flush()
    starts = await journal.read(ReadFilter(process="books", entry_type=EntryType.RUN_STARTED))
    return starts[1].entry_id


def what_mode_did(process: AgentProcess, messages_before: int) -> str:
    """Which mode a rewind of ``books`` to its second run's start acted as (two runs booked,
    ``messages_before`` in the conversation then): the context (booked 2 -> 1) and the
    conversation (cut to the first run's, kept, or a summary message added)."""
    booked = process.context.get("booked")
    messages: list[dict[str, Any]] = list(process.conversation.messages())
    if len(messages) == messages_before + 1 and \
            str(messages[-1].get("content", "")).startswith("[rewind summary]"):
        conversation = "summarized"
    elif len(messages) == messages_before:
        conversation = "kept"
    elif len(messages) == messages_before // 2:
        conversation = "cut"
    else:
        conversation = f"{len(messages)} messages of {messages_before}"
    return {(1, "cut"): "both", (2, "cut"): "conversation_only", (1, "kept"): "code_only",
            (2, "summarized"): "summarize", (2, "kept"): "cancel"}.get(
        (booked, conversation), f"booked {booked}, conversation {conversation}")

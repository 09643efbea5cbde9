"""remember / recall / forget: long-term memory offered to the agent as tools.

remember and forget change durable state, so they are writes (journaled as intents first, and
listed by a rewind plan as outside effects that stay done); recall only reads."""

from __future__ import annotations

from collections.abc import Collection

from runtime_core.agent.tools import Tool, ToolContext, ToolError, tool
from runtime_core.memory.provider import MemoryProvider

MEMORY_TOOL_NAMES = ("remember", "recall", "forget")
MAX_ITEM_CHARS = 8_000  # one note, not a document: the prompt it may be injected into is finite
MAX_RECALL = 20


def memory_tools(provider: MemoryProvider, taken: Collection[str] = ()) -> dict[str, Tool]:
    """The three tools, bound to ``provider`` (a process rebuilds them on every start).
    ``taken``: names of the process's other tools; a clash is refused, never shadowed."""
    clash = sorted(set(MEMORY_TOOL_NAMES) & set(taken))
    if clash:
        raise ToolError(f"tool {clash[0]!r} has the name of a memory tool; rename it, or set "
                        "memory.tools: false to keep long-term memory without its tools")

    async def remember(text: str, ctx: ToolContext, tags: list[str] | None = None) -> str:
        """Store a note in long-term memory for later runs (it outlives this conversation);
        tags are optional labels."""
        if not text.strip():
            raise ValueError("nothing to remember: text is empty")
        if len(text) > MAX_ITEM_CHARS:
            raise ValueError(f"text has {len(text)} characters; a memory holds at most "
                             f"{MAX_ITEM_CHARS}: store a shorter note")
        metadata = {"source": "agent", "run_id": ctx.run_id, "tags": list(tags or [])}
        item_id = await provider.add(text, metadata)
        return f"Remembered (id={item_id})."

    async def recall(query: str, limit: int = 5) -> str:
        """Search long-term memory for notes stored in earlier runs, best match first."""
        found = await provider.search(query, max(1, min(limit, MAX_RECALL)))
        if not found:
            return "No memories match."
        return "\n".join(f"- [{item.id}] (score={item.score:.2f}) {item.text}" for item in found)

    async def forget(memory_id: str) -> str:
        """Delete one note from long-term memory by the id recall showed."""
        if await provider.delete(memory_id):
            return f"Forgot {memory_id}."
        return f"No memory with id {memory_id!r}."

    return {
        "remember": tool(remember, effect="write"),
        "recall": tool(recall, effect="read"),
        "forget": tool(forget, effect="write"),
    }

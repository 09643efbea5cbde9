"""An MCP server (stdio) for the protocol extras: log messages, progress, images, resources,
resource links and a tool that runs only as an MCP task.

``slow_job`` reports progress and then waits until the file named by its ``release`` argument
exists, so a test can look at the progress while the call is still running.
"""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    CallToolResult,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolAnnotations,
    ToolExecution,
)

READ = ToolAnnotations(read_only_hint=True)
PNG_HEAD = b"\x89PNG\r\n\x1a\n"


class ExtrasServer(MCPServer):
    async def list_tools(self) -> list[Any]:
        tools = await super().list_tools()
        for tool in tools:  # the 2025-11 spec's execution.taskSupport, which FastMCP cannot set
            if tool.name == "deep_research":
                tool.execution = ToolExecution(task_support="required")
        return tools


server = ExtrasServer("test-extras", log_level="WARNING")


def png(size: int) -> bytes:
    return (PNG_HEAD + bytes(range(256)) * (size // 256 + 1))[:size]


@server.tool(annotations=READ)
async def chatter(count: int, ctx: Context) -> str:
    """Sends ``count`` log messages (info), one debug message, then answers."""
    await ctx.debug("a debug line nobody asked for")
    for n in range(count):
        await ctx.info(f"line {n} of {count}", logger_name="chatter")
    return f"sent {count}"


@server.tool(annotations=READ)
async def slow_job(steps: int, release: str, ctx: Context) -> str:
    """Reports progress ``steps`` times, then waits for the file ``release`` to exist."""
    for n in range(1, steps + 1):
        await ctx.report_progress(n, steps, f"working on part {n}")
    deadline = time.monotonic() + 30
    while not Path(release).exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return "finished"


@server.tool(annotations=READ)
def picture(size: int) -> CallToolResult:
    """A PNG of ``size`` bytes, with a caption."""
    data = base64.b64encode(png(size)).decode()
    return CallToolResult(content=[TextContent(text="here is the picture"),
                                   ImageContent(data=data, mime_type="image/png")])


@server.tool(annotations=READ)
def linked() -> CallToolResult:
    """A link to a resource instead of its content."""
    return CallToolResult(content=[ResourceLink(uri="memo://notes/first", name="first note",
                                                mime_type="text/plain")])


@server.tool()
def deep_research(topic: str) -> str:
    """Runs only as an MCP task (never offered by promptui)."""
    return f"researched {topic}"


@server.resource("memo://notes/first", mime_type="text/plain")
def first_note() -> str:
    """The first note."""
    return "remember the milk"


@server.resource("memo://blob/logo", mime_type="image/png")
def logo() -> bytes:
    """A small PNG."""
    return png(300)


@server.resource("memo://notes/{name}", mime_type="text/plain")
def note(name: str) -> str:
    """Any note, by name."""
    return f"note {name}"


if __name__ == "__main__":
    server.run()

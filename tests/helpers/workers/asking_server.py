"""An MCP server for the tests whose tools ask back during the call (stdio, or streamable HTTP
with --http): ``book`` asks the operator a question (elicitation), ``summarize`` asks the
client's model for a completion (sampling). Each returns what it got, so a test can see what
reached the server."""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import warnings
from typing import Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

warnings.simplefilter("ignore")  # sampling is deprecated on the 2026 wire; still spoken here
server = MCPServer("test-asking", log_level="WARNING")


class Booking(BaseModel):
    name: str = Field(description="Who travels")
    seats: int = Field(ge=1, le=9, description="How many seats")
    window: bool = Field(default=False, description="A window seat")
    meal: Literal["none", "veggie", "fish"] = "none"


@server.tool()
async def book(flight: str, ctx: Context) -> str:
    """Book seats on a flight; asks the operator for the traveller's details."""
    answer = await ctx.elicit(f"Booking {flight}: who travels, and how many seats?", Booking)
    if answer.action == "accept":
        return f"accept {json.dumps(answer.data.model_dump(), sort_keys=True)}"
    return answer.action


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def summarize(text: str, ctx: Context) -> str:
    """Summarise ``text`` with the client's model (sampling)."""
    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=text))],
        max_tokens=50, system_prompt="You summarise in five words.")
    content = result.content
    return f"{result.model}: {getattr(content, 'text', '')}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def declared(ctx: Context) -> str:
    """What the client declared it can answer: elicitation and sampling."""
    caps = ctx.session.client_capabilities
    return json.dumps({"elicitation": caps is not None and caps.elicitation is not None,
                       "sampling": caps is not None and caps.sampling is not None})


async def serve_http() -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    print(f"LISTENING http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    if parser.parse_args().http:
        asyncio.run(serve_http())
    else:
        server.run()
    sys.exit(0)

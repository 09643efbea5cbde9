"""An MCP server for the tests (stdio, or streamable HTTP with --http --port 0).

``record`` appends one line per call to the ledger file named by LEDGER, keyed by the
idempotency key promptui fills in, so the crash tests can check that no write ran twice.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("test-ledger", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def peek() -> int:
    """A read: how many ledger lines so far."""
    path = Path(os.environ["LEDGER"])
    return len(path.read_text().splitlines()) if path.exists() else 0


@server.tool()
def record(item: str, event_id: str, idempotency_key: str) -> str:
    """A write with an outside effect: one ledger line per call (no annotations: a write)."""
    line = f"{idempotency_key} {event_id} {item}\n".encode()
    fd = os.open(os.environ["LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:  # one write(2) of a short line: a kill cannot leave half a line behind
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    return "written"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami(ctx: Context) -> dict[str, object]:
    """The server's pid, and the Authorization header it was sent (over HTTP)."""
    headers = ctx.headers or {}
    return {"pid": os.getpid(), "authorization": headers.get("authorization", "")}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def refuse(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ToolError(f"refused: {reason}")


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

"""An MCP server for the link tests: it can be killed mid-call and restarted on the same port.

stdio by default; ``--http --port N`` serves streamable HTTP on 127.0.0.1:N (0: a free port),
printing ``LISTENING <url>`` once it accepts connections. ``record`` and ``slow_record`` append
one line per call to the file named by LEDGER (``slow_record`` after ``seconds``, and a line to
STARTED first, so a test knows the call reached the server); ``peek`` and ``slow_peek`` are reads.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("test-flaky", log_level="WARNING")


def _append(variable: str, line: str) -> None:
    path = os.environ.get(variable)
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def peek() -> str:
    """A read: the server's pid and how many ledger lines so far."""
    path = Path(os.environ.get("LEDGER", "/nonexistent"))
    lines = len(path.read_text().splitlines()) if path.exists() else 0
    return f"pid={os.getpid()} lines={lines}"


@server.tool()
def record(item: str, idempotency_key: str) -> str:
    """A write: one ledger line per call."""
    _append("LEDGER", f"{idempotency_key} {item}\n")
    return f"recorded {item}"


@server.tool()
async def slow_record(item: str, seconds: float, idempotency_key: str) -> str:
    """A write that takes ``seconds`` before it writes its ledger line."""
    _append("STARTED", f"{idempotency_key} {item}\n")
    await asyncio.sleep(seconds)
    _append("LEDGER", f"{idempotency_key} {item}\n")
    return f"recorded {item}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow_peek(seconds: float) -> str:
    """A read that takes ``seconds``."""
    _append("STARTED", f"peek {time.time()}\n")
    await asyncio.sleep(seconds)
    return f"pid={os.getpid()}"


async def serve_http(port: int) -> None:
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart takes the same port
    sock.bind(("127.0.0.1", port))
    sock.listen(16)
    print(f"LISTENING http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    if options.http:
        asyncio.run(serve_http(options.port))
    else:
        server.run()
    sys.exit(0)

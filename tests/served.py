"""A real HTTP control API in the test's own event loop: uvicorn on 127.0.0.1, port 0 (or a
given port, to come back on the same address), over a LocalControl."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from runtime_core import AgentRuntime
from runtime_core.api.server import create_app, make_server
from runtime_core.control import LocalControl

TOKEN = "test-token-0123456789abcdef"


@asynccontextmanager
async def served(runtime: AgentRuntime, *, port: int = 0, read_only: bool = False,
                 name: str = "t", **options: Any) -> AsyncIterator[str]:
    """The server's URL while the block runs; the runtime is closed when it ends (as a
    stopping server does)."""
    app = create_app(LocalControl(runtime, name=name), token=TOKEN, read_only=read_only,
                     **options)
    urls: list[str] = []
    server = make_server(app, host="127.0.0.1", port=port, on_ready=urls.append)
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + 10
    while not urls:
        if task.done():
            task.result()  # raises what stopped it
            raise RuntimeError("the server stopped before it listened")
        if time.monotonic() > deadline:
            raise TimeoutError("the server did not start listening")
        await asyncio.sleep(0.01)
    try:
        yield urls[0]
    finally:
        server.handle_exit(15, None)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 15)


async def eventually(predicate: Any, timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        await asyncio.sleep(0.02)

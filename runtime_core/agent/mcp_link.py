"""One live connection to an MCP server, with the official ``mcp`` SDK.

The SDK's transports are anyio context managers that must be entered and left in one task, while
a process connects in ``start()`` and disconnects from ``stop()`` or a restart (other tasks). So
each connection lives in a task of its own: it connects, lists the tools, then waits to be told to
close; calls are made from the run's task through the session. A server that goes away is
reconnected before the next call, never in the middle of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from runtime_core.agent.mcp_config import (
    HttpServerConfig,
    StdioServerConfig,
    resolve_command,
    resolve_references,
    stdio_cwd,
)

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult, RequestParamsMeta

ERRLOG_LIMIT = 1_000_000  # bytes of a stdio server's stderr kept before the log is restarted
CLOSE_TIMEOUT = 10.0


class McpServerError(RuntimeError):
    """A server could not be connected, or its connection was lost."""


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool as the server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool | None
    destructive: bool | None
    idempotent: bool | None


def _remote_tool(tool: Any) -> RemoteTool:
    hints = tool.annotations
    return RemoteTool(
        name=tool.name,
        description=(tool.description or tool.title or "").strip(),
        input_schema=dict(tool.input_schema or {"type": "object"}),
        read_only=getattr(hints, "read_only_hint", None),
        destructive=getattr(hints, "destructive_hint", None),
        idempotent=getattr(hints, "idempotent_hint", None),
    )


class McpServerLink:
    def __init__(self, name: str, config: StdioServerConfig | HttpServerConfig, *,
                 base_dir: Path | None = None) -> None:
        self.name = name
        self.config = config
        self.base_dir = base_dir
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._lost: str | None = None  # why the last connection ended, if it did
        self._errlog: TextIO | None = None
        self._reconnect_lock = asyncio.Lock()
        self.connections = 0  # how many times this link connected (restarts and reconnects)

    @property
    def connected(self) -> bool:
        return self._session is not None and self._lost is None

    async def connect(self) -> list[RemoteTool]:
        """Connect and list the server's tools, within the configured timeout."""
        await self.close()
        self._closing = asyncio.Event()
        self._lost = None
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[list[RemoteTool]] = loop.create_future()
        self._task = asyncio.create_task(self._serve(ready), name=f"mcp-{self.name}")
        try:
            async with asyncio.timeout(self.config.timeout):
                tools = await asyncio.shield(ready)
        except TimeoutError:
            await self.close()
            raise McpServerError(f"MCP server {self.name!r} did not answer within "
                                 f"{self.config.timeout:g} s{self._stderr_tail()}; check that "
                                 "it speaks MCP, or raise its timeout") from None
        except McpServerError:
            await self.close()
            raise
        self.connections += 1
        return tools

    async def _serve(self, ready: asyncio.Future[list[RemoteTool]]) -> None:
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                if isinstance(self.config, StdioServerConfig):
                    read = await stack.enter_async_context(self._watched(read))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                tools = await self._list_tools(session)
                self._session = session
                if not ready.done():
                    ready.set_result(tools)
                await self._closing.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except Exception as exc:  # anyio wraps failures in exception groups
            reason = _describe(exc)
            self._lost = reason
            if not ready.done():
                ready.set_exception(McpServerError(
                    f"MCP server {self.name!r} could not be connected: {reason}"
                    f"{self._stderr_tail()}"))
        finally:
            self._session = None

    @contextlib.asynccontextmanager
    async def _watched(self, read: Any) -> Any:
        """Pass the server's messages through, noting when its stream ends (the server
        exited), so the next call reconnects instead of failing on a dead connection."""
        import anyio

        sender, receiver = anyio.create_memory_object_stream[Any](0)

        async def forward() -> None:
            async with sender:
                try:
                    async for item in read:
                        await sender.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    pass
            if not self._closing.is_set():
                self._lost = "the server closed the connection"

        task = asyncio.create_task(forward(), name=f"mcp-{self.name}-read")
        try:
            yield receiver
        finally:
            task.cancel()
            await asyncio.wait({task})
            receiver.close()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        if isinstance(self.config, StdioServerConfig):
            from mcp import StdioServerParameters, stdio_client

            where = f"servers.{self.name}.env"
            env = {key: resolve_references(value, f"{where}.{key}")
                   for key, value in self.config.env.items()}
            params = StdioServerParameters(
                command=resolve_command(self.config.command, self.base_dir),
                args=list(self.config.args), env=env or None,
                cwd=stdio_cwd(self.config, self.base_dir))
            self._errlog = self._errlog or cast(TextIO, tempfile.TemporaryFile(  # noqa: SIM115
                mode="a+", encoding="utf-8", errors="replace"))  # kept open for the tail
            return stdio_client(params, errlog=self._errlog)
        return self._http_transport(self.config)

    @contextlib.asynccontextmanager
    async def _http_transport(self, config: HttpServerConfig) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        where = f"servers.{self.name}"
        headers = {key: resolve_references(value, f"{where}.headers.{key}")
                   for key, value in config.headers.items()}
        if config.bearer_token is not None:
            token = resolve_references(config.bearer_token, f"{where}.bearer_token")
            headers["Authorization"] = f"Bearer {token}"
        timeout = httpx2.Timeout(config.timeout, read=300.0)
        async with (httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
                    streamable_http_client(config.url, http_client=client) as streams):
            yield streams

    @staticmethod
    async def _list_tools(session: ClientSession) -> list[RemoteTool]:
        from mcp.types import PaginatedRequestParams

        tools: list[RemoteTool] = []
        cursor: str | None = None
        for _ in range(1000):  # a server that pages forever is cut off
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(_remote_tool(tool) for tool in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def call(self, tool: str, args: dict[str, Any], meta: dict[str, Any]
                   ) -> CallToolResult:
        """Call ``tool``; a connection found lost beforehand is re-established first. A
        connection lost during the call is reported, not retried: the outcome is unknown."""
        from mcp import MCPError

        session = await self._usable_session()
        self._trim_errlog()
        try:
            result = await session.call_tool(tool, args, meta=cast("RequestParamsMeta", meta))
        except MCPError as exc:
            if exc.code == -32000:  # CONNECTION_CLOSED
                self._lost = exc.message
                raise McpServerError(
                    f"MCP server {self.name!r} went away during {tool!r} ({exc.message}); "
                    "whether the call took effect is unknown") from None
            raise
        return result

    async def _usable_session(self) -> ClientSession:
        async with self._reconnect_lock:
            if self._session is None or self._lost is not None:
                if self._task is None:
                    raise McpServerError(f"MCP server {self.name!r} is not connected (the "
                                         "process is not running)")
                await self.connect()  # the tools are the same server's; names were checked
            assert self._session is not None
            return self._session

    async def close(self) -> None:
        """Close the session; a stdio server's stdin is closed and the server exits."""
        task, self._task = self._task, None
        if task is not None:
            self._closing.set()
            if self._session is None:  # still connecting: nothing to close politely
                task.cancel()
            # wait() neither raises the task's end nor cancels it if we are cancelled
            done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
        self._session = None

    def release(self) -> None:
        """Drop the stderr log; the link is not used again."""
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None

    def _trim_errlog(self) -> None:
        log = self._errlog
        if log is not None and os.fstat(log.fileno()).st_size > ERRLOG_LIMIT:
            log.truncate(0)

    def _stderr_tail(self, limit: int = 600) -> str:
        log = self._errlog
        if log is None:
            return ""
        try:
            log.flush()
            log.seek(0)
            text = log.read()[-limit:].strip()
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends: {text}" if text else ""


def _describe(exc: BaseException) -> str:
    """One line for an error, looking inside anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"cannot start the command: {exc.strerror}: {exc.filename}"
    text = str(exc) or type(exc).__name__
    if type(exc).__name__ in ("ConnectError", "ConnectTimeout"):
        return f"connection refused or unreachable ({text})"
    return text if isinstance(exc, McpServerError | ValueError) else f"{type(exc).__name__}: {text}"

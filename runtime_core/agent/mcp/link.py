"""One live connection to an MCP server, with the official ``mcp`` SDK.

The SDK's transports are anyio context managers that must be entered and left in one task, while
a process connects in ``start()`` and disconnects from ``stop()`` or a restart (other tasks). So
each connection lives in a task of its own: it connects, lists the tools, then waits to be told to
close; calls are made from the run's task through the session.

A connection that is lost is re-established in the background (a keeper task, with backoff:
mcp_reconnect.py) until the link is closed; a call waits for it up to the server's
``call_timeout``. A call is sent again only when it certainly did not take effect (it never
reached the server, or an HTTP server refused it because its session is gone after a restart:
mcp_probe.py), or when it is a read. Otherwise its outcome is unknown (``OutcomeUnknown``): a
write parks its run for an operator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from runtime_core.agent.mcp.asks import ServerAsks
from runtime_core.agent.mcp.config import (
    HttpServerConfig,
    StdioServerConfig,
    resolve_command,
    resolve_references,
    stdio_cwd,
)
from runtime_core.agent.mcp.notices import SessionHooks
from runtime_core.agent.mcp.probe import ProbedClient, RequestProbe, probing
from runtime_core.agent.mcp.reconnect import (
    CLOSED,
    CONNECTED,
    CONNECTING,
    Backoff,
    LinkStatus,
    reconnecting,
)
from runtime_core.agent.tools import OutcomeUnknown

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.shared.dispatcher import ProgressFnT
    from mcp.types import CallToolResult, ReadResourceResult, RequestParamsMeta

log = logging.getLogger(__name__)

ERRLOG_LIMIT = 1_000_000  # bytes of a stdio server's stderr kept before the log is restarted
CLOSE_TIMEOUT = 10.0
CONNECTION_CLOSED = -32000  # the SDK's code for a connection that ended under a request


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
    task_support: str | None = None  # "required": only callable as an MCP task


def _remote_tool(tool: Any) -> RemoteTool:
    hints = tool.annotations
    return RemoteTool(
        name=tool.name,
        description=(tool.description or tool.title or "").strip(),
        input_schema=dict(tool.input_schema or {"type": "object"}),
        read_only=getattr(hints, "read_only_hint", None),
        destructive=getattr(hints, "destructive_hint", None),
        idempotent=getattr(hints, "idempotent_hint", None),
        task_support=getattr(getattr(tool, "execution", None), "task_support", None),
    )


class McpServerLink:
    def __init__(self, name: str, config: StdioServerConfig | HttpServerConfig, *,
                 base_dir: Path | None = None) -> None:
        self.name = name
        self.config = config
        self.base_dir = base_dir
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()  # this connection is to end (the link closes)
        self._gone = asyncio.Event()  # this connection is found broken: end it, reconnect
        self._up = asyncio.Event()  # set while a connection is usable
        self._keeper: asyncio.Task[None] | None = None  # reconnects; None: the link is closed
        self._lost: str | None = None  # why the last connection ended, if it did
        self._errlog: TextIO | None = None
        self.status: LinkStatus = CLOSED
        self.backoff = Backoff()
        self.connections = 0  # how many times this link connected (restarts and reconnects)
        self.hooks = SessionHooks()  # server logs, capabilities, resources (mcp_notices.py)
        self.asks = ServerAsks.for_config(name, config)  # elicitation, sampling (mcp_asks.py)

    @property
    def connected(self) -> bool:
        return self._session is not None and self._up.is_set()

    async def connect(self) -> list[RemoteTool]:
        """Connect and list the server's tools, within the configured timeout (a failure is
        raised: the process does not start). From then on a lost connection is re-established
        in the background until ``close()``."""
        await self.close()
        self.status = CONNECTING
        try:
            tools = await self._open()
        except McpServerError as exc:
            self.status = LinkStatus("down", reason=str(exc))
            raise
        self._keeper = asyncio.create_task(self._keep(), name=f"mcp-{self.name}-keeper")
        return tools

    async def _open(self) -> list[RemoteTool]:
        """One connection attempt; on failure nothing of it is left running."""
        self._closing, self._gone, self._lost = asyncio.Event(), asyncio.Event(), None
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[list[RemoteTool]] = loop.create_future()
        task = self._task = asyncio.create_task(self._serve(ready), name=f"mcp-{self.name}")
        try:
            async with asyncio.timeout(self.config.timeout):
                tools = await asyncio.shield(ready)
        except TimeoutError:
            await self._end(task)
            raise McpServerError(f"MCP server {self.name!r} did not answer within "
                                 f"{self.config.timeout:g} s{self._stderr_tail()}; check that "
                                 "it speaks MCP, or raise its timeout") from None
        except BaseException:  # McpServerError, or cancelled by close()
            await self._end(task)
            raise
        self.connections += 1
        self.status = CONNECTED
        self._up.set()
        return tools

    async def _keep(self) -> None:
        """Wait for the connection to end, then reconnect with backoff; again, until closed."""
        while True:
            task = self._task
            if task is not None:
                await asyncio.wait({task})
            self._up.clear()
            reason = self._lost or "the connection ended"
            attempt = 0
            while True:
                attempt += 1
                delay = self.backoff.delay(attempt)
                self.status = reconnecting(attempt, delay, reason)
                if delay > 0:
                    await asyncio.sleep(delay)
                    self.status = reconnecting(attempt, 0.0, reason)
                try:
                    await self._open()
                except Exception as exc:  # whatever it is, the next attempt may do better
                    reason = str(exc) if isinstance(exc, McpServerError) else _describe(exc)
                    continue
                log.info("MCP server %s: reconnected (attempt %d)", self.name, attempt)
                break

    def _drop(self, reason: str) -> None:
        """This connection is broken: no call uses it again; the keeper reconnects."""
        if self._lost is None:
            self._lost = reason
        self._up.clear()
        self.asks.connection_lost(reason)  # before the session's end cancels its questions
        self._gone.set()

    async def _serve(self, ready: asyncio.Future[list[RemoteTool]]) -> None:
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                if isinstance(self.config, StdioServerConfig):
                    read = await stack.enter_async_context(self._watched(read))
                session = await stack.enter_async_context(ClientSession(
                    read, write, logging_callback=self.hooks.on_log, **self.asks.callbacks()))
                await session.initialize()
                await self.hooks.initialized(session)
                tools = await self._list_tools(session)
                self._session = session
                if not ready.done():
                    ready.set_result(tools)
                await _first(self._closing, self._gone)
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except Exception as exc:  # anyio wraps failures in exception groups
            reason = _describe(exc)
            self._lost = self._lost or reason
            self._up.clear()
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
                self._drop("the server closed the connection")

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
        # ProbedClient tells a call whether its request was refused for a lost session.
        async with (ProbedClient(headers=headers, timeout=timeout) as client,
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

    async def call(self, tool: str, args: dict[str, Any], meta: dict[str, Any],
                   progress: ProgressFnT | None = None, *, read: bool = False
                   ) -> CallToolResult:
        """Call ``tool`` within the server's ``call_timeout``, a wait for a lost link included.
        It is sent again, once, only if it certainly did not take effect (never sent, or
        refused for a lost session) or if it is a ``read``. Otherwise a call cut off (the
        connection lost, the server gone, the timeout) raises OutcomeUnknown."""
        from mcp import MCPError

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.call_timeout
        with self.asks.calling(tool, meta):  # what the server asks meanwhile is this call's
            for attempt in (1, 2):
                session = await self._usable_session(deadline, repr(tool))
                self._trim_errlog()
                with probing() as probe:
                    try:  # a question waiting for the operator does not count (mcp_asks.py)
                        async with self.asks.timeout(max(0.0, deadline - loop.time())):
                            return await session.call_tool(
                                tool, args, meta=cast("RequestParamsMeta", meta),
                                progress_callback=progress)
                    except TimeoutError:
                        raise OutcomeUnknown(
                            f"MCP server {self.name!r} did not answer {tool!r} within "
                            f"{self.config.call_timeout:g} s (servers.{self.name}.call_timeout); "
                            "whether the call took effect is unknown") from None
                    except MCPError as exc:
                        why = self._broken(exc, probe)
                        if why is None:  # the server's own answer: an error the model reads
                            raise
                self._drop(why)
                if attempt == 1 and (probe.safe_to_resend or read):
                    log.info("MCP server %s: sending %r again on a new connection (%s)",
                             self.name, tool, why)
                    continue
                if probe.safe_to_resend:
                    raise McpServerError(f"MCP server {self.name!r}: {tool!r} was not sent "
                                         f"({why})")
                raise OutcomeUnknown(f"MCP server {self.name!r} went away during {tool!r} "
                                     f"({why}); whether the call took effect is unknown")
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _broken(exc: Any, probe: RequestProbe) -> str | None:
        """Why the connection is no longer usable, or None if ``exc`` is the server's answer."""
        if probe.session_lost:
            return f"its session is gone, the server restarted: {exc.message}"
        if probe.not_sent:
            return probe.not_sent
        if exc.code == CONNECTION_CLOSED:
            return str(exc.message or "connection closed")
        return None

    async def read_resource(self, uri: str) -> ReadResourceResult:
        """``resources/read``: a read, so a connection lost meanwhile is simply an error."""
        session = await self._usable_session()
        return await session.read_resource(uri)

    async def _usable_session(self, deadline: float | None = None, what: str = "the call"
                              ) -> ClientSession:
        """The live session. While the keeper reconnects, wait for it until ``deadline``
        (default: the call timeout from now); then the call is not sent."""
        if deadline is None:
            deadline = asyncio.get_running_loop().time() + self.config.call_timeout
        while not self.connected:
            if self._keeper is None:
                raise McpServerError(f"MCP server {self.name!r} is not connected (the "
                                     "process is not running)")
            try:
                async with asyncio.timeout_at(deadline):
                    await self._up.wait()
            except TimeoutError:
                raise McpServerError(
                    f"MCP server {self.name!r} is not connected: {self.status.text()} "
                    f"({self.status.reason}); {what} was not sent within "
                    f"{self.config.call_timeout:g} s (servers.{self.name}.call_timeout)"
                ) from None
        assert self._session is not None
        return self._session

    async def close(self) -> None:
        """Close the session (a stdio server's stdin is closed and the server exits) and stop
        reconnecting: nothing of the link is left running."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None and keeper is not asyncio.current_task():
            keeper.cancel()
            await asyncio.wait({keeper})
        task, self._task = self._task, None
        if task is not None:
            await self._end(task)
        self._session = None
        self._up.clear()
        if self.status.state != "down":  # a failed first connection keeps its reason
            self.status = CLOSED

    async def _end(self, task: asyncio.Task[None]) -> None:
        self._closing.set()
        if self._session is None:  # still connecting: nothing to close politely
            task.cancel()
        # wait() neither raises the task's end nor cancels it if we are cancelled
        done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)

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


async def _first(*events: asyncio.Event) -> None:
    """Until one of ``events`` is set."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


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

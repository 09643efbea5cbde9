"""What an MCP connection brings besides tools: the server's log messages and what it says about
itself when it connects (its capabilities, its resources).

A link calls its :class:`SessionHooks` with each session it opens, so this survives reconnects.
Log messages go to the Python log (one logger per server, every message) and, rate-limited, to
the room's activity feed as ``McpServerLog`` events: a chatty server must not drown the feed, so
past ``LOG_LIMIT`` messages in ``LOG_WINDOW`` seconds one line says how many were left out.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runtime_core.events import McpServerLog, RuntimeEvent

if TYPE_CHECKING:
    from mcp import ClientSession

LOG_LEVEL = "info"  # what we ask servers to send: info and above (lower ones are not shown)
LOG_LIMIT = 20  # log events per server per window in the activity feed
LOG_WINDOW = 10.0  # seconds
LOG_TEXT_LIMIT = 1000
RESOURCE_LIMIT = 1000  # resources listed per server (a server that pages forever is cut off)
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
PYTHON_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO,
                 "warning": logging.WARNING, "error": logging.ERROR,
                 "critical": logging.CRITICAL, "alert": logging.CRITICAL,
                 "emergency": logging.CRITICAL}

log = logging.getLogger(__name__)


class LogGate:
    """Lets ``limit`` messages through per ``window`` seconds and counts the rest."""

    def __init__(self, limit: int = LOG_LIMIT, window: float = LOG_WINDOW,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window, self.clock = limit, window, clock
        self._ends = float("-inf")
        self._count = 0
        self.left_out = 0

    def admit(self) -> bool:
        now = self.clock()
        if now >= self._ends:
            self._ends, self._count = now + self.window, 0
        self._count += 1
        if self._count <= self.limit:
            return True
        self.left_out += 1
        return False

    @property
    def seconds_left(self) -> float:
        return max(0.0, self._ends - self.clock())

    def take_left_out(self) -> int:
        count, self.left_out = self.left_out, 0
        return count


def _rank(level: str) -> int:
    return LEVELS.index(level) if level in LEVELS else 1


def log_text(data: Any) -> str:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    return text if len(text) <= LOG_TEXT_LIMIT else text[:LOG_TEXT_LIMIT - 15] + " ...[truncated]"


class SessionHooks:
    """The default: nothing is reported, nothing is learned."""

    log_level: str | None = None
    capabilities: Any = None
    resources: list[Any]
    templates: list[Any]
    listing_error = ""

    def __init__(self) -> None:
        self.resources, self.templates = [], []

    @property
    def has_resources(self) -> bool:
        """The server declares resources and lists some (a server built with a framework
        may declare the capability with nothing behind it)."""
        return getattr(self.capabilities, "resources", None) is not None and bool(
            self.resources or self.templates or self.listing_error)

    async def on_log(self, params: Any) -> None:
        return None

    async def initialized(self, session: ClientSession) -> None:
        """Called by the link right after ``initialize`` (each connection)."""
        self.capabilities = session.server_capabilities

    def close(self) -> None:
        return None


class ServerHooks(SessionHooks):
    """A process's view of one server: its logs reported, its resources listed."""

    def __init__(self, server: str, *, process: str = "",
                 emit: Callable[[RuntimeEvent], None] | None = None,
                 redact: Callable[[str], str] | None = None,
                 gate: LogGate | None = None, list_resources: bool = True) -> None:
        super().__init__()
        self.server, self.process = server, process
        self.emit, self.redact = emit, redact
        self.gate = gate or LogGate(LOG_LIMIT, LOG_WINDOW)  # read now: tests shorten them
        self.log_level = LOG_LEVEL
        self.list_resources = list_resources
        self.logger = logging.getLogger(f"runtime_core.mcp.{process or 'probe'}.{server}")
        self._flush: asyncio.TimerHandle | None = None

    async def initialized(self, session: ClientSession) -> None:
        await super().initialized(session)
        caps = self.capabilities
        if getattr(caps, "logging", None) is not None and self.log_level:
            await self._set_level(session)
        if getattr(caps, "resources", None) is not None and self.list_resources:
            await self._list(session)

    async def _set_level(self, session: ClientSession) -> None:
        from mcp.types import EmptyResult, SetLevelRequest, SetLevelRequestParams

        try:  # sent raw: the SDK's helper warns that 2026 servers dropped it (ours speak 2025)
            await session.send_request(SetLevelRequest(params=SetLevelRequestParams(
                level=self.log_level)), EmptyResult)  # type: ignore[arg-type]
        except Exception as exc:  # a server that refuses still works; its logs stay default
            self.logger.info("server %s refused log level %s: %s", self.server,
                             self.log_level, exc)

    async def _list(self, session: ClientSession) -> None:
        from mcp.types import PaginatedRequestParams

        resources: list[Any] = []
        self.listing_error = ""
        try:
            cursor: str | None = None
            while len(resources) < RESOURCE_LIMIT:
                page = await session.list_resources(
                    params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                resources.extend(page.resources)
                cursor = page.next_cursor
                if not cursor:
                    break
            templates = await session.list_resource_templates()
            self.templates = list(templates.resource_templates)
        except Exception as exc:  # the tools work without it: said in describe(), not fatal
            self.listing_error = f"{type(exc).__name__}: {exc}"
            self.logger.warning("server %s: cannot list its resources: %s", self.server, exc)
        self.resources = resources[:RESOURCE_LIMIT]

    async def on_log(self, params: Any) -> None:
        level = str(getattr(params, "level", "info"))
        text = log_text(getattr(params, "data", ""))
        if self.redact is not None:
            text = self.redact(text)
        source = str(getattr(params, "logger", None) or "")
        self.logger.log(PYTHON_LEVELS.get(level, logging.INFO), "%s%s",
                        f"[{source}] " if source else "", text)
        if self.emit is None or _rank(level) < _rank(self.log_level or "debug"):
            return  # a server that ignores the level asked for is not shown below it
        if self.gate.admit():
            self._send(level, text, source)
        elif self._flush is None:  # one summary line when the window closes
            self._flush = asyncio.get_running_loop().call_later(self.gate.seconds_left,
                                                                self._summarise)

    def _summarise(self) -> None:
        self._flush = None
        left_out = self.gate.take_left_out()
        if left_out:
            self._send("notice", f"… {left_out} more log message(s) from {self.server} left out "
                       f"(at most {self.gate.limit} per {self.gate.window:g} s are shown; "
                       "the process log has them all)", "")

    def _send(self, level: str, text: str, source: str) -> None:
        if self.emit is not None:
            self.emit(McpServerLog(process=self.process, server=self.server, level=level,
                                   text=text, logger=source))

    def close(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
            self._summarise()


__all__ = ["LOG_LEVEL", "LogGate", "ServerHooks", "SessionHooks", "log_text"]

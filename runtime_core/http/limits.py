"""The connection limits every HTTP server in this process keeps (the control API of
``promptui serve`` and the webhook servers): their settings and the process's budget.

- ``header_timeout``: a connection must finish its request headers this soon after connecting
  (or after the first byte of its next request), else it is closed. uvicorn has none: a client
  that connects and never finishes its headers (a slowloris) held its descriptor forever.
- ``max_connections``: one budget for the whole process, below RLIMIT_NOFILE with headroom for
  journals, pipes and outgoing calls (uvicorn's ``limit_concurrency`` counts one server, and
  answers only once a request arrives, so idle connections kept their descriptors: 300 of them
  under a 256-file limit left none to accept with, and every server here stopped answering).
  Beyond it a connection is answered 503 and closed at once. The webhook servers together leave
  a reserve for the control API: a webhook flood does not lock the operator out.
- ``keep_alive_timeout``: uvicorn's, from the same settings.

Each is read from an environment variable when a server starts: webhook servers are built deep
inside the runtime, where no command-line option reaches. guard.py enforces them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import weakref
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["API", "BUDGET", "ENV_HEADER_TIMEOUT", "ENV_KEEP_ALIVE_TIMEOUT", "ENV_MAX_CONNECTIONS",
           "WEBHOOK", "ConnectionBudget", "ServerLimits", "busy_response",
           "default_max_connections"]

log = logging.getLogger("runtime_core.http")

ENV_HEADER_TIMEOUT = "PROMPTUI_HEADER_TIMEOUT"
ENV_KEEP_ALIVE_TIMEOUT = "PROMPTUI_KEEP_ALIVE_TIMEOUT"
ENV_MAX_CONNECTIONS = "PROMPTUI_MAX_CONNECTIONS"
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_KEEP_ALIVE_TIMEOUT = 5
MAX_CONNECTIONS_CAP = 4096  # a control API and webhooks; more is a misconfiguration
RETRY_AFTER_SECONDS = 2

API = "api"
WEBHOOK = "webhook"


def file_limit() -> int | None:
    """The process's soft RLIMIT_NOFILE; None where there is none (Windows) or no limit."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY or soft <= 0 else int(soft)


def default_max_connections(nofile: int | None) -> int:
    """Open connections allowed under ``nofile`` descriptors: a quarter (at least 64) is kept
    for what else the process opens."""
    if nofile is None:
        return 1024
    return max(16, min(MAX_CONNECTIONS_CAP, nofile - max(64, nofile // 4)))


@dataclass(frozen=True, slots=True)
class ServerLimits:
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    keep_alive_timeout: int = DEFAULT_KEEP_ALIVE_TIMEOUT
    max_connections: int = 1024

    @property
    def lingering_refusals(self) -> int:
        """Refused connections that may wait a moment for the client to read its 503."""
        return max(4, min(64, self.max_connections // 8))

    @property
    def api_reserve(self) -> int:
        """Connections the webhook servers leave for the control API."""
        return max(1, self.max_connections // 8)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServerLimits:
        env = os.environ if environ is None else environ
        return cls(
            header_timeout=_number(env, ENV_HEADER_TIMEOUT, DEFAULT_HEADER_TIMEOUT, float),
            keep_alive_timeout=_number(env, ENV_KEEP_ALIVE_TIMEOUT, DEFAULT_KEEP_ALIVE_TIMEOUT,
                                       int),
            max_connections=_number(env, ENV_MAX_CONNECTIONS,
                                    default_max_connections(file_limit()), int))

    def describe(self) -> str:
        return (f"at most {self.max_connections} open connections, headers within "
                f"{self.header_timeout:g}s, keep-alive {self.keep_alive_timeout}s")


def _number(env: Mapping[str, str], name: str, default: Any, kind: type[Any]) -> Any:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not value > 0 or value == float("inf"):
        log.warning("%s=%r is not a positive %s; using %s", name, raw, kind.__name__, default)
        return default
    return value


@dataclass(slots=True)
class _LoopCount:
    open: Counter[str] = field(default_factory=Counter)
    accepted: set[int] = field(default_factory=set)  # fds counted by accept(), not yet claimed


class ConnectionBudget:
    """Open connections of this process by server kind. Counted per event loop, so a loop that
    closed with connections open (a test's, a stopped runtime's) does not hold slots.

    A guarded listener counts a connection in accept() (``take`` with its fd), before asyncio
    makes a transport of it: a whole backlog accepted in one go cannot overshoot. Its protocol
    then ``claim``s that count, and gives it back when the connection is lost."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # servers may run in several loops and threads
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopCount] = \
            weakref.WeakKeyDictionary()

    def open_count(self, group: str | None = None) -> int:
        with self._lock:
            return self._count(group)

    def _count(self, group: str | None) -> int:
        return sum(count.open[group] if group else sum(count.open.values())
                   for loop, count in self._loops.items() if not loop.is_closed())

    def _has_room(self, group: str, limits: ServerLimits) -> bool:
        if self._count(None) >= limits.max_connections:
            return False
        webhook_cap = limits.max_connections - limits.api_reserve
        return group == API or self._count(WEBHOOK) < webhook_cap

    def take(self, loop: asyncio.AbstractEventLoop, group: str, limits: ServerLimits,
             fd: int | None = None) -> bool:
        """Count one more connection of ``group``; False (nothing counted) when it is over."""
        with self._lock:
            if not self._has_room(group, limits):
                return False
            count = self._loops.setdefault(loop, _LoopCount())
            count.open[group] += 1
            if fd is not None:
                count.accepted.add(fd)
            return True

    def claim(self, loop: asyncio.AbstractEventLoop, fd: int) -> bool:
        """True when accept() counted the connection on ``fd`` already."""
        with self._lock:
            count = self._loops.get(loop)
            if count is None or fd not in count.accepted:
                return False
            count.accepted.discard(fd)
            return True

    def give_back(self, loop: asyncio.AbstractEventLoop, group: str) -> None:
        with self._lock:
            count = self._loops.get(loop)
            if count is not None and count.open[group] > 0:
                count.open[group] -= 1


BUDGET = ConnectionBudget()


def busy_response(body: bytes, content_type: bytes = b"application/json") -> bytes:
    """The raw 503 a connection over the budget gets before it is closed."""
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: " + content_type
            + b"\r\ncontent-length: " + str(len(body)).encode()
            + b"\r\nretry-after: " + str(RETRY_AFTER_SECONDS).encode()
            + b"\r\nconnection: close\r\n\r\n" + body)

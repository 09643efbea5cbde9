"""The connection limits every HTTP server in this process keeps (the control API of
``promptui serve`` and the webhook servers): their settings and the process's budget.

- ``header_timeout``: a connection must finish its request headers this soon after connecting
  (or after the first byte of its next request), else it is closed. uvicorn has none: a client
  that connects and never finishes its headers (a slowloris) held its descriptor forever.
- ``max_connections``: one budget for the whole process, below RLIMIT_NOFILE with headroom for
  journals, pipes and outgoing calls (uvicorn's ``limit_concurrency`` counts one server, and
  answers only once a request arrives, so idle connections kept their descriptors: 300 of them
  under a 256-file limit left none to accept with, and every server here stopped answering).
  Beyond it a connection is answered 503 and closed at once. It is split: the control API has
  a quarter, the webhook servers the rest in equal shares, so one server's clients cannot take
  another's room; and on each server clients that have not authenticated hold at most a
  quarter of its share (past it the oldest of them is closed for the newcomer).
- ``body_timeout`` and ``body_min_rate``: a request body must arrive within ``body_timeout``
  seconds of its headers, a deadline that moves on one second for every ``body_min_rate`` bytes
  received; else the connection is answered 408 and closed. uvicorn waits forever: 170 clients
  trickling bodies held every connection a webhook server had.
- ``keep_alive_timeout``: uvicorn's, from the same settings.
- ``trusted_proxies``: the addresses or networks whose ``X-Forwarded-For`` names the client
  (for ``allowed_sources`` and logs). None by default: uvicorn trusts 127.0.0.1 unless told
  otherwise, so any local process could claim any source address.

Each is read from an environment variable when a server starts: webhook servers are built deep
inside the runtime, where no command-line option reaches. guard.py enforces them.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import threading
import weakref
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["API", "BUDGET", "ENV_BODY_MIN_RATE", "ENV_BODY_TIMEOUT", "ENV_HEADER_TIMEOUT",
           "ENV_KEEP_ALIVE_TIMEOUT", "ENV_MAX_CONNECTIONS", "ENV_TRUSTED_PROXIES", "WEBHOOK",
           "ConnectionBudget", "ServerLimits", "busy_response", "default_max_connections",
           "late_response", "parse_trusted_proxies"]

log = logging.getLogger("runtime_core.http")

ENV_HEADER_TIMEOUT = "PROMPTUI_HEADER_TIMEOUT"
ENV_KEEP_ALIVE_TIMEOUT = "PROMPTUI_KEEP_ALIVE_TIMEOUT"
ENV_MAX_CONNECTIONS = "PROMPTUI_MAX_CONNECTIONS"
ENV_TRUSTED_PROXIES = "PROMPTUI_TRUSTED_PROXIES"
ENV_BODY_TIMEOUT = "PROMPTUI_BODY_TIMEOUT"
ENV_BODY_MIN_RATE = "PROMPTUI_BODY_MIN_RATE"
DEFAULT_BODY_TIMEOUT = 10.0
DEFAULT_BODY_MIN_RATE = 1024  # bytes a second: a 1 MiB body over a 10 kB/s line still arrives
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


def parse_trusted_proxies(text: str) -> tuple[str, ...]:
    """``"10.0.0.5, 10.1.0.0/16"`` -> each entry as a network; ValueError naming a bad one."""
    proxies: list[str] = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        try:
            proxies.append(str(ipaddress.ip_network(entry, strict=False)))
        except ValueError:
            raise ValueError(f"trusted proxy {entry!r} is not an IP address or network "
                             "(e.g. 10.0.0.5 or 10.0.0.0/24)") from None
    return tuple(proxies)


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """The limits and trust settings every HTTP server of this process starts with."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    keep_alive_timeout: int = DEFAULT_KEEP_ALIVE_TIMEOUT
    max_connections: int = 1024
    trusted_proxies: tuple[str, ...] = ()
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    body_min_rate: int = DEFAULT_BODY_MIN_RATE

    @property
    def lingering_refusals(self) -> int:
        """Refused connections that may wait a moment for the client to read its 503."""
        return max(4, min(64, self.max_connections // 8))

    @property
    def api_budget(self) -> int:
        """The control API's part of ``max_connections``: a webhook flood cannot lock the
        operator out, nor clients of the API the webhooks' senders."""
        return max(1, min(self.max_connections - 1, max(4, self.max_connections // 4)))

    @property
    def webhook_budget(self) -> int:
        """The webhook servers' part, shared equally between those running."""
        return max(1, self.max_connections - self.api_budget)

    def unauthenticated_share(self, budget: int) -> int:
        """Connections of a server's ``budget`` that clients not yet authenticated may hold
        (a quarter, at least 2): past it the oldest of them is closed for the newcomer."""
        return max(2, budget // 4)

    def proxy_options(self) -> dict[str, Any]:
        """uvicorn.Config's forwarded-header settings: off unless proxies are named."""
        if not self.trusted_proxies:
            return {"proxy_headers": False}
        return {"proxy_headers": True, "forwarded_allow_ips": list(self.trusted_proxies)}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServerLimits:
        """The limits from PROMPTUI_* variables; a bad value is logged and its default used."""
        env = os.environ if environ is None else environ
        try:
            proxies = parse_trusted_proxies(env.get(ENV_TRUSTED_PROXIES, ""))
        except ValueError as exc:
            log.warning("%s: %s; no proxy is trusted", ENV_TRUSTED_PROXIES, exc)
            proxies = ()
        return cls(
            trusted_proxies=proxies,
            body_timeout=_number(env, ENV_BODY_TIMEOUT, DEFAULT_BODY_TIMEOUT, float),
            body_min_rate=_number(env, ENV_BODY_MIN_RATE, DEFAULT_BODY_MIN_RATE, int),
            header_timeout=_number(env, ENV_HEADER_TIMEOUT, DEFAULT_HEADER_TIMEOUT, float),
            keep_alive_timeout=_number(env, ENV_KEEP_ALIVE_TIMEOUT, DEFAULT_KEEP_ALIVE_TIMEOUT,
                                       int),
            max_connections=_number(env, ENV_MAX_CONNECTIONS,
                                    default_max_connections(file_limit()), int))

    def describe(self) -> str:
        return (f"at most {self.max_connections} open connections, headers within "
                f"{self.header_timeout:g}s, bodies within {self.body_timeout:g}s (+1s per "
                f"{self.body_min_rate} bytes), keep-alive {self.keep_alive_timeout}s")


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
    by_kind: Counter[str] = field(default_factory=Counter)  # API, WEBHOOK
    by_server: Counter[str] = field(default_factory=Counter)  # by server key
    accepted: set[int] = field(default_factory=set)  # fds counted by accept(), not yet claimed
    servers: dict[str, str] = field(default_factory=dict)  # live server key -> kind


class ConnectionBudget:
    """Open connections of this process, by server. Counted per event loop, so a loop that
    closed with connections open (a test's, a stopped runtime's) does not hold slots.

    The process's ``max_connections`` is split, so no server's clients can take another's
    room: the control API has ``api_budget`` of it, the webhook servers the rest, in equal
    shares between the webhook servers running. A guarded listener counts a connection in
    accept() (``take`` with its fd), before asyncio makes a transport of it: a whole backlog
    accepted in one go cannot overshoot. Its protocol then ``claim``s that count, and gives it
    back when the connection is lost."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # servers may run in several loops and threads
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopCount] = \
            weakref.WeakKeyDictionary()

    def open_count(self, group: str | None = None) -> int:
        """Open connections of a kind (API, WEBHOOK) or a server's key; all without one."""
        with self._lock:
            return self._count(group)

    def _live(self) -> list[_LoopCount]:
        return [count for loop, count in self._loops.items() if not loop.is_closed()]

    def _count(self, group: str | None) -> int:
        if group in (API, WEBHOOK):
            return sum(count.by_kind[group] for count in self._live())
        if group is not None:
            return sum(count.by_server[group] for count in self._live())
        return sum(count.by_kind.total() for count in self._live())

    def register(self, loop: asyncio.AbstractEventLoop, key: str, kind: str) -> None:
        """A server of ``kind`` starts: webhook servers share their part of the budget."""
        with self._lock:
            self._loops.setdefault(loop, _LoopCount()).servers[key] = kind

    def unregister(self, loop: asyncio.AbstractEventLoop, key: str) -> None:
        """The server stopped: the others share its room."""
        with self._lock:
            count = self._loops.get(loop)
            if count is not None:
                count.servers.pop(key, None)

    def server_budget(self, key: str, kind: str, limits: ServerLimits) -> int:
        """The most connections the server ``key`` may hold now."""
        with self._lock:
            return self._server_budget(key, kind, limits)

    def _server_budget(self, key: str, kind: str, limits: ServerLimits) -> int:
        if kind == API:
            return limits.api_budget
        webhooks = {k for count in self._live() for k, v in count.servers.items()
                    if v == WEBHOOK} | {key}
        return max(1, limits.webhook_budget // len(webhooks))

    def _has_room(self, key: str, kind: str, limits: ServerLimits) -> bool:
        if self._count(None) >= limits.max_connections:
            return False
        if kind == WEBHOOK and self._count(WEBHOOK) >= limits.webhook_budget:
            return False
        on_server = sum(count.by_server[key] for count in self._live())
        return on_server < self._server_budget(key, kind, limits)

    def take(self, loop: asyncio.AbstractEventLoop, key: str, kind: str, limits: ServerLimits,
             fd: int | None = None) -> bool:
        """Count one more connection of the server ``key``; False (nothing counted) when it
        has no room."""
        with self._lock:
            if not self._has_room(key, kind, limits):
                return False
            count = self._loops.setdefault(loop, _LoopCount())
            count.by_server[key] += 1
            count.by_kind[kind] += 1
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

    def give_back(self, loop: asyncio.AbstractEventLoop, key: str, kind: str) -> None:
        """A connection of the server ``key`` closed."""
        with self._lock:
            count = self._loops.get(loop)
            if count is not None and count.by_server[key] > 0:
                count.by_server[key] -= 1
                count.by_kind[kind] -= 1


BUDGET = ConnectionBudget()


def late_response(body: bytes) -> bytes:
    """The raw 408 a connection gets when its request body is too slow, before it is closed."""
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json"
            b"\r\ncontent-length: " + str(len(body)).encode()
            + b"\r\nconnection: close\r\n\r\n" + body)


def busy_response(body: bytes, content_type: bytes = b"application/json") -> bytes:
    """The raw 503 a connection over the budget gets before it is closed."""
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: " + content_type
            + b"\r\ncontent-length: " + str(len(body)).encode()
            + b"\r\nretry-after: " + str(RETRY_AFTER_SECONDS).encode()
            + b"\r\nconnection: close\r\n\r\n" + body)

"""What enforces ``limits`` on a uvicorn server: listening sockets that refuse a connection
over the process's budget inside accept() (503, then closed, before asyncio makes a transport
of it, so the excess never holds a descriptor), and uvicorn's h11 protocol with the header read
timeout. Both servers (the control API and the webhooks) are built with a ConnectionGuard."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from runtime_core.http.limits import BUDGET, ServerLimits, busy_response, log
from runtime_core.http.log_throttle import install_log_throttle

__all__ = ["ConnectionGuard", "GuardedListener", "LimitedH11Protocol"]

_REFUSALS_PER_ACCEPT = 64  # then asyncio gets the loop back; it calls again while more wait
LINGER_SECONDS = 1.0


def _refused(group: str, limits: ServerLimits) -> None:
    log.warning("%s server: %d connections open, the most allowed (%s); new connections are "
                "answered 503", group, BUDGET.open_count(), limits.describe())


@dataclass(frozen=True, slots=True)
class ConnectionGuard:
    """One server's side of the limits: its kind (API or WEBHOOK), the limits it read at start
    and the 503 it answers when the budget is spent. It makes the server's listening sockets
    and its uvicorn protocol class."""

    group: str
    limits: ServerLimits
    busy: bytes  # the whole raw response

    @classmethod
    def for_server(cls, group: str, busy_body: bytes,
                   limits: ServerLimits | None = None) -> ConnectionGuard:
        install_log_throttle()  # asyncio's accept errors, uvicorn's warnings, these lines
        return cls(group, limits or ServerLimits.from_env(), busy_response(busy_body))

    def listener(self, family: int, kind: int, proto: int) -> socket.socket:
        return GuardedListener(family, kind, proto, guard=self)

    def protocol(self) -> type[H11Protocol]:
        """For uvicorn.Config(http=...)."""
        return type(f"Limited{self.group.title()}Protocol", (LimitedH11Protocol,),
                    {"guard": self})

    async def bind(self, host: str, port: int) -> list[socket.socket]:
        """Listening sockets on every address ``host`` resolves to (as asyncio would)."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        sockets: list[socket.socket] = []
        try:
            for family, kind, proto, _, address in dict.fromkeys(infos):
                sock = self.listener(family, kind, proto)
                sockets.append(sock)
                if sys.platform != "win32":  # on Windows it would allow stealing the port
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
                sock.setblocking(False)
        except OSError:
            for sock in sockets:
                sock.close()
            raise
        return sockets


class GuardedListener(socket.socket):
    """A listening socket whose accept() answers a connection over the budget with 503 before
    asyncio makes a transport of it (asyncio accepts a whole backlog in one go: counted only
    later, a burst would overshoot the budget before the first refusal)."""

    def __init__(self, family: int, kind: int, proto: int, *, guard: ConnectionGuard) -> None:
        super().__init__(family, kind, proto)
        self.guard = guard

    def accept(self) -> tuple[socket.socket, Any]:
        guard = self.guard
        loop = asyncio.get_running_loop()  # asyncio calls this from its loop
        for _ in range(_REFUSALS_PER_ACCEPT):
            conn, address = super().accept()  # BlockingIOError: nothing waits; asyncio's cue
            if BUDGET.take(loop, guard.group, guard.limits, conn.fileno()):
                return conn, address
            _REFUSALS.refuse(loop, conn, guard)
            _refused(guard.group, guard.limits)
        raise BlockingIOError  # more wait: asyncio comes back on the next loop iteration


class _Refusals:
    """A refused connection gets the 503 and our end closed for writing, then is read from
    until the client closes, up to LINGER_SECONDS: closed with its request still unread, it
    would be reset, and a reset destroys the 503 before the client reads it. Only so many
    linger at once (they hold descriptors); past that one is closed at once."""

    def __init__(self) -> None:
        self._lingering = 0
        self._lock = threading.Lock()

    def refuse(self, loop: asyncio.AbstractEventLoop, conn: socket.socket,
               guard: ConnectionGuard) -> None:
        try:
            conn.setblocking(False)
            conn.send(guard.busy)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            conn.close()
            return
        with self._lock:
            linger = self._lingering < guard.limits.lingering_refusals
            if linger:
                self._lingering += 1
        if not linger:
            _drain(conn)
            conn.close()
            return
        fd = conn.fileno()

        def done() -> None:
            if conn.fileno() < 0:
                return
            loop.remove_reader(fd)
            timer.cancel()
            conn.close()
            with self._lock:
                self._lingering -= 1

        def readable() -> None:
            if not _drain(conn):
                done()  # the client closed (or reset): nothing more to wait for

        timer = loop.call_later(LINGER_SECONDS, done)
        loop.add_reader(fd, readable)


def _drain(conn: socket.socket) -> bool:
    """Read what the client sent; False once it closed its end."""
    try:
        while conn.recv(65536):
            pass
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


_REFUSALS = _Refusals()


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the process's connection budget and a header timeout."""

    guard: ClassVar[ConnectionGuard]

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._admitted = False
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        guard = self.guard
        sock = transport.get_extra_info("socket")
        counted = sock is not None and BUDGET.claim(self.loop, sock.fileno())
        # Not counted in accept(): a socket from elsewhere (uvicorn's own); counted now.
        if not counted and not BUDGET.take(self.loop, guard.group, guard.limits):
            transport.write(guard.busy)
            transport.close()  # never in uvicorn's connections: nothing else to undo
            _refused(guard.group, guard.limits)
            return
        self._admitted = True
        super().connection_made(transport)
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return  # refused: the 503 is on its way and the transport closing
        super().data_received(data)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:
            return
        self._admitted = False
        self._stop_header_timer()
        BUDGET.give_back(self.loop, self.guard.group)
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        if self._admitted:
            super().pause_writing()

    def resume_writing(self) -> None:
        if self._admitted:
            super().resume_writing()

    # The clock starts at the connection, or at the first byte of a later request (between
    # requests uvicorn's keep-alive timeout governs), and is not reset by more bytes: a client
    # that trickles one byte at a time gets no longer than one that sends nothing.
    def _await_headers(self) -> None:
        waiting = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
        if waiting and self._header_timer is None:
            self._header_timer = self.loop.call_later(self.guard.limits.header_timeout,
                                                      self._headers_late)
        elif not waiting:
            self._stop_header_timer()

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.info("%s server: closed a connection that sent no complete request headers "
                     "within %gs", self.guard.group, self.guard.limits.header_timeout)
            self.transport.close()

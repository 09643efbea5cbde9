"""What enforces ``limits`` on a uvicorn server: listening sockets that refuse a connection
over the process's budget inside accept() (503, then closed, before asyncio makes a transport
of it, so the excess never holds a descriptor), and uvicorn's h11 protocol with the header read
timeout. Both servers (the control API and the webhooks) are built with a ConnectionGuard."""

from __future__ import annotations

import asyncio
import itertools
import socket
import sys
import threading
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from runtime_core.http.limits import BUDGET, ServerLimits, busy_response, late_response, log
from runtime_core.http.log_throttle import install_log_throttle

__all__ = ["AUTHENTICATED", "ConnectionGuard", "GuardedListener", "LimitedH11Protocol",
           "mark_authenticated"]

#: The scope extension a request's app calls once the client proved who it is (a valid token,
#: an accepted webhook): its connection no longer counts as unauthenticated.
AUTHENTICATED = "promptui.authenticated"
_SERVER_NUMBERS = itertools.count(1)

# Connections admitted per listener per loop turn: asyncio would take a whole backlog at once,
# and a flood's newcomers would push an honest one out (as the oldest unauthenticated) before
# its first bytes were read. A few a turn, and each newcomer is read before it can be evicted.
ADMIT_PER_TURN = 4
SILENT_GRACE = 0.5  # seconds a connection that sent nothing yet is spared eviction
_REFUSALS_PER_ACCEPT = 64  # then asyncio gets the loop back; it calls again while more wait
LINGER_SECONDS = 1.0


def mark_authenticated(scope: MutableMapping[str, Any]) -> None:
    """Tell the connection guard that this request's client authenticated."""
    mark = scope.get("extensions", {}).get(AUTHENTICATED)
    if mark is not None:
        mark()


def _refused(guard: ConnectionGuard) -> None:
    log.warning("%s server: %d connections open, the most it may hold (%s); new connections "
                "are answered 503", guard.group, BUDGET.open_count(guard.key),
                guard.limits.describe())


@dataclass(frozen=True, slots=True)
class ConnectionGuard:
    """One server's side of the limits: its kind (API or WEBHOOK), the limits it read at start
    and the 503 it answers when the budget is spent. It makes the server's listening sockets
    and its uvicorn protocol class."""

    group: str
    limits: ServerLimits
    busy: bytes  # the whole raw response
    late: bytes = late_response(b'{"status": "error", "message": "the request body did not '
                                b'arrive in time"}')
    key: str = field(default_factory=lambda: f"server-{next(_SERVER_NUMBERS)}")
    # this server's connections not yet authenticated, oldest first (dicts keep order)
    unproven: dict[LimitedH11Protocol, None] = field(default_factory=dict)

    @classmethod
    def for_server(cls, group: str, busy_body: bytes, limits: ServerLimits | None = None,
                   late_body: bytes | None = None) -> ConnectionGuard:
        """``busy_body``: the 503's body over the budget; ``late_body``: the 408's when a
        request body is too slow."""
        install_log_throttle()  # asyncio's accept errors, uvicorn's warnings, these lines
        guard = cls(group, limits or ServerLimits.from_env(), busy_response(busy_body))
        if late_body is not None:
            guard = cls(guard.group, guard.limits, guard.busy, late_response(late_body))
        return guard

    def listener(self, family: int, kind: int, proto: int) -> socket.socket:
        """A listening socket that refuses over this server's budget; the server counts as
        running (for the webhook servers' shares) until ``release``."""
        BUDGET.register(asyncio.get_running_loop(), self.key, self.group)
        return GuardedListener(family, kind, proto, guard=self)

    def release(self) -> None:
        """The server stopped: the other webhook servers share its room again."""
        BUDGET.unregister(asyncio.get_running_loop(), self.key)

    def take(self, loop: asyncio.AbstractEventLoop, fd: int | None = None) -> bool:
        """Count one more connection of this server; False when it has no room."""
        return BUDGET.take(loop, self.key, self.group, self.limits, fd)

    def unauthenticated(self, protocol: LimitedH11Protocol) -> None:
        """A new connection: past the unauthenticated share, the oldest such that is still
        short of a whole request is closed (never one whose request is in)."""
        self.unproven[protocol] = None
        share = self.limits.unauthenticated_share(
            BUDGET.server_budget(self.key, self.group, self.limits))
        excess = len(self.unproven) - share
        if excess <= 0:
            return
        for other in [p for p in self.unproven if p.evictable()][:excess]:
            other.evict()

    def evict_one(self) -> bool:
        """Close the oldest unauthenticated connection short of a whole request, its slot
        given back at once; False when there is none."""
        for other in self.unproven:
            if other.evictable():
                other.evict()
                return True
        return False

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
        self._admitted_this_turn = 0

    def accept(self) -> tuple[socket.socket, Any]:
        guard = self.guard
        loop = asyncio.get_running_loop()  # asyncio calls this from its loop
        if self._admitted_this_turn >= ADMIT_PER_TURN:
            raise BlockingIOError  # the rest next turn, after the admitted ones were read
        for _ in range(_REFUSALS_PER_ACCEPT):
            conn, address = super().accept()  # BlockingIOError: nothing waits; asyncio's cue
            # Full: the oldest unauthenticated connection makes room, if there is one.
            if guard.take(loop, conn.fileno()) or (
                    guard.evict_one() and guard.take(loop, conn.fileno())):
                if self._admitted_this_turn == 0:
                    loop.call_soon(self._next_turn)
                self._admitted_this_turn += 1
                return conn, address
            _REFUSALS.refuse(loop, conn, guard)
            _refused(guard)
        raise BlockingIOError  # more wait: asyncio comes back on the next loop iteration

    def _next_turn(self) -> None:
        self._admitted_this_turn = 0


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
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_started = 0.0
        self._body_bytes = 0
        self._opened = 0.0
        self._heard = False  # data_received at least once
        self._given_back = False  # its budget slot (at eviction, before the close is done)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        guard = self.guard
        sock = transport.get_extra_info("socket")
        counted = sock is not None and BUDGET.claim(self.loop, sock.fileno())
        # Not counted in accept(): a socket from elsewhere (uvicorn's own); counted now.
        if not counted and not guard.take(self.loop):
            transport.write(guard.busy)
            transport.close()  # never in uvicorn's connections: nothing else to undo
            _refused(guard)
            return
        self._admitted = True
        self._opened = self.loop.time()
        super().connection_made(transport)
        self._await_headers()
        guard.unauthenticated(self)

    def handle_events(self) -> None:
        super().handle_events()
        # A request's app says when its client authenticated (mark_authenticated); the task
        # that runs it starts on the next loop turn, so the scope can still be given the hook.
        if self.cycle is not None:
            scope = cast(dict[str, Any], self.cycle.scope)
            extensions = scope.setdefault("extensions", {})
            extensions.setdefault(AUTHENTICATED, self._authenticated)

    def _authenticated(self) -> None:
        self.guard.unproven.pop(self, None)

    def evictable(self) -> bool:
        """Read from and still short of a whole request (or idle between requests); one not
        read from yet only after SILENT_GRACE (its first bytes may be on their way)."""
        if self.transport.is_closing() or self.conn.their_state not in (h11.IDLE,
                                                                         h11.SEND_BODY):
            return False
        return self._heard or self.loop.time() - self._opened >= SILENT_GRACE

    def evict(self) -> None:
        """Closed to make room for a newer unauthenticated connection (503 if unanswered)."""
        self.guard.unproven.pop(self, None)
        if self.transport.is_closing():
            return
        log.info("%s server: closed the oldest unauthenticated connection to make room (at "
                 "most %d of its connections may be unauthenticated)", self.guard.group,
                 self.guard.limits.unauthenticated_share(BUDGET.server_budget(
                     self.guard.key, self.guard.group, self.guard.limits)))
        if not self._given_back:  # the slot is free now, not once the close is done
            self._given_back = True
            BUDGET.give_back(self.loop, self.guard.key, self.guard.group)
        self._cut(self.guard.busy)

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return  # refused: the 503 is on its way and the transport closing
        in_body = self.conn.their_state is h11.SEND_BODY
        self._heard = True
        super().data_received(data)
        self._await_headers()
        self._await_body(len(data) if in_body else 0)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:
            return
        self._admitted = False
        self._stop_header_timer()
        self._stop_body_timer()
        self.guard.unproven.pop(self, None)
        if not self._given_back:
            self._given_back = True
            BUDGET.give_back(self.loop, self.guard.key, self.guard.group)
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

    # A body's deadline: body_timeout after its headers, one second later for every
    # body_min_rate bytes that came. Bytes count as they arrive (framing too), so a client
    # that trickles gets no more time than its bytes earn.
    def _await_body(self, received: int) -> None:
        sending = self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing()
        if not sending:
            self._stop_body_timer()
            return
        self._body_bytes += received
        if self._body_timer is None:
            self._body_started = self.loop.time()
            self._body_bytes = 0
            self._body_timer = self.loop.call_later(self.guard.limits.body_timeout,
                                                    self._body_check)

    def _stop_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_check(self) -> None:
        self._body_timer = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            return
        limits = self.guard.limits
        deadline = (self._body_started + limits.body_timeout
                    + self._body_bytes / limits.body_min_rate)
        if self.flow.read_paused:  # the app is not reading: waiting is not the client's fault
            self._body_started = self.loop.time()
            self._body_bytes = 0
            deadline = self._body_started + limits.body_timeout
        if self.loop.time() < deadline:
            self._body_timer = self.loop.call_at(deadline, self._body_check)
            return
        log.info("%s server: answered 408 and closed a connection whose request body did not "
                 "arrive in time (%d bytes in %.0fs)", self.guard.group, self._body_bytes,
                 self.loop.time() - self._body_started)
        self._cut(self.guard.late)

    def _cut(self, answer: bytes) -> None:
        """``answer`` (unless a response has begun), then the connection closed."""
        cycle = self.cycle
        if cycle is None or not cycle.response_started:
            self.transport.write(answer)
        if cycle is not None:  # the app reads a disconnect; its own answer, if any, is dropped
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()

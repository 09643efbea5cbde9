"""The webhook servers: one uvicorn server per (host, port), each path routed to its trigger.

Every trigger on the same address shares one server in this Python process; the server starts
with the first trigger on that address and stops with the last. Port 0 gives a trigger an
ephemeral server of its own. A *standby* trigger (a cluster node's stand-in for a process
another node runs) serves its path only while no trigger of its own serves it: a process
starting here takes the path over and gives it back when it stops, the port never closing in
between. ``GET /health`` on any server answers ``{"status": "ok"}``, or 503
``{"status": "unavailable"}`` while a process behind it is failed, stopping or cannot journal,
so a load balancer stops sending; ``GET /health?path=/x`` asks about one path. It needs no
token, so it says nothing more: no path, process or reason.

A path a process of this runtime will serve (expected.py) but that no trigger serves at the
moment (its process not started yet, stopping, stopped, restarting, while the server listens for
others) answers 503 with Retry-After, never 404: a sender retries a 503 and may drop a 404.

Every request is first checked as the control API checks its own (http/origin.py): a foreign Host
on a loopback bind gets 421, any request with an ``Origin`` header (a web page) 403.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Protocol

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from runtime_core.http.guard import ConnectionGuard, mark_authenticated
from runtime_core.http.limits import WEBHOOK
from runtime_core.http.origin import refusal
from runtime_core.triggers.config import HEALTH_PATH
from runtime_core.triggers.webhook.expected import expected
from runtime_core.triggers.webhook.request import (
    RETRY_AFTER_SECONDS,
    error_response,
    unavailable_response,
)

# The webhook trigger's logger, not this module's: operators tune one name for the whole trigger.
log = logging.getLogger("runtime_core.triggers.webhook.trigger")

_START_TIMEOUT = 10.0
_GRACEFUL_STOP_SECONDS = 3  # in-flight requests get this long when the last trigger stops
_STOP_TIMEOUT = 10.0

_Address = tuple[str, int]

NOT_SERVING_NOW = ("the process serving this path is starting or stopping; try again after "
                   "Retry-After")

# uvicorn logs every server's start and stop on "uvicorn.error" ("Started server process [pid]",
# "Shutting down", "Finished server process [pid]"), so a host that serves with uvicorn too
# (promptui serve) printed each of those lines twice. Inside a webhook server's task (its own
# context) those INFO lines are dropped; its warnings and errors still show.
_IN_WEBHOOK_SERVER: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "in_webhook_server", default=False)


class _QuietLifecycle(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.INFO or not _IN_WEBHOOK_SERVER.get()


_QUIET = _QuietLifecycle()


class WebhookRoute(Protocol):
    """What a server needs of a trigger it serves: where, which path, who, and the handler."""

    trigger_id: str
    host: str
    port: int
    path: str

    async def handle(self, request: Request) -> Response: ...

    def unavailable(self) -> dict[str, str] | None:
        """Why the path takes no events now (``state``, ``reason``), or None."""
        ...


class _EmbeddedServer(uvicorn.Server):
    """uvicorn.Server that leaves SIGINT/SIGTERM to the host process: the stock one installs
    its own handlers while serving, so Ctrl-C would only stop the webhook server."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class _Endpoint:
    """A plain ASGI endpoint: as an object (not a function) Starlette's Route lets every method
    through, so 405 and 404 are answered here, as JSON."""

    def __init__(self, handler: Callable[[Request], Awaitable[Response]]) -> None:
        self._handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self._handler(Request(scope, receive))
        await response(scope, receive, send)


class SharedServer:
    """One uvicorn server on one address, routing each path to its trigger."""

    def __init__(self, host: str, port: int, after: asyncio.Task[None] | None) -> None:
        self.host = host
        self.port = port
        self.loop = asyncio.get_running_loop()
        self.routes: dict[str, WebhookRoute] = {}
        self.standby: dict[str, WebhookRoute] = {}  # served while routes has no such path
        self.bound_port: int | None = None
        self.closing: asyncio.Task[None] | None = None
        self._after = after  # the previous server on this address, still releasing it
        self._starting: asyncio.Task[None] | None = None
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None
        self._guard: ConnectionGuard | None = None
        self.app = Starlette(routes=[Route("/{path:path}", _Endpoint(self._dispatch))])

    def __repr__(self) -> str:
        paths = sorted({*self.routes, *self.standby})
        return f"<webhook server {self.host}:{self.bound_port or self.port} {paths}>"

    async def _dispatch(self, request: Request) -> Response:
        refused = refusal(request.headers, self.host)
        if refused is not None:
            log.info("webhook server %s:%s: %d for %s %r", self.host, self.bound_port,
                     refused[0], request.method, request.scope["path"])
            return error_response(*refused)
        path: str = request.scope["path"]
        if path == HEALTH_PATH:
            if request.method != "GET":
                return error_response(405, f"method {request.method} not allowed; use GET",
                                      {"Allow": "GET"})
            return self._health(request)
        trigger = self.route(path)
        if trigger is None:
            if expected(self.host, self.port, path):  # its process is starting or stopping
                return unavailable_response(NOT_SERVING_NOW)
            return error_response(404, "no webhook is served at this path")
        response = await trigger.handle(request)
        if response.status_code < 400:  # taken (signature, sources checked): a known sender
            mark_authenticated(request.scope)
        return response

    def route(self, path: str) -> WebhookRoute | None:
        """The trigger serving ``path`` now: its own, else its standby."""
        return self.routes.get(path) or self.standby.get(path)

    @property
    def serving(self) -> bool:
        return bool(self.routes or self.standby)

    def _health(self, request: Request) -> Response:
        """``{"status": "ok"}`` or 503 ``{"status": "unavailable"}``, nothing more: it needs no
        token, so it names no path, process or reason (the control API shows those)."""
        asked = request.query_params.get("path")
        served = {**self.standby, **self.routes}
        if asked is not None and asked not in served:
            if expected(self.host, self.port, asked):
                return _unhealthy()
            return error_response(404, "no webhook is served at this path")
        paths = [asked] if asked is not None else sorted(served)
        if any(served[path].unavailable() is not None for path in paths):
            return _unhealthy()
        return JSONResponse({"status": "ok"})

    def add(self, trigger: WebhookRoute, *, standby: bool = False) -> None:
        routes = self.standby if standby else self.routes
        other = routes.get(trigger.path)
        if other is not None:
            raise ValueError(
                f"webhook triggers {other.trigger_id!r} and {trigger.trigger_id!r} both want "
                f"path {trigger.path!r} on {self.host}:{self.bound_port or self.port}"
            )
        routes[trigger.path] = trigger

    def remove(self, trigger: WebhookRoute) -> None:
        for routes in (self.routes, self.standby):
            if routes.get(trigger.path) is trigger:
                del routes[trigger.path]

    async def ensure_started(self) -> None:
        if self._starting is None:
            self._starting = self.loop.create_task(self._start())
        # shield: one caller giving up must not abort the start for the others
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        if self._after is not None:
            await asyncio.wait([self._after])
        # The process's connection budget (shared with the control API), a header read
        # timeout and keep-alive: idle clients cannot take the descriptors (http/limits.py).
        guard = ConnectionGuard.for_server(WEBHOOK, json.dumps({
            "status": "unavailable", "message": "the server holds the most open connections "
            "it allows; try again shortly"}).encode())
        sock = await _listen_socket(self.host, self.port, guard)
        self._guard = guard
        config = uvicorn.Config(
            # log_level None and log_config None: uvicorn's loggers are shared with the host
            # (promptui serve logs through them), so their levels are the host's to set.
            self.app, host=self.host, port=self.port, log_level=None, lifespan="off",
            log_config=None,
            access_log=False, server_header=False, ws="none",
            timeout_graceful_shutdown=_GRACEFUL_STOP_SECONDS,
            http=guard.protocol(), timeout_keep_alive=guard.limits.keep_alive_timeout,
            # X-Forwarded-For decides allowed_sources: trusted only from named proxies
            **guard.limits.proxy_options(),
        )
        server = _EmbeddedServer(config)
        logging.getLogger("uvicorn.error").addFilter(_QUIET)  # once: addFilter keeps one
        context = contextvars.copy_context()
        context.run(_IN_WEBHOOK_SERVER.set, True)
        task = self.loop.create_task(server.serve(sockets=[sock]), context=context,
                                     name=f"webhook server {self.host}:{self.port}")
        self._server, self._task, self._socket = server, task, sock
        deadline = time.monotonic() + _START_TIMEOUT
        # uvicorn exposes only a flag for "listening", no event to wait on
        while not server.started and not task.done() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        if not server.started:
            server.should_exit = server.force_exit = True
            task.cancel()
            await asyncio.wait([task])
            sock.close()
            guard.release()
            cause = None if task.cancelled() else task.exception()
            raise RuntimeError(
                f"webhook server on {self.host}:{self.port} did not start"
                + (f": {cause}" if cause else f" within {_START_TIMEOUT:g}s")
            ) from cause
        self.bound_port = server.servers[0].sockets[0].getsockname()[1]
        task.add_done_callback(self._on_server_exit)

    def _on_server_exit(self, task: asyncio.Task[None]) -> None:
        if self.closing is None and not task.cancelled():
            log.error("webhook server %s:%s stopped unexpectedly", self.host, self.bound_port,
                      exc_info=task.exception())

    def start_closing(self) -> asyncio.Task[None]:
        if self.closing is None:
            self.closing = self.loop.create_task(self._shutdown())
        return self.closing

    async def _shutdown(self) -> None:
        if self._starting is not None:
            await asyncio.wait([self._starting])
        server, task = self._server, self._task
        if server is not None and task is not None and not task.done():
            server.should_exit = True
            _done, pending = await asyncio.wait([task], timeout=_STOP_TIMEOUT)
            if pending:
                server.force_exit = True
                task.cancel()
                await asyncio.wait([task])
        if self._socket is not None:
            self._socket.close()
        if self._guard is not None:
            self._guard.release()  # the other webhook servers share its room again
        started = self.bound_port is not None  # a failed start was reported by start()
        if started and task is not None and not task.cancelled() and task.exception():
            log.error("webhook server %s:%s failed while stopping", self.host, self.bound_port,
                      exc_info=task.exception())


def _unhealthy() -> Response:
    return JSONResponse({"status": "unavailable"}, 503,
                        headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


#: Shared servers by configured address (ephemeral port-0 servers are not listed: not shared).
_SERVERS: dict[_Address, SharedServer] = {}
#: Servers still shutting down, so a new one on the same address waits for the port.
_CLOSING: dict[_Address, asyncio.Task[None]] = {}


async def _listen_socket(host: str, port: int, guard: ConnectionGuard) -> socket.socket:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = guard.listener(family, kind, proto)  # refuses over the budget in accept()
    try:
        if sys.platform != "win32":  # on Windows SO_REUSEADDR would allow stealing the port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        guard.release()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return sock


async def attach(trigger: WebhookRoute, *, standby: bool = False) -> SharedServer:
    """Serve ``trigger.path`` on the trigger's address, starting the server if it is the first
    path there (port 0: always a server of its own). ValueError for a path already served (by
    another standby, for a ``standby``: a standby yields the path to a trigger of its own)."""
    address = (trigger.host, trigger.port)
    loop = asyncio.get_running_loop()
    if trigger.port == 0:
        server = SharedServer(trigger.host, 0, None)
    else:
        found = _SERVERS.get(address)
        if found is not None and found.loop is not loop:
            if not found.loop.is_closed():
                raise RuntimeError(f"the webhook server on {trigger.host}:{trigger.port} runs "
                                   "in another event loop")
            del _SERVERS[address]  # left behind by a loop that is gone
            found = None
        if found is None:
            closing = _CLOSING.get(address)
            if closing is not None and closing.get_loop() is not loop:
                closing = None
            found = SharedServer(trigger.host, trigger.port, closing)
            _SERVERS[address] = found
        server = found
    server.add(trigger, standby=standby)  # before any await: a duplicate is refused at once
    try:
        await server.ensure_started()
    except BaseException:
        await detach(server, trigger)
        raise
    return server


async def detach(server: SharedServer, trigger: WebhookRoute) -> None:
    """Stop serving ``trigger.path``; the server stops (and frees its port) with its last path."""
    server.remove(trigger)
    if server.serving:
        return
    address = (server.host, server.port)
    closing = server.start_closing()
    if server.port != 0 and _SERVERS.get(address) is server:
        del _SERVERS[address]
        _CLOSING[address] = closing

        def forget(task: asyncio.Task[None]) -> None:
            if _CLOSING.get(address) is task:
                del _CLOSING[address]

        closing.add_done_callback(forget)
    # shield: a cancelled stop() must not leave the port half-closed
    await asyncio.shield(closing)

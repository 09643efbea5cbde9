"""``promptui serve``: the runtime headless behind the HTTP control API. Uvicorn serves the
FastAPI app; the app's lifespan starts every process and, on SIGTERM or Ctrl+C, shuts them
down for a restart: what was queued or running is taken back by the next start.

A scale-out node (``cluster=``, a ClusterHost) starts no process itself: its lifespan joins
the cluster, whose leases decide which processes run here, and leaves it on the way out (the
processes it runs shut down first, while their leases still hold)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI
from uvicorn.config import STARTUP_FAILURE

from runtime_core.api import errors
from runtime_core.api.error_shape import error_body
from runtime_core.api.event_log import EventLog
from runtime_core.api.guard import DEFAULT_MAX_BODY, Guard, is_loopback
from runtime_core.api.metrics import Metrics
from runtime_core.api.metrics_route import router as metrics_router
from runtime_core.api.pulse_routes import router as pulse_router
from runtime_core.api.reference_routes import router as reference_router
from runtime_core.api.routes import router
from runtime_core.control.local import LocalControl
from runtime_core.http.guard import ConnectionGuard
from runtime_core.http.limits import API, ENV_TRUSTED_PROXIES, parse_trusted_proxies

if TYPE_CHECKING:  # psycopg loads only for a cluster node
    from runtime_core.cluster.host import ClusterHost

log = logging.getLogger("promptui.serve")
VERSION = "1"


def create_app(control: LocalControl, *, token: str, read_only: bool = False,
               loopback_only: bool = True, max_body: int = DEFAULT_MAX_BODY,
               start_processes: bool = True, drain_timeout: float | None = None,
               cluster: ClusterHost | None = None) -> FastAPI:
    """``drain_timeout``: on SIGTERM or Ctrl+C the runs in flight may finish first, up to
    that long, while the API still answers (None: each process's own, else none).
    ``cluster``: this runtime is a scale-out node (``control`` a ClusterControl)."""

    async def shutdown(drain: float | None) -> dict[str, dict[str, int]]:
        left: dict[str, dict[str, int]] = {}
        if cluster is not None:  # first: its processes shut down while their leases hold
            left.update(await cluster.stop(drain))
        left.update(await control.shutdown(drain))
        return left

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.event_log = EventLog(control.notifier)
        app.state.closed = False
        try:  # a start that fails half-way still closes what it opened (journals, servers)
            if start_processes:
                await control.start_all()
            if cluster is not None:
                from runtime_core.cluster.errors import ClusterError

                try:
                    await cluster.start()
                except ClusterError as exc:
                    app.state.start_error = str(exc)  # 'promptui serve' says it in one line
                    raise
            yield
        finally:
            app.state.event_log.close()
            app.state.metrics.detach()
            # The next start takes back what is queued or in flight; 'promptui serve' says how
            # much from these counts. A signal's drain may have shut down already.
            if getattr(app.state, "left", None) is None:
                app.state.left = await shutdown(0.0)
            app.state.closed = True  # read by 'promptui serve' to tell a clean stop

    app = FastAPI(title="promptui control API", version=VERSION, lifespan=lifespan,
                  openapi_url="/api/v1/openapi.json", docs_url=None, redoc_url=None,
                  description="Steer a headless promptui runtime: processes, dead letters, "
                  "triggers, the journal, runs, rewind, health and incidents. Every route but "
                  "/api/v1/health needs 'Authorization: Bearer <token>'.")
    app.state.control = control
    app.state.drain_timeout = drain_timeout
    app.state.left = None
    app.state.start_error = None
    app.state.shutdown = shutdown
    app.state.read_only = read_only or control.read_only
    errors.install(app)
    app.include_router(router)
    app.include_router(reference_router)  # the reference runtime's paths for the same calls
    app.include_router(pulse_router)
    # /metrics: counted from the notifier from now on (an app driven without its lifespan,
    # as tests do over ASGI, counts too), read at scrape time from the runtime
    app.state.metrics = Metrics(control.runtime, cluster)
    app.state.metrics.attach(control.notifier)
    app.include_router(metrics_router)
    if cluster is not None:
        from runtime_core.api.cluster_forward import ForwardToOwner
        from runtime_core.api.cluster_routes import router as cluster_router

        app.include_router(cluster_router)
        app.add_middleware(ForwardToOwner, host=cluster)  # inside the Guard
    app.add_middleware(Guard, token=token, read_only=app.state.read_only,
                       loopback_only=loopback_only, max_body=max_body,
                       also_token=None if cluster is None else lambda: cluster.ingress.token)
    return app


class _Server(uvicorn.Server):
    """On the first SIGTERM or Ctrl+C, drains (the runs in flight finish while the API still
    answers and shows them draining), then ends the event streams, or uvicorn would wait on
    them forever, and stops; a second signal cuts the drain short. It does not raise the
    signal again after the clean stop (uvicorn's default), so a SIGTERM ends with status 0."""

    on_exit: Callable[[], None] | None = None
    on_bound: Callable[[str], None] | None = None  # the URL, once bound: before the lifespan
    guard: ConnectionGuard | None = None
    drain: Callable[[], Any] | None = None  # the shutdown with its drain: a coroutine
    cut: Callable[[], None] | None = None
    _draining: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Listens on the guard's sockets, which refuse a connection over the budget in
        accept(), before it costs a descriptor; uvicorn would bind plain ones."""
        if sockets is not None or self.guard is None:
            await super().startup(sockets)
            return
        try:
            sockets = await self.guard.bind(self.config.host, self.config.port)
        except OSError as exc:  # as uvicorn says it, before any process has started
            logging.getLogger("uvicorn.error").error(exc)
            sys.exit(STARTUP_FAILURE)
        if self.on_bound is not None:
            self.on_bound(url_of(sockets[0]))
        await super().startup(sockets)
        if self.started:
            self._log_started_message(sockets)

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self.drain is not None and self._draining is None and self.started \
                and not self.should_exit:
            self._draining = asyncio.get_running_loop().create_task(self._drain_then_exit())
            log.info("stopping: the runs in flight may finish first (a second signal stops "
                     "at once)")
            return
        if self._draining is not None and not self._draining.done() and self.cut is not None:
            log.warning("stopping now: the runs still in flight are cancelled")
            self.cut()
            return
        self._exit_now(sig)

    async def _drain_then_exit(self) -> None:
        assert self.drain is not None
        try:
            await self.drain()
        except Exception:
            log.exception("the drain failed; stopping")
        self._exit_now(signal.SIGTERM)

    def _exit_now(self, sig: int) -> None:
        if self.on_exit is not None:
            self.on_exit()
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl+C: stop waiting for connections
        self.should_exit = True


def url_of(sock: socket.socket) -> str:
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if ":" in str(bound[0]) else str(bound[0])
    return f"http://{shown}:{bound[1]}"


def make_server(app: FastAPI, *, host: str, port: int,
                on_ready: Callable[[str], None] | None = None,
                on_bound: Callable[[str], None] | None = None) -> _Server:
    """``on_bound(url)``: once the socket is bound, before the lifespan starts (a cluster
    node registers that address); ``on_ready(url)``: once it serves."""
    # The process's connection budget, a header read timeout and keep-alive (http/limits.py):
    # idle or slow clients cannot use up the file descriptors the API needs to answer.
    guard = ConnectionGuard.for_server(API, json.dumps(error_body(
        "TOO_MANY_CONNECTIONS", "the server holds the most open connections it allows; try "
        "again shortly")).encode(), late_body=json.dumps(error_body(
            "REQUEST_TIMEOUT", "the request body did not arrive in time; send it at once"
        )).encode())
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False,
                            lifespan="on", timeout_graceful_shutdown=10,
                            server_header=False, date_header=False, ws="none",
                            http=guard.protocol(),
                            timeout_keep_alive=guard.limits.keep_alive_timeout,
                            **guard.limits.proxy_options())
    log.debug("connection limits: %s", guard.limits.describe())
    server = _Server(config)
    server.guard = guard
    server.on_bound = on_bound

    def close_streams() -> None:
        event_log: EventLog | None = getattr(app.state, "event_log", None)
        if event_log is not None:
            event_log.close()

    server.on_exit = close_streams
    control: LocalControl = app.state.control
    drain_timeout: float | None = app.state.drain_timeout
    if drain_timeout is None or drain_timeout > 0:

        async def drain() -> None:
            app.state.left = await app.state.shutdown(drain_timeout)

        server.drain = drain
        server.cut = control.end_drains
    if on_ready is not None:
        original = server.startup

        async def startup(sockets: Any = None) -> None:
            await original(sockets)
            if server.started:
                on_ready(url_of(server.servers[0].sockets[0]))

        server.startup = startup  # type: ignore[method-assign]
    return server


def trust_proxies(proxies: str) -> None:
    """Believe ``X-Forwarded-For`` from these proxies (comma-separated addresses or networks)
    on this process's servers: the API and the webhook servers, which read it from the
    environment when they start, deep inside the runtime. ValueError naming a bad entry."""
    parse_trusted_proxies(proxies)
    os.environ[ENV_TRUSTED_PROXIES] = proxies


def serve(app: FastAPI, *, host: str, port: int,
          on_ready: Callable[[str], None] | None = None) -> None:
    if not is_loopback(host):
        log.warning("listening on %s: plain HTTP; prefer an SSH tunnel to a loopback bind", host)
    asyncio.run(make_server(app, host=host, port=port, on_ready=on_ready).serve())

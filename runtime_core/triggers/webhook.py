"""Webhook trigger: HTTP POSTs become events, answered with what the process did with them.

Every trigger on the same (host, port) shares one uvicorn server in this Python process, each
serving its own path; the server starts with the first trigger on that address and stops with the
last. ``webhook_port: 0`` gives the trigger an ephemeral server of its own.

Request pipeline (POST on a served path): body size limit (413) -> HMAC signature when
``hmac_secret`` is set (401) -> body parsing (400) -> ``accept(event)`` -> 202 accepted (durable) /
200 ignored (filtered) / 503 + ``Retry-After`` (queue full, process unavailable) / 500.

Signed requests carry ``X-Promptui-Timestamp: <unix seconds>`` and
``X-Promptui-Signature: sha256=<hex HMAC-SHA256(secret, b"<timestamp>." + raw body)>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import hmac
import ipaddress
import json
import logging
import re
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from runtime_core.triggers.base import AcceptFn, AcceptResult, TriggerEvent
from runtime_core.triggers.config import HEALTH_PATH, TriggerConfig, check_webhook_path

log = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Promptui-Timestamp"
SIGNATURE_HEADER = "X-Promptui-Signature"
RETRY_AFTER_SECONDS = 30

#: Never copied into event metadata: credentials, and the signature (a replay token).
_HIDDEN_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", SIGNATURE_HEADER.lower(),
})
_TIMESTAMP_RE = re.compile(r"[0-9]{1,15}")  # ASCII digits only: int() would accept "1_0", " 1"
_HEX_DIGEST_RE = re.compile(r"[0-9a-fA-F]{64}")
_START_TIMEOUT = 10.0
_GRACEFUL_STOP_SECONDS = 3  # in-flight requests get this long when the last trigger stops
_STOP_TIMEOUT = 10.0
_REPLAY_CACHE_MAX = 50_000

_Address = tuple[str, int]




class _Reject(Exception):
    """A request answered with an error status; carries the status and a sender-safe message."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"status": "error", "message": message}, status, headers=headers)


def _unavailable(message: str) -> JSONResponse:
    return JSONResponse({"status": "unavailable", "message": message}, 503,
                        headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


class _ReplayCache:
    """Signatures seen within the tolerance window. An entry can go once its timestamp is too old
    to pass the freshness check anyway, so the window bounds the size in time; ``max_entries``
    bounds it in memory (when full, signed requests get 503 rather than losing protection)."""

    def __init__(self, max_entries: int = _REPLAY_CACHE_MAX) -> None:
        self._max = max_entries
        self._expiry: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._expiry)

    def _prune(self, now: float) -> None:
        while self._heap and self._heap[0][0] < now:
            expires, digest = heapq.heappop(self._heap)
            if self._expiry.get(digest) == expires:
                del self._expiry[digest]
        if len(self._heap) > 2 * self._max:  # released entries linger in the heap; compact
            self._heap = [(exp, dig) for dig, exp in self._expiry.items()]
            heapq.heapify(self._heap)

    def reserve(self, digest: str, expires: float, now: float) -> Literal["ok", "seen", "full"]:
        self._prune(now)
        if digest in self._expiry:
            return "seen"
        if len(self._expiry) >= self._max:
            return "full"
        self._expiry[digest] = expires
        heapq.heappush(self._heap, (expires, digest))
        return "ok"

    def release(self, digest: str) -> None:
        """Forget a signature whose request did not hand over an event, so a retry works."""
        self._expiry.pop(digest, None)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media in ("application/json", "text/json") or media.endswith("+json")


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON; they would break strict consumers of the journal later.
    raise ValueError(f"{name} is not valid JSON")


def _parse_body(body: bytes, content_type: str) -> Any:
    """JSON for JSON content types, otherwise UTF-8 text; _Reject(400) naming the problem."""
    if _is_json(content_type):
        try:
            text = body.decode("utf-8-sig")  # tolerate a BOM: some senders add one
        except UnicodeDecodeError as exc:
            raise _Reject(400, f"body is not valid UTF-8 (byte {exc.start})") from None
        try:
            return json.loads(text, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            raise _Reject(400, f"invalid JSON: {exc.msg} at line {exc.lineno} column "
                               f"{exc.colno}") from None
        except ValueError as exc:
            raise _Reject(400, f"invalid JSON: {exc}") from None
        except RecursionError:
            raise _Reject(400, "invalid JSON: nested too deeply") from None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Reject(400, f"body is not valid UTF-8 text (byte {exc.start}); send UTF-8 or "
                           "JSON with Content-Type: application/json") from None


def _visible_headers(headers: Headers) -> dict[str, str]:
    visible: dict[str, str] = {}
    for name, value in headers.items():
        if name in _HIDDEN_HEADERS:
            continue
        visible[name] = f"{visible[name]}, {value}" if name in visible else value
    return visible


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WebhookTrigger:
    """A push trigger serving ``config.webhook_path`` on ``webhook_host:webhook_port``."""

    trigger_type = "webhook"

    def __init__(self, trigger_id: str, config: TriggerConfig) -> None:
        if config.type != "webhook":
            raise ValueError(f"WebhookTrigger needs a 'webhook' config, got {config.type!r}")
        check_webhook_path(config.webhook_path)
        if config.hmac_secret is not None and not config.hmac_secret.get_secret_value():
            raise ValueError(f"webhook trigger {trigger_id!r}: hmac_secret must not be empty")
        self.trigger_id = trigger_id
        self.path = config.webhook_path
        self.host = config.webhook_host
        self.port = config.webhook_port
        self.max_body_bytes = config.max_body_bytes
        self.signature_tolerance = config.signature_tolerance
        self._secret = config.hmac_secret  # SecretStr: unwrapped only to compute an HMAC
        self._accept: AcceptFn | None = None
        self._server: _SharedServer | None = None
        self._replays = _ReplayCache()
        self._clock: Callable[[], float] = time.time
        self._requests = 0
        self._accepted = 0
        self._ignored = 0
        self._rejected = 0

    def __repr__(self) -> str:
        port = self.bound_port if self.bound_port is not None else self.port
        return (f"WebhookTrigger({self.trigger_id!r}, {self.host}:{port}{self.path}, "
                f"signed={self._secret is not None})")

    @property
    def bound_port(self) -> int | None:
        """The port actually listened on (the real one for port 0); None when not started."""
        return self._server.bound_port if self._server is not None else None

    @property
    def running(self) -> bool:
        return self._server is not None

    async def start(self, accept: AcceptFn) -> None:
        """Serve the path. ValueError if another trigger serves it on this address; OSError if
        the address cannot be bound."""
        if self._server is not None:
            raise RuntimeError(f"webhook trigger {self.trigger_id!r} is already started")
        self._accept = accept
        try:
            self._server = await _attach(self)
        except BaseException:
            self._accept = None
            raise
        if self._secret is None and not _is_loopback(self.host):
            log.warning("webhook trigger %s listens on %s:%s without hmac_secret: anyone who "
                        "can reach it can inject events", self.trigger_id, self.host,
                        self.bound_port)

    async def stop(self) -> None:
        """Stop serving the path; the shared server stops when its last trigger stops."""
        server, self._server = self._server, None
        self._accept = None  # a request already in flight now answers 503
        if server is not None:
            await _detach(server, self)

    def status(self) -> dict[str, Any]:
        return {
            "trigger_id": self.trigger_id,
            "type": self.trigger_type,
            "running": self.running,
            "host": self.host,
            "port": self.bound_port,
            "configured_port": self.port,
            "path": self.path,
            "signature_required": self._secret is not None,
            "requests": self._requests,
            "accepted": self._accepted,
            "ignored": self._ignored,
            "rejected": self._rejected,
        }

    # -- request handling ------------------------------------------------------------------------
    async def handle(self, request: Request) -> Response:
        self._requests += 1
        try:
            response = await self._pipeline(request)
        except _Reject as exc:
            level = logging.INFO if exc.status == 401 else logging.DEBUG
            log.log(level, "webhook trigger %s: %d for %s: %s", self.trigger_id, exc.status,
                    request.client.host if request.client else "?", exc.message)
            response = (_unavailable(exc.message) if exc.status == 503
                        else _error(exc.status, exc.message, exc.headers))
        except Exception:
            log.exception("webhook trigger %s: error while handling a request", self.trigger_id)
            response = _error(500, "internal error")
        if response.status_code == 202:
            self._accepted += 1
        elif response.status_code == 200:
            self._ignored += 1
        else:
            self._rejected += 1
        return response

    async def _pipeline(self, request: Request) -> Response:
        if request.method != "POST":
            raise _Reject(405, f"method {request.method} not allowed; use POST",
                          {"Allow": "POST"})
        if self._server is None:
            return _unavailable("trigger stopped")
        try:
            body = await self._read_body(request)
        except ClientDisconnect:
            raise _Reject(400, "client disconnected before sending the whole body") from None
        digest = self._verify(request.headers, body) if self._secret is not None else None
        keep_digest = False  # a signature stays spent only if it handed over an event
        try:
            payload = _parse_body(body, request.headers.get("content-type", ""))
            event = TriggerEvent(self.trigger_id, self.trigger_type, payload, metadata={
                "method": request.method,
                "path": request.url.path,
                "query": dict(request.query_params),
                "remote": request.client.host if request.client else None,
                "headers": _visible_headers(request.headers),
                "signature_verified": digest is not None,
            })
            accept = self._accept
            if accept is None:  # stopped while the body was arriving
                return _unavailable("trigger stopped")
            result, reason = await accept(event)
            if result is AcceptResult.ACCEPTED:
                keep_digest = True
                return JSONResponse({"status": "accepted", "event_id": event.event_id}, 202)
            if result is AcceptResult.FILTERED:
                keep_digest = True
                return JSONResponse({"status": "ignored", "event_id": event.event_id}, 200)
            return _unavailable(reason or result.value)  # QUEUE_FULL or UNAVAILABLE
        finally:
            if digest is not None and not keep_digest:
                self._replays.release(digest)

    async def _read_body(self, request: Request) -> bytes:
        """The raw body, refused with 413 as soon as it is known to exceed the limit."""
        limit = self.max_body_bytes
        too_large = _Reject(413, f"body larger than {limit} bytes")
        declared = request.headers.get("content-length")
        if declared is not None:
            if not (declared.isascii() and declared.isdigit()):
                raise _Reject(400, "invalid Content-Length")
            if int(declared) > limit:
                raise too_large
        chunks: list[bytes] = []
        size = 0
        async with contextlib.aclosing(request.stream()) as stream:
            async for chunk in stream:
                size += len(chunk)
                if size > limit:  # chunked bodies have no Content-Length: stop reading here
                    raise too_large
                chunks.append(chunk)
        return b"".join(chunks)

    def _verify(self, headers: Headers, body: bytes) -> str:
        """Check the signature, freshness and replay; returns the reserved digest."""
        assert self._secret is not None
        timestamp = headers.get(TIMESTAMP_HEADER)
        signature = headers.get(SIGNATURE_HEADER)
        if timestamp is None or signature is None:
            raise _Reject(401, f"missing signature ({TIMESTAMP_HEADER} and {SIGNATURE_HEADER} "
                               "headers are required)")
        invalid = _Reject(401, "invalid signature")
        # Header values arrive latin-1 decoded; compare_digest raises on non-ASCII str.
        if not (timestamp.isascii() and signature.isascii()):
            raise invalid
        scheme, _, given = signature.strip().partition("=")
        if (scheme.lower() != "sha256" or not _TIMESTAMP_RE.fullmatch(timestamp)
                or not _HEX_DIGEST_RE.fullmatch(given)):
            raise invalid
        key = self._secret.get_secret_value().encode("utf-8")
        expected = hmac.new(key, timestamp.encode("ascii") + b"." + body,
                            hashlib.sha256).hexdigest()
        given = given.lower()
        if not hmac.compare_digest(expected, given):
            raise invalid
        # Freshness and replay are checked only for authentic requests, so strangers learn
        # nothing and cannot fill the replay cache.
        now = self._clock()
        sent = int(timestamp)
        if abs(now - sent) > self.signature_tolerance:
            raise _Reject(401, "stale or future timestamp")
        verdict = self._replays.reserve(given, sent + self.signature_tolerance, now)
        if verdict == "seen":
            raise _Reject(401, "replayed request")
        if verdict == "full":
            raise _Reject(503, "too many signed requests; try again later")
        return given


# -- shared servers ------------------------------------------------------------------------------
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


class _SharedServer:
    """One uvicorn server on one address, routing each path to its trigger."""

    def __init__(self, host: str, port: int, after: asyncio.Task[None] | None) -> None:
        self.host = host
        self.port = port
        self.loop = asyncio.get_running_loop()
        self.routes: dict[str, WebhookTrigger] = {}
        self.bound_port: int | None = None
        self.closing: asyncio.Task[None] | None = None
        self._after = after  # the previous server on this address, still releasing it
        self._starting: asyncio.Task[None] | None = None
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None
        self.app = Starlette(routes=[Route("/{path:path}", _Endpoint(self._dispatch))])

    def __repr__(self) -> str:
        return f"<webhook server {self.host}:{self.bound_port or self.port} {sorted(self.routes)}>"

    async def _dispatch(self, request: Request) -> Response:
        path: str = request.scope["path"]
        if path == HEALTH_PATH:
            if request.method != "GET":
                return _error(405, f"method {request.method} not allowed; use GET",
                              {"Allow": "GET"})
            return JSONResponse({"status": "ok", "paths": sorted(self.routes)})
        trigger = self.routes.get(path)
        if trigger is None:
            return _error(404, "no webhook is served at this path")
        return await trigger.handle(request)

    def add(self, trigger: WebhookTrigger) -> None:
        other = self.routes.get(trigger.path)
        if other is not None:
            raise ValueError(
                f"webhook triggers {other.trigger_id!r} and {trigger.trigger_id!r} both want "
                f"path {trigger.path!r} on {self.host}:{self.bound_port or self.port}"
            )
        self.routes[trigger.path] = trigger

    async def ensure_started(self) -> None:
        if self._starting is None:
            self._starting = self.loop.create_task(self._start())
        # shield: one caller giving up must not abort the start for the others
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        if self._after is not None:
            await asyncio.wait([self._after])
        sock = await _listen_socket(self.host, self.port)
        config = uvicorn.Config(
            # log_level None and log_config None: uvicorn's loggers are shared with the host
            # (promptui serve logs through them), so their levels are the host's to set.
            self.app, host=self.host, port=self.port, log_level=None, lifespan="off",
            log_config=None,
            access_log=False, server_header=False, ws="none",
            timeout_graceful_shutdown=_GRACEFUL_STOP_SECONDS,
        )
        server = _EmbeddedServer(config)
        task = self.loop.create_task(server.serve(sockets=[sock]),
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
        started = self.bound_port is not None  # a failed start was reported by start()
        if started and task is not None and not task.cancelled() and task.exception():
            log.error("webhook server %s:%s failed while stopping", self.host, self.bound_port,
                      exc_info=task.exception())


#: Shared servers by configured address (ephemeral port-0 servers are not listed: not shared).
_SERVERS: dict[_Address, _SharedServer] = {}
#: Servers still shutting down, so a new one on the same address waits for the port.
_CLOSING: dict[_Address, asyncio.Task[None]] = {}


async def _listen_socket(host: str, port: int) -> socket.socket:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        if sys.platform != "win32":  # on Windows SO_REUSEADDR would allow stealing the port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return sock


async def _attach(trigger: WebhookTrigger) -> _SharedServer:
    address = (trigger.host, trigger.port)
    loop = asyncio.get_running_loop()
    if trigger.port == 0:
        server = _SharedServer(trigger.host, 0, None)
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
            found = _SharedServer(trigger.host, trigger.port, closing)
            _SERVERS[address] = found
        server = found
    server.add(trigger)  # before any await, so a duplicate path is refused at once
    try:
        await server.ensure_started()
    except BaseException:
        await _detach(server, trigger)
        raise
    return server


async def _detach(server: _SharedServer, trigger: WebhookTrigger) -> None:
    if server.routes.get(trigger.path) is trigger:
        del server.routes[trigger.path]
    if server.routes:
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

"""Webhook trigger: HTTP POSTs become events, answered with what the process did with them.

Request pipeline (POST on a served path): body size limit (413) -> HMAC signature when
``hmac_secret`` is set (401) -> body parsing (400) -> ``accept(event)`` -> 202 accepted (durable) /
200 ignored (filtered) / 503 + ``Retry-After`` (queue full, process unavailable) / 500.

The parts live beside this module: the shared servers and their lifecycle in webhook_server, body
limits and parsing in webhook_request, signatures (the headers a sender sets) in
webhook_signature. The names other code used from here are re-exported.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from runtime_core.triggers.base import AcceptFn, AcceptResult, TriggerEvent
from runtime_core.triggers.config import TriggerConfig, check_webhook_path
from runtime_core.triggers.webhook_request import (
    RETRY_AFTER_SECONDS,
    Reject,
    error_response,
    parse_body,
    read_body,
    unavailable_response,
)
from runtime_core.triggers.webhook_server import SharedServer, attach, detach
from runtime_core.triggers.webhook_signature import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    ReplayCache,
    verify_signature,
)

__all__ = ["RETRY_AFTER_SECONDS", "SIGNATURE_HEADER", "TIMESTAMP_HEADER", "WebhookTrigger"]

log = logging.getLogger(__name__)

#: Never copied into event metadata: credentials, and the signature (a replay token).
_HIDDEN_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", SIGNATURE_HEADER.lower(),
})


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
        self._server: SharedServer | None = None
        self._replays = ReplayCache()
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
            self._server = await attach(self)
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
            await detach(server, self)

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
        except Reject as exc:
            level = logging.INFO if exc.status == 401 else logging.DEBUG
            log.log(level, "webhook trigger %s: %d for %s: %s", self.trigger_id, exc.status,
                    request.client.host if request.client else "?", exc.message)
            response = (unavailable_response(exc.message) if exc.status == 503
                        else error_response(exc.status, exc.message, exc.headers))
        except Exception:
            log.exception("webhook trigger %s: error while handling a request", self.trigger_id)
            response = error_response(500, "internal error")
        if response.status_code == 202:
            self._accepted += 1
        elif response.status_code == 200:
            self._ignored += 1
        else:
            self._rejected += 1
        return response

    async def _pipeline(self, request: Request) -> Response:
        if request.method != "POST":
            raise Reject(405, f"method {request.method} not allowed; use POST",
                         {"Allow": "POST"})
        if self._server is None:
            return unavailable_response("trigger stopped")
        body = await read_body(request, self.max_body_bytes)
        digest: str | None = None
        if self._secret is not None:
            digest = verify_signature(request.headers, body, secret=self._secret,
                                      tolerance=self.signature_tolerance,
                                      replays=self._replays, clock=self._clock)
        keep_digest = False  # a signature stays spent only if it handed over an event
        try:
            payload = parse_body(body, request.headers.get("content-type", ""))
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
                return unavailable_response("trigger stopped")
            result, reason = await accept(event)
            if result is AcceptResult.ACCEPTED:
                keep_digest = True
                return JSONResponse({"status": "accepted", "event_id": event.event_id}, 202)
            if result is AcceptResult.FILTERED:
                keep_digest = True
                return JSONResponse({"status": "ignored", "event_id": event.event_id}, 200)
            return unavailable_response(reason or result.value)  # QUEUE_FULL or UNAVAILABLE
        finally:
            if digest is not None and not keep_digest:
                self._replays.release(digest)

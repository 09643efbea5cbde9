"""Webhook trigger: HTTP POSTs become events, answered with what the process did with them.

Request pipeline (POST on a served path; the server has already refused a foreign Host on a
loopback bind with 421 and any browser Origin with 403): the source address against
``allowed_sources`` (403) -> body size limit (413) -> the signature scheme's check over the raw
body when ``hmac_secret`` is set (401) -> body parsing (400) -> Slack's url_verification is
answered with its challenge -> a delivery taken before (its delivery key: the sender's delivery
id, else the signature) answers 200 ``duplicate`` with the first event's id -> ``accept(event)``
-> 202 accepted (durable) / 200 ignored (filtered) / 200 duplicate (found in the journal's
delivery index) / 503 + ``Retry-After`` (queue full, process unavailable) / 500.

The parts live beside this module: the shared servers and their lifecycle in ``server``, body
limits and parsing in ``request``, signatures (the headers a sender sets) in
``signature`` and ``signatures/``, delivery ids in ``deliveries``.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from runtime_core.http.origin import is_loopback
from runtime_core.triggers.base import (
    DELIVERY_KEY,
    AcceptFn,
    AcceptResult,
    AvailabilityFn,
    TriggerEvent,
)
from runtime_core.triggers.config import TriggerConfig, check_webhook_path
from runtime_core.triggers.signing import SIGNATURE_HEADERS
from runtime_core.triggers.webhook.deliveries import DeliveryLedger
from runtime_core.triggers.webhook.request import (
    Reject,
    error_response,
    parse_body,
    read_body,
    unavailable_response,
)
from runtime_core.triggers.webhook.server import SharedServer, attach, detach
from runtime_core.triggers.webhook.signature import Verified, verify_signature
from runtime_core.triggers.webhook.signatures.table import BODY_DELIVERY_IDS

log = logging.getLogger(__name__)

#: Never copied into event metadata: credentials (the trigger's signature header, a replay
#: token, is added per trigger).
_HIDDEN_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _visible_headers(headers: Headers, hidden: frozenset[str]) -> dict[str, str]:
    visible: dict[str, str] = {}
    for name, value in headers.items():
        if name in hidden:
            continue
        visible[name] = f"{visible[name]}, {value}" if name in visible else value
    return visible


def _networks(sources: list[str] | None) -> tuple[_Network, ...] | None:
    if sources is None:
        return None
    return tuple(ipaddress.ip_network(s.strip(), strict=False) for s in sources)


def _source_allowed(client: str | None, networks: tuple[_Network, ...]) -> bool:
    if client is None:
        return False
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # a dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d
    return any(address in network for network in networks)


@dataclass(frozen=True, slots=True)
class _Delivery:
    """A request's delivery key (kept with its event in the journal's delivery index), the
    sender's own id when it has one, and until when a repeat can still arrive (None: as long
    as the ledger keeps delivery ids)."""

    key: str
    sender_id: str | None
    until: float | None


def _url_verification(payload: Any) -> str | None:
    """Slack's challenge when ``payload`` is its url_verification request."""
    if isinstance(payload, dict) and payload.get("type") == "url_verification":
        challenge = payload.get("challenge")
        return challenge if isinstance(challenge, str) else None
    return None


def reference_webhook_config(path: str, port: int, host: str, hmac_secret: str | None,
                             options: dict[str, Any]) -> TriggerConfig:
    """The TriggerConfig of the reference runtime's ``WebhookTrigger(path, port, host,
    hmac_secret, *, signature_scheme=..., ...)`` (options left None keep our defaults)."""
    if options.pop("event_filter", None) is not None:
        raise TypeError("WebhookTrigger(event_filter=callable) is not taken here: give the "
                        "trigger's TriggerConfig a filter_expression (see the filters page)")
    fields = {"type": "webhook", "webhook_path": path, "webhook_port": port,
              "webhook_host": host, "hmac_secret": hmac_secret, **options}
    return TriggerConfig(**{k: v for k, v in fields.items() if v is not None})


class WebhookTrigger:
    """A push trigger serving ``config.webhook_path`` on ``webhook_host:webhook_port``. The
    runtime builds it as ``WebhookTrigger(trigger_id, config)``; code written for the reference
    runtime as ``WebhookTrigger(path="/webhook", port=9090, host="127.0.0.1",
    hmac_secret=None, *, signature_scheme=..., signature_header=..., signature_tolerance=...,
    allowed_sources=..., max_body_bytes=...)`` (the id ``webhook-<port><path>``; the schemes
    are ours: promptui, github, stripe, slack, standard)."""

    trigger_type = "webhook"

    def __init__(self, first: str = "/webhook", second: TriggerConfig | int = 9090,
                 host_: str = "127.0.0.1", hmac_secret_: str | None = None, /, *,
                 clock: Callable[[], float] = time.time, trigger_id: str | None = None,
                 path: str | None = None, port: int | None = None, host: str | None = None,
                 hmac_secret: str | None = None, **options: Any) -> None:
        """``clock``: the wall clock (Unix seconds) signature timestamps are checked against."""
        if isinstance(second, TriggerConfig):  # ours: (trigger_id, config)
            extra = [k for k, v in (("path", path), ("port", port), ("host", host),
                                    ("hmac_secret", hmac_secret), *options.items()) if v]
            if extra or trigger_id is not None:
                raise TypeError(f"WebhookTrigger(trigger_id, config) takes its settings from "
                                f"the config, not {', '.join(extra) or 'trigger_id'}=")
            trigger_id, config = first, second
        else:
            path, port = path or first, second if port is None else port
            config = reference_webhook_config(path, port, host or host_,
                                              hmac_secret or hmac_secret_, options)
            trigger_id = trigger_id or f"webhook-{port}{path}"
        if config.type != "webhook":
            raise ValueError(f"WebhookTrigger needs a 'webhook' config, got {config.type!r}")
        check_webhook_path(config.webhook_path)
        if any(not secret.get_secret_value() for secret in config.secrets()):
            raise ValueError(f"webhook trigger {trigger_id!r}: hmac_secret must not be empty")
        self.trigger_id = trigger_id
        self.path = config.webhook_path
        self.host = config.webhook_host
        self.port = config.webhook_port
        self.max_body_bytes = config.max_body_bytes
        self.signature_tolerance = config.signature_tolerance
        self.signature_scheme = config.signature_scheme
        self.signature_header = config.signature_header or SIGNATURE_HEADERS[
            config.signature_scheme]
        self.allowed_sources = config.allowed_sources
        self._networks = _networks(config.allowed_sources)
        self._secrets = config.secrets()  # SecretStr: unwrapped only to compute an HMAC
        self._hidden = _HIDDEN_HEADERS | {self.signature_header.lower()}
        self._accept: AcceptFn | None = None
        self._availability: AvailabilityFn | None = None
        self._server: SharedServer | None = None
        self._clock = clock
        self._deliveries = DeliveryLedger(clock=clock)
        self._requests = 0
        self._accepted = 0
        self._ignored = 0
        self._duplicates = 0
        self._rejected = 0

    def __repr__(self) -> str:
        port = self.bound_port if self.bound_port is not None else self.port
        return (f"WebhookTrigger({self.trigger_id!r}, {self.host}:{port}{self.path}, "
                f"signed={self.signed})")

    @property
    def signed(self) -> bool:
        return bool(self._secrets)

    @property
    def bound_port(self) -> int | None:
        """The port actually listened on (the real one for port 0); None when not started."""
        return self._server.bound_port if self._server is not None else None

    @property
    def running(self) -> bool:
        return self._server is not None

    def set_availability_check(self, check: AvailabilityFn) -> None:
        """The process's (state, refusal) for ``GET /health``: 503 while it refuses events."""
        self._availability = check

    def unavailable(self) -> dict[str, str] | None:
        """Why this path takes no events now (its process's state and reason), or None."""
        if self._server is None or self._accept is None:
            return {"state": "stopped", "reason": "trigger stopped"}
        if self._availability is None:
            return None
        state, reason = self._availability()
        return None if reason is None else {"state": state, "reason": reason}

    async def start(self, accept: AcceptFn, *, standby: bool = False) -> None:
        """Serve the path. ValueError if another trigger serves it on this address; OSError if
        the address cannot be bound. ``standby``: serve it only while no other trigger does
        (server.py: a cluster node's stand-in for a process it does not run)."""
        if self._server is not None:
            raise RuntimeError(f"webhook trigger {self.trigger_id!r} is already started")
        self._accept = accept
        try:
            self._server = await attach(self, standby=standby)
        except BaseException:
            self._accept = None
            raise
        if not self.signed and not is_loopback(self.host) and self._networks is None:
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
            "signature_required": self.signed,
            "signature_scheme": self.signature_scheme if self.signed else None,
            "allowed_sources": list(self.allowed_sources) if self.allowed_sources else None,
            "requests": self._requests,
            "accepted": self._accepted,
            "ignored": self._ignored,
            "duplicates": self._duplicates,
            "rejected": self._rejected,
        }

    # -- request handling ------------------------------------------------------------------------
    async def handle(self, request: Request) -> Response:
        self._requests += 1
        outcome = "rejected"
        try:
            response, outcome = await self._pipeline(request)
        except Reject as exc:
            level = logging.INFO if exc.status in (401, 403) else logging.DEBUG
            log.log(level, "webhook trigger %s: %d for %s: %s", self.trigger_id, exc.status,
                    request.client.host if request.client else "?", exc.message)
            response = (unavailable_response(exc.message) if exc.status == 503
                        else error_response(exc.status, exc.message, exc.headers))
        except Exception:
            log.exception("webhook trigger %s: error while handling a request", self.trigger_id)
            response = error_response(500, "internal error")
        if outcome == "accepted":
            self._accepted += 1
        elif outcome == "ignored":
            self._ignored += 1
        elif outcome == "duplicate":
            self._duplicates += 1
        elif outcome != "challenge":
            self._rejected += 1
        return response

    async def _pipeline(self, request: Request) -> tuple[Response, str]:
        """The answer and what it was: accepted, ignored, duplicate, challenge or rejected."""
        client = request.client.host if request.client else None
        if self._networks is not None and not _source_allowed(client, self._networks):
            raise Reject(403, "this source address may not post here (allowed_sources)")
        if request.method != "POST":
            raise Reject(405, f"method {request.method} not allowed; use POST",
                         {"Allow": "POST"})
        if self._server is None:
            return unavailable_response("trigger stopped"), "rejected"
        body = await read_body(request, self.max_body_bytes)
        verified: Verified | None = None
        if self._secrets:
            verified = verify_signature(
                request.headers, body, scheme=self.signature_scheme, secrets=self._secrets,
                header=self.signature_header, tolerance=self.signature_tolerance,
                clock=self._clock)
        claimed: _Delivery | None = None
        taken_as: str | None = None  # the event id the delivery is taken as, if it is
        try:
            payload = parse_body(body, request.headers.get("content-type", ""))
            challenge = _url_verification(payload) if self.signature_scheme == "slack" \
                and verified is not None else None
            if challenge is not None:  # Slack checks the URL before it sends events
                return JSONResponse({"challenge": challenge}, 200), "challenge"
            delivery = self._delivery(verified, payload)
            if delivery is not None:
                first = await self._deliveries.claim(delivery.key)
                if first is not None:
                    return self._duplicate(first), "duplicate"
                claimed = delivery
            event = TriggerEvent(self.trigger_id, self.trigger_type, payload,
                                 metadata=self._metadata(request, client, verified, delivery))
            accept = self._accept
            if accept is None:  # stopped while the body was arriving
                return unavailable_response("trigger stopped"), "rejected"
            result, reason = await accept(event)
            if result is AcceptResult.ACCEPTED:
                taken_as = event.event_id
                return JSONResponse({"status": "accepted", "event_id": event.event_id},
                                    202), "accepted"
            if result is AcceptResult.DUPLICATE:  # found in the journal's delivery index
                taken_as = reason
                return self._duplicate(reason), "duplicate"
            if result is AcceptResult.FILTERED:
                return JSONResponse({"status": "ignored", "event_id": event.event_id},
                                    200), "ignored"
            # QUEUE_FULL or UNAVAILABLE
            return unavailable_response(reason or result.value), "rejected"
        finally:
            if claimed is not None:
                self._deliveries.settle(claimed.key, taken_as, until=claimed.until)

    def _delivery(self, verified: Verified | None, payload: Any) -> _Delivery | None:
        """What makes this request the same delivery as another: the sender's delivery id
        (a header, or the body's for Stripe and Slack), else the signature, which is good only
        inside its timestamp window. None for an unsigned request."""
        if verified is None:
            return None
        sender = verified.delivery_id
        if sender is None and self.signature_scheme in BODY_DELIVERY_IDS:
            sender = BODY_DELIVERY_IDS[self.signature_scheme](payload)
        if sender is not None:
            return _Delivery(f"{self.path}#{sender}", sender, None)
        if verified.replay_key is None or verified.sent is None:
            return None
        # Past sent + tolerance the timestamp no longer passes: nothing to remember after.
        return _Delivery(f"{self.path}#signature:{verified.replay_key}", None,
                         float(verified.sent + self.signature_tolerance))

    def _duplicate(self, first_event_id: str) -> Response:
        """A delivery taken before: acknowledged (so the sender stops), and nothing runs."""
        log.info("webhook trigger %s: delivery already accepted as event %s; acknowledged "
                 "without running it again", self.trigger_id, first_event_id)
        return JSONResponse({"status": "duplicate", "event_id": first_event_id}, 200)

    def _metadata(self, request: Request, client: str | None, verified: Verified | None,
                  delivery: _Delivery | None) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "method": request.method,
            "path": request.url.path,
            "query": dict(request.query_params),
            "remote": client,
            "headers": _visible_headers(request.headers, self._hidden),
            "signature_verified": verified is not None,
        }
        if verified is not None:
            metadata["signature_scheme"] = self.signature_scheme
        if delivery is not None:
            if delivery.sender_id is not None:
                metadata["delivery_id"] = delivery.sender_id
            metadata[DELIVERY_KEY] = delivery.key
        return metadata

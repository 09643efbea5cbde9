"""Escalation: tell someone outside the process that it needs a look.

A target is an event on the runtime's bus, a webhook POST, or both. The webhook is guarded
against server-side request forgery: the host is resolved on every send, every address it
resolves to must be public (no private, loopback, link-local, CGNAT, multicast, reserved or
unspecified address, IPv4-mapped IPv6 included) unless ``allow_private`` is set explicitly, the
request goes to the address that was checked (Host header and TLS server name kept, so a DNS
answer that changes between check and connect cannot redirect it), redirects are not followed and
the request times out. Delivery never raises: the outcome is returned and announced.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from runtime_core.governance.config import EscalationTarget

if TYPE_CHECKING:
    from runtime_core.bus import EventBus

log = logging.getLogger(__name__)

__all__ = ["EscalationOutcome", "EscalationRefused", "EscalationTarget", "Escalator",
           "check_public_address"]


class EscalationRefused(Exception):
    """The webhook address failed the SSRF rules; nothing was sent."""


@dataclass(frozen=True, slots=True)
class EscalationOutcome:
    """What happened to one escalation: ``delivered`` is True when every channel worked."""

    event_emitted: bool
    webhook_status: int | None  # the HTTP status, None when no POST was answered
    error: str = ""

    @property
    def delivered(self) -> bool:
        return not self.error


def check_public_address(address: str) -> None:
    """Raise EscalationRefused unless ``address`` is a public unicast address."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is not None:
            check_public_address(str(embedded))
    if ip.is_multicast or not ip.is_global or ip.is_reserved or ip.is_unspecified:
        raise EscalationRefused(
            f"{address} is not a public address (private, loopback, link-local, shared, "
            "multicast or reserved); set escalation.allow_private: true to send to it")


async def _resolve(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise EscalationRefused(f"cannot resolve {host!r}: {exc.strerror or exc}") from exc
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise EscalationRefused(f"{host!r} resolved to no address")
    return addresses


class Escalator:
    """Sends escalations for one process. ``transport`` is injectable for tests."""

    def __init__(self, event_bus: EventBus | None, *, source: str,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.event_bus = event_bus
        self.source = source
        self._transport = transport

    async def escalate(self, target: EscalationTarget | None,
                       payload: dict[str, Any]) -> EscalationOutcome:
        if target is None:
            return EscalationOutcome(False, None, "no escalation target is configured")
        emitted = False
        errors: list[str] = []
        if target.event_type:
            if self.event_bus is None:
                errors.append("no event bus to emit on")
            else:
                try:
                    self.event_bus.emit(target.event_type, payload, source=self.source)
                    emitted = True
                except Exception as exc:  # a bus subscriber's fault is not the process's
                    errors.append(f"event bus: {exc}")
        status: int | None = None
        if target.webhook_url:
            try:
                status = await self.post(target, payload)
                if not 200 <= status < 300:
                    errors.append(f"webhook answered HTTP {status}" + (
                        " (redirects are not followed)" if 300 <= status < 400 else ""))
            except EscalationRefused as exc:
                errors.append(f"webhook refused: {exc}")
            except httpx.HTTPError as exc:
                errors.append(f"webhook failed: {type(exc).__name__}: {exc}")
        outcome = EscalationOutcome(emitted, status, "; ".join(errors))
        if outcome.error:
            log.error("escalation from %s not delivered: %s", self.source, outcome.error)
        return outcome

    async def post(self, target: EscalationTarget, payload: dict[str, Any]) -> int:
        """POST ``payload`` to the checked address; returns the HTTP status."""
        assert target.webhook_url is not None
        url = httpx.URL(target.webhook_url)
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = await _resolve(url.host, port)
        if not target.allow_private:
            for address in addresses:  # every answer, so a mixed answer cannot slip through
                check_public_address(address)
        pinned = url.copy_with(host=addresses[0])
        headers = {**target.headers, "Host": url.netloc.decode("ascii"),
                   "Content-Type": "application/json", "User-Agent": "promptui-escalation"}
        body = json.dumps(payload, default=str).encode()
        async with httpx.AsyncClient(transport=self._transport, follow_redirects=False,
                                     timeout=target.timeout, trust_env=False) as client:
            response = await client.post(pinned, content=body, headers=headers,
                                         extensions={"sni_hostname": url.host})
        return response.status_code

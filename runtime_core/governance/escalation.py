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
from urllib.parse import urlsplit, urlunsplit

from runtime_core.governance.config import EscalationTarget

if TYPE_CHECKING:
    import httpx

    from runtime_core.bus import EventBus

log = logging.getLogger(__name__)

__all__ = ["EscalationOutcome", "EscalationRefused", "EscalationTarget", "Escalator",
           "check_public_address", "ip_literal"]


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


# Special-purpose ranges that Python's is_global lets through (before 3.12.4 for some), or
# that are no place for an alert: IETF protocol assignments, the 6to4 relay anycast,
# IPv6 documentation and the deprecated site-local range.
_SPECIAL = tuple(ipaddress.ip_network(n) for n in (
    "192.0.0.0/24", "192.88.99.0/24", "3fff::/20", "fec0::/10"))


def check_public_address(address: str) -> None:
    """Raise EscalationRefused unless ``address`` is a public unicast address."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise EscalationRefused(f"{address!r} is not an IP address") from None
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is not None:
            check_public_address(str(embedded))
    special = any(ip.version == net.version and ip in net for net in _SPECIAL)
    if special or ip.is_multicast or not ip.is_global or ip.is_reserved or ip.is_unspecified:
        raise EscalationRefused(
            f"{address} is not a public address (private, loopback, link-local, shared, "
            "multicast or reserved); set escalation.allow_private: true to send to it")


@dataclass(frozen=True, slots=True)
class _Destination:
    host: str  # as written
    url: httpx.URL  # as written, but for an IP literal: its canonical spelling
    addresses: list[str]  # what to check and connect to
    host_header: str  # the host the operator wrote, for Host
    server_name: str  # for TLS: the name, or the canonical IP literal


async def _destination(webhook_url: str) -> _Destination:
    """Where ``webhook_url`` points, read as a resolver would: an IPv4 address in any spelling
    (0177.0.0.1, 0x7f.1, 2130706433, 127.1) is that address, so it is checked as one."""
    import httpx  # only a process that escalates to a webhook pays for the HTTP client

    try:
        parts = urlsplit(webhook_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise EscalationRefused(f"webhook_url {webhook_url!r} cannot be parsed: {exc}") from None
    host = parts.hostname or ""
    if not host:
        raise EscalationRefused(f"webhook_url {webhook_url!r} has no host")
    literal = ip_literal(host)
    try:
        if literal is None:
            url = httpx.URL(webhook_url)
            addresses = await _resolve(url.host, port)
            return _Destination(host, url, addresses, url.netloc.decode("ascii"), url.host)
        shown = f"[{literal}]" if literal.version == 6 else str(literal)
        url = httpx.URL(urlunsplit((parts.scheme, f"{shown}:{port}", parts.path or "/",
                                    parts.query, "")))
    except (httpx.InvalidURL, UnicodeError, ValueError) as exc:
        raise EscalationRefused(f"webhook_url {webhook_url!r} cannot be parsed: {exc}") from None
    return _Destination(host, url, [str(literal)], parts.netloc.rpartition("@")[2],
                        str(literal))


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``host`` spells, None for a name. A host whose last label is a number is
    an IPv4 address the way URL parsers and inet_aton read it (octal, hex, fewer than four
    parts); EscalationRefused if it is none (999.1.1.1, 1.2.3.4.5)."""
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            raise EscalationRefused(f"{host!r} is not a valid IPv6 address") from None
    labels = host.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels.pop()  # a trailing dot: the same host
    if not _is_number(labels[-1]):
        return None
    numbers = [_ipv4_number(label) for label in labels]
    if len(labels) > 4 or None in numbers:
        raise EscalationRefused(f"{host!r} is not a valid IPv4 address")
    values = [n for n in numbers if n is not None]
    *head, last = values
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(values)):
        raise EscalationRefused(f"{host!r} is not a valid IPv4 address (a part is too large)")
    value = last + sum(n << (8 * (3 - i)) for i, n in enumerate(head))
    return ipaddress.IPv4Address(value)


def _is_number(label: str) -> bool:
    if label[:2].lower() == "0x":
        return all(c in "0123456789abcdefABCDEF" for c in label[2:])
    return label.isascii() and label.isdigit()


def _ipv4_number(label: str) -> int | None:
    try:
        if label[:2].lower() == "0x":
            return int(label[2:] or "0", 16)
        if len(label) > 1 and label.startswith("0"):
            return int(label[1:], 8)
        return int(label, 10) if label.isascii() and label.isdigit() else None
    except ValueError:
        return None


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

    def emit(self, target: EscalationTarget, payload: dict[str, Any]) -> tuple[bool, list[str]]:
        """The event-bus half, at once: whether it was emitted, and what went wrong. Done before
        the process acts on the anomaly, so an in-process subscriber hears of it first."""
        if not target.event_type:
            return False, []
        if self.event_bus is None:
            return False, ["no event bus to emit on"]
        try:
            self.event_bus.emit(target.event_type, payload, source=self.source)
        except Exception as exc:  # a bus subscriber's fault is not the process's
            return False, [f"event bus: {exc}"]
        return True, []

    async def escalate(self, target: EscalationTarget | None, payload: dict[str, Any], *,
                       emitted: tuple[bool, list[str]] | None = None) -> EscalationOutcome:
        """Emit (unless ``emitted`` says how that went already) and POST to the webhook."""
        if target is None:
            return EscalationOutcome(False, None, "no escalation target is configured")
        sent, said = emitted if emitted is not None else self.emit(target, payload)
        errors = list(said)
        status: int | None = None
        if target.webhook_url:
            try:
                status = await self.post(target, payload)
                if not 200 <= status < 300:
                    errors.append(f"webhook answered HTTP {status}" + (
                        " (redirects are not followed)" if 300 <= status < 400 else ""))
            except EscalationRefused as exc:
                errors.append(f"webhook refused: {exc}")
            except Exception as exc:  # any failure is reported, never raised
                errors.append(f"webhook failed: {type(exc).__name__}: {exc}")
        outcome = EscalationOutcome(sent, status, "; ".join(errors))
        if outcome.error:
            log.error("escalation from %s not delivered: %s", self.source, outcome.error)
        return outcome

    async def post(self, target: EscalationTarget, payload: dict[str, Any]) -> int:
        """POST ``payload`` to the checked address; returns the HTTP status. Raises
        EscalationRefused for a URL that cannot be parsed or an address that is refused."""
        assert target.webhook_url is not None
        where = await _destination(target.webhook_url)
        if not target.allow_private:
            for address in where.addresses:  # every answer: a mixed one cannot slip through
                try:
                    check_public_address(address)
                except EscalationRefused as exc:
                    if where.host == address:
                        raise
                    raise EscalationRefused(f"{where.host} is {address}: {exc}") from None
        pinned = where.url.copy_with(host=where.addresses[0])
        headers = {**target.headers, "Host": where.host_header,
                   "Content-Type": "application/json", "User-Agent": "promptui-escalation"}
        body = json.dumps(payload, default=str).encode()
        import httpx

        async with httpx.AsyncClient(transport=self._transport, follow_redirects=False,
                                     timeout=target.timeout, trust_env=False) as client:
            response = await client.post(pinned, content=body, headers=headers,
                                         extensions={"sni_hostname": where.server_name})
        return response.status_code

"""Who may address an HTTP server of ours: the Host header (DNS rebinding) and browser Origins.

Shared by the webhook servers and the control API (which imports them from here: triggers sit
below api in the layers). A server bound to loopback answers only requests addressed to a
loopback host, so a page on a rebound name cannot reach it; any request carrying ``Origin``
came from a web page (real senders and HTTP clients never send one), and a page in the
operator's browser can post with ``no-cors`` without reading the answer, so it is refused.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

MISDIRECTED = ("this server answers only requests addressed to a loopback host "
               "(127.0.0.1, localhost, ::1)")


def is_loopback(host: str) -> bool:
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# RFC 9110's Host: a bracketed IPv6 literal or a plain name/IPv4, then an optional port. Nothing
# else (no userinfo '@', path, spaces or second colon): ``127.0.0.1:80@evil.com`` names evil.com
# to some parsers and 127.0.0.1 to others, so it is refused rather than guessed at.
_HOST = re.compile(r"(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::[0-9]{1,5})?")


def host_name(header: str) -> str:
    """``Host`` without its port: ``[::1]:80`` -> ``::1``, ``localhost:9`` -> ``localhost``;
    ``""`` for a header that is not a plain host and port (userinfo, a path, junk)."""
    found = _HOST.fullmatch(header.strip())
    if found is None:
        return ""
    return found.group("ip6") or found.group("name")


def refusal(headers: Mapping[str, str], bound_host: str) -> tuple[int, str] | None:
    """(status, message) for a request a webhook server must not take, or None.

    421 for a foreign Host on a loopback bind; 403 for any request with an Origin header."""
    if is_loopback(bound_host) and not is_loopback(host_name(headers.get("host", ""))):
        return 421, MISDIRECTED
    if "origin" in headers:
        return 403, ("requests from a web page are refused (webhook senders never send an "
                     "Origin header)")
    return None

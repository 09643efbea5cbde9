"""What every scheme shares: the request being verified, what verification yields, and the
constant-time comparison of what a sender sent with what each configured secret gives."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from starlette.datastructures import Headers

from runtime_core.triggers.webhook.request import Reject

HEX_SHA256 = re.compile(r"[0-9a-fA-F]{64}")  # ASCII only: a str pattern's [0-9] is ASCII
_TIMESTAMP = re.compile(r"[0-9]{1,15}")  # ASCII digits only: int() would accept "1_0", " 1"
_DELIVERY_ID = re.compile(r"[\x21-\x7e]{1,200}")  # printable ASCII, bounded: it is journaled
MAX_SIGNATURES = 16  # several signatures in one header (rotation); more is not a sender


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """One request to verify: its headers, raw body, the HMAC keys (newest first) and the name
    of the header the signature is expected in."""

    headers: Headers
    body: bytes
    keys: tuple[bytes, ...]
    header: str


@dataclass(frozen=True, slots=True)
class Verified:
    """An authentic request: the sender's timestamp (None when the scheme has none), the key
    the replay cache keeps while that timestamp is valid, and the sender's delivery id."""

    sent: int | None = None
    replay_key: str | None = None
    delivery_id: str | None = None


def missing(expected: str) -> Reject:
    return Reject(401, f"missing signature ({expected})")


def invalid(header: str) -> Reject:
    return Reject(401, f"invalid signature ({header} does not match this request signed with "
                       "the configured secret)")


def hmac_hex(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def hmac_raw(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def replay_key(scheme: str, signed: bytes) -> str:
    """The same for a replay whatever secret signed it (a rotated sender may sign twice)."""
    return f"{scheme}:{hashlib.sha256(signed).hexdigest()}"


def any_match(expected: list[bytes], given: list[bytes]) -> bool:
    """True when any given signature equals any expected one. Every pair is compared (no early
    exit) with ``compare_digest``, so the time says nothing about which part matched."""
    found = False
    for want in expected:
        for got in given[:MAX_SIGNATURES]:
            found |= hmac.compare_digest(want, got)
    return found


def ascii_header(request: SignedRequest, name: str) -> str | None:
    """A header's value, None when absent; a value with non-ASCII characters (header bytes
    arrive latin-1 decoded) can be no signature, timestamp or id: 401."""
    value = request.headers.get(name)
    if value is not None and not value.isascii():
        raise invalid(request.header)
    return value


def timestamp(value: str, header: str) -> int:
    """Unix seconds as a sender writes them, or 401."""
    value = value.strip()
    if not _TIMESTAMP.fullmatch(value):
        raise invalid(header)
    return int(value)


def delivery_id(value: str | None) -> str | None:
    """A sender's delivery id if it is a plausible one (printable ASCII, at most 200)."""
    if value is None:
        return None
    value = value.strip()
    return value if _DELIVERY_ID.fullmatch(value) else None

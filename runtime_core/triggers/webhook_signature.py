"""Signed webhook requests: the HMAC check, the freshness window and the replay cache.

Signed requests carry ``X-Promptui-Timestamp: <unix seconds>`` and
``X-Promptui-Signature: sha256=<hex HMAC-SHA256(secret, b"<timestamp>." + raw body)>``. A
signature is good once: the replay cache remembers it until its timestamp is too old to pass.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import re
from collections.abc import Callable
from typing import Literal

from pydantic import SecretStr
from starlette.datastructures import Headers

from runtime_core.triggers.webhook_request import Reject

TIMESTAMP_HEADER = "X-Promptui-Timestamp"
SIGNATURE_HEADER = "X-Promptui-Signature"

_TIMESTAMP_RE = re.compile(r"[0-9]{1,15}")  # ASCII digits only: int() would accept "1_0", " 1"
_HEX_DIGEST_RE = re.compile(r"[0-9a-fA-F]{64}")
_REPLAY_CACHE_MAX = 50_000


class ReplayCache:
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


def verify_signature(headers: Headers, body: bytes, *, secret: SecretStr, tolerance: int,
                     replays: ReplayCache, clock: Callable[[], float]) -> str:
    """Check the signature, freshness and replay; returns the digest reserved in ``replays``
    (release it if the request does not hand over an event). Reject(401), or 503 when the
    replay cache is full."""
    timestamp = headers.get(TIMESTAMP_HEADER)
    signature = headers.get(SIGNATURE_HEADER)
    if timestamp is None or signature is None:
        raise Reject(401, f"missing signature ({TIMESTAMP_HEADER} and {SIGNATURE_HEADER} "
                          "headers are required)")
    invalid = Reject(401, "invalid signature")
    # Header values arrive latin-1 decoded; compare_digest raises on non-ASCII str.
    if not (timestamp.isascii() and signature.isascii()):
        raise invalid
    scheme, _, given = signature.strip().partition("=")
    if (scheme.lower() != "sha256" or not _TIMESTAMP_RE.fullmatch(timestamp)
            or not _HEX_DIGEST_RE.fullmatch(given)):
        raise invalid
    key = secret.get_secret_value().encode("utf-8")
    expected = hmac.new(key, timestamp.encode("ascii") + b"." + body,
                        hashlib.sha256).hexdigest()
    given = given.lower()
    if not hmac.compare_digest(expected, given):
        raise invalid
    # Freshness and replay are checked only for authentic requests, so strangers learn
    # nothing and cannot fill the replay cache.
    now = clock()
    sent = int(timestamp)
    if abs(now - sent) > tolerance:
        raise Reject(401, "stale or future timestamp")
    verdict = replays.reserve(given, sent + tolerance, now)
    if verdict == "seen":
        raise Reject(401, "replayed request")
    if verdict == "full":
        raise Reject(503, "too many signed requests; try again later")
    return given

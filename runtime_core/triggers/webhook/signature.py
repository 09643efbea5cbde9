"""The signature step of a webhook request: the trigger's scheme verifies the raw body with any
of its secrets, then the freshness window and the replay cache.

The schemes (promptui's own, GitHub, Stripe, Slack, Standard Webhooks) are in ``signatures/``.
promptui's: ``X-Promptui-Timestamp: <unix seconds>`` and ``X-Promptui-Signature:
sha256=<hex HMAC-SHA256(secret, b"<timestamp>." + raw body)>``. A timestamped signature is good
once: the replay cache remembers it until its timestamp is too old to pass. A scheme with a
delivery id (GitHub, Standard Webhooks) is deduplicated by that id instead (deliveries.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import SecretStr
from starlette.datastructures import Headers

from runtime_core.triggers.signing import SIGNATURE_HEADERS, hmac_key
from runtime_core.triggers.webhook.request import Reject
from runtime_core.triggers.webhook.signatures.common import SignedRequest, Verified
from runtime_core.triggers.webhook.signatures.promptui import TIMESTAMP_HEADER
from runtime_core.triggers.webhook.signatures.table import VERIFIERS

__all__ = ["SIGNATURE_HEADER", "TIMESTAMP_HEADER", "ReplayCache", "Verified", "verify_signature"]

SIGNATURE_HEADER = SIGNATURE_HEADERS["promptui"]

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


def verify_signature(headers: Headers, body: bytes, *, scheme: str,
                     secrets: Sequence[SecretStr], header: str, tolerance: int,
                     replays: ReplayCache, clock: Callable[[], float]) -> Verified:
    """Verify with ``scheme`` (any of ``secrets`` may have signed), then freshness and replay.
    The returned ``replay_key``, when set, is reserved in ``replays``: release it if the request
    does not hand over an event. Reject(401), or 503 when the replay cache is full."""
    keys = tuple(hmac_key(scheme, secret.get_secret_value()) for secret in secrets)
    verified = VERIFIERS[scheme](SignedRequest(headers, body, keys, header))
    if verified.sent is None:
        return verified
    # Freshness and replay are checked only for authentic requests, so strangers learn
    # nothing and cannot fill the replay cache.
    now = clock()
    if abs(now - verified.sent) > tolerance:
        raise Reject(401, "stale or future timestamp")
    if verified.delivery_id is not None or verified.replay_key is None:
        return verified  # a repeat is recognised by its delivery id (and acknowledged)
    verdict = replays.reserve(verified.replay_key, verified.sent + tolerance, now)
    if verdict == "seen":
        raise Reject(401, "replayed request")
    if verdict == "full":
        raise Reject(503, "too many signed requests; try again later")
    return verified

"""The signature step of a webhook request: the trigger's scheme verifies the raw body with any
of its secrets, then the freshness window.

The schemes (promptui's own, GitHub, Stripe, Slack, Standard Webhooks) are in ``signatures/``.
promptui's: ``X-Promptui-Timestamp: <unix seconds>`` and ``X-Promptui-Signature:
sha256=<hex HMAC-SHA256(secret, b"<timestamp>." + raw body)>``.

A request is taken once. Its *delivery key* says which: the sender's delivery id when it has one
(GitHub's ``X-GitHub-Delivery``, Standard Webhooks' ``webhook-id``, Stripe's event ``id``,
Slack's ``event_id``: a sender's retry keeps it), else the signature itself (``replay_key``: a
hash of what was signed, the same whichever secret signed it). The trigger remembers the keys it
took (deliveries.py) and the process's journal keeps them in its delivery index with the event,
so a repeat inside the timestamp window is answered as a duplicate, even after a restart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import SecretStr
from starlette.datastructures import Headers

from runtime_core.triggers.signing import SIGNATURE_HEADERS, hmac_key
from runtime_core.triggers.webhook.request import Reject
from runtime_core.triggers.webhook.signatures.common import SignedRequest, Verified
from runtime_core.triggers.webhook.signatures.promptui import TIMESTAMP_HEADER
from runtime_core.triggers.webhook.signatures.table import VERIFIERS

__all__ = ["SIGNATURE_HEADER", "TIMESTAMP_HEADER", "Verified", "verify_signature"]

SIGNATURE_HEADER = SIGNATURE_HEADERS["promptui"]


def verify_signature(headers: Headers, body: bytes, *, scheme: str,
                     secrets: Sequence[SecretStr], header: str, tolerance: int,
                     clock: Callable[[], float]) -> Verified:
    """Verify with ``scheme`` (any of ``secrets`` may have signed), then the timestamp's
    freshness (within ``tolerance`` seconds of now). Reject(401) when either fails."""
    keys = tuple(hmac_key(scheme, secret.get_secret_value()) for secret in secrets)
    verified = VERIFIERS[scheme](SignedRequest(headers, body, keys, header))
    # Freshness is checked only for authentic requests, so strangers learn nothing.
    if verified.sent is not None and abs(clock() - verified.sent) > tolerance:
        raise Reject(401, "stale or future timestamp")
    return verified

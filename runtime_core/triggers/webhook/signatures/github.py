"""GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>``, the delivery's
GUID in ``X-GitHub-Delivery``.

The scheme has no timestamp, so a captured request verifies forever: replays are caught by the
delivery id, kept durably (the journal's delivery index, for a week). The delivery id is not
signed, so a replay under a made-up id gets through; ``allowed_sources`` with GitHub's hook
addresses (https://api.github.com/meta) closes that."""

from __future__ import annotations

from runtime_core.triggers.webhook.request import Reject
from runtime_core.triggers.webhook.signatures.common import (
    HEX_SHA256,
    SignedRequest,
    Verified,
    any_match,
    ascii_header,
    delivery_id,
    hmac_hex,
    invalid,
    missing,
)

DELIVERY_HEADER = "X-GitHub-Delivery"


def verify(request: SignedRequest) -> Verified:
    signature = ascii_header(request, request.header)
    if signature is None:
        raise missing(f"the {request.header} header is required: sha256=<hex HMAC-SHA256 of "
                      "the raw body>")
    prefix, _, given = signature.strip().partition("=")
    if prefix.lower() != "sha256" or not HEX_SHA256.fullmatch(given):
        raise invalid(request.header)
    expected = [hmac_hex(key, request.body).encode("ascii") for key in request.keys]
    if not any_match(expected, [given.lower().encode("ascii")]):
        raise invalid(request.header)
    delivery = delivery_id(request.headers.get(DELIVERY_HEADER))
    if delivery is None:  # checked once authentic: strangers learn nothing
        raise Reject(400, f"missing or malformed {DELIVERY_HEADER} header (GitHub sends the "
                          "delivery's GUID; it is how a redelivery is recognised)")
    return Verified(delivery_id=delivery)

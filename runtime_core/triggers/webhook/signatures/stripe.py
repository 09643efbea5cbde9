"""Stripe: ``Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>``.

Several ``v1`` values may come at once (Stripe signs with every active secret while one is
rolled); any match will do. The endpoint secret (``whsec_...``) is used as it is written.

Stripe retries an event it got no 2xx for (for up to three days) with a new timestamp and so a
new signature, and the same event ``id`` in the body: :func:`event_id` is that delivery id, so a
retry is recognised as GitHub's redelivery is."""

from __future__ import annotations

from typing import Any

from runtime_core.triggers.webhook.signatures.common import (
    HEX_SHA256,
    MAX_SIGNATURES,
    SignedRequest,
    Verified,
    any_match,
    ascii_header,
    delivery_id,
    hmac_hex,
    invalid,
    missing,
    replay_key,
    timestamp,
)


def verify(request: SignedRequest) -> Verified:
    header = ascii_header(request, request.header)
    if header is None:
        raise missing(f"the {request.header} header is required: t=<unix time>,v1=<hex "
                      "HMAC-SHA256 of \"<t>.<raw body>\">")
    sent: str | None = None
    given: list[bytes] = []
    for item in header.split(",")[: 4 * MAX_SIGNATURES]:
        name, _, value = item.strip().partition("=")
        if name == "t" and sent is None:
            sent = value.strip()
        elif name == "v1" and HEX_SHA256.fullmatch(value.strip()):
            given.append(value.strip().lower().encode("ascii"))
    if sent is None or not given:
        raise invalid(request.header)
    seconds = timestamp(sent, request.header)
    signed = sent.encode("ascii") + b"." + request.body
    expected = [hmac_hex(key, signed).encode("ascii") for key in request.keys]
    if not any_match(expected, given):
        raise invalid(request.header)
    return Verified(sent=seconds, replay_key=replay_key("stripe", signed))


def event_id(payload: Any) -> str | None:
    """The Stripe event's ``id`` (``evt_...``), the same in every retry of it; None for a body
    that is no event object. Read from the signed body, so it cannot be swapped."""
    found = payload.get("id") if isinstance(payload, dict) else None
    return delivery_id(found) if isinstance(found, str) else None

"""Standard Webhooks (standardwebhooks.com): ``webhook-id``, ``webhook-timestamp`` and
``webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<raw body>")>`` (several,
space-separated, while a secret is rotated). The secret is ``whsec_`` + the base64 key.

A retry keeps its ``webhook-id`` (signed, so it cannot be swapped), which is how a delivery
already accepted is recognised and acknowledged without running twice."""

from __future__ import annotations

import base64

from runtime_core.triggers.webhook.signatures.common import (
    MAX_SIGNATURES,
    SignedRequest,
    Verified,
    any_match,
    ascii_header,
    delivery_id,
    hmac_raw,
    invalid,
    missing,
    replay_key,
    timestamp,
)

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"


def verify(request: SignedRequest) -> Verified:
    message_id = ascii_header(request, ID_HEADER)
    sent = ascii_header(request, TIMESTAMP_HEADER)
    signature = ascii_header(request, request.header)
    if message_id is None or sent is None or signature is None:
        raise missing(f"{ID_HEADER}, {TIMESTAMP_HEADER} and {request.header} headers are "
                      "required")
    given: list[bytes] = []
    for item in signature.split()[:MAX_SIGNATURES]:
        version, _, value = item.partition(",")
        if version == "v1" and value:  # v1a (asymmetric) and others are not ours to check
            given.append(value.encode("ascii"))
    checked_id = delivery_id(message_id)
    if not given or checked_id is None:
        raise invalid(request.header)
    seconds = timestamp(sent, TIMESTAMP_HEADER)
    signed = f"{checked_id}.{sent.strip()}.".encode("ascii") + request.body
    expected = [base64.b64encode(hmac_raw(key, signed)) for key in request.keys]
    if not any_match(expected, given):
        raise invalid(request.header)
    return Verified(sent=seconds, replay_key=replay_key("standard", signed),
                    delivery_id=checked_id)

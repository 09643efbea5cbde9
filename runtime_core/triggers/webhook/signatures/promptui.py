"""promptui's own scheme: ``X-Promptui-Timestamp: <unix seconds>`` and
``X-Promptui-Signature: sha256=<hex HMAC-SHA256(secret, b"<timestamp>." + raw body)>``."""

from __future__ import annotations

from runtime_core.triggers.webhook.signatures.common import (
    HEX_SHA256,
    SignedRequest,
    Verified,
    any_match,
    ascii_header,
    hmac_hex,
    invalid,
    missing,
    replay_key,
    timestamp,
)

TIMESTAMP_HEADER = "X-Promptui-Timestamp"


def verify(request: SignedRequest) -> Verified:
    sent = ascii_header(request, TIMESTAMP_HEADER)
    signature = ascii_header(request, request.header)
    if sent is None or signature is None:
        raise missing(f"{TIMESTAMP_HEADER} and {request.header} headers are required")
    prefix, _, given = signature.strip().partition("=")
    if prefix.lower() != "sha256" or not HEX_SHA256.fullmatch(given):
        raise invalid(request.header)
    seconds = timestamp(sent, TIMESTAMP_HEADER)
    signed = sent.strip().encode("ascii") + b"." + request.body
    expected = [hmac_hex(key, signed).encode("ascii") for key in request.keys]
    if not any_match(expected, [given.lower().encode("ascii")]):
        raise invalid(request.header)
    return Verified(sent=seconds, replay_key=replay_key("promptui", signed))

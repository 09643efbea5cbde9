"""Slack: ``X-Slack-Request-Timestamp: <unix seconds>`` and
``X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret, "v0:<timestamp>:<raw body>")>``.

The Events API retries an event it got no 2xx for within 3 seconds (up to three times, with
``X-Slack-Retry-Num``), signed anew, with the same ``event_id`` in the body: :func:`event_id` is
that delivery id. Slash commands and interactivity carry none; a replay of one is recognised by
its signature within the timestamp window."""

from __future__ import annotations

from typing import Any

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
    replay_key,
    timestamp,
)

TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"


def verify(request: SignedRequest) -> Verified:
    sent = ascii_header(request, TIMESTAMP_HEADER)
    signature = ascii_header(request, request.header)
    if sent is None or signature is None:
        raise missing(f"{TIMESTAMP_HEADER} and {request.header} headers are required")
    version, _, given = signature.strip().partition("=")
    if version != "v0" or not HEX_SHA256.fullmatch(given):
        raise invalid(request.header)
    seconds = timestamp(sent, TIMESTAMP_HEADER)
    signed = b"v0:" + sent.strip().encode("ascii") + b":" + request.body
    expected = [hmac_hex(key, signed).encode("ascii") for key in request.keys]
    if not any_match(expected, [given.lower().encode("ascii")]):
        raise invalid(request.header)
    return Verified(sent=seconds, replay_key=replay_key("slack", signed))


def event_id(payload: Any) -> str | None:
    """An Events API request's ``event_id`` (``Ev...``), the same in each retry; None for slash
    commands and interactive payloads. Read from the signed body."""
    found = payload.get("event_id") if isinstance(payload, dict) else None
    return delivery_id(found) if isinstance(found, str) else None

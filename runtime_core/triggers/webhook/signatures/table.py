"""Scheme name -> its verifier: one function each, over the raw bytes, before any parsing; and
the schemes whose delivery id is in the body (read once the body is parsed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime_core.triggers.webhook.signatures import github, promptui, slack, standard, stripe
from runtime_core.triggers.webhook.signatures.common import SignedRequest, Verified

Verifier = Callable[[SignedRequest], Verified]

VERIFIERS: dict[str, Verifier] = {
    "promptui": promptui.verify,
    "github": github.verify,
    "stripe": stripe.verify,
    "slack": slack.verify,
    "standard": standard.verify,
}

#: Scheme name -> the sender's delivery id read from the parsed body (None when it has none).
EventId = Callable[[Any], str | None]

BODY_DELIVERY_IDS: dict[str, EventId] = {
    "stripe": stripe.event_id,
    "slack": slack.event_id,
}

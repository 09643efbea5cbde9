"""Scheme name -> its verifier: one function each, over the raw bytes, before any parsing."""

from __future__ import annotations

from collections.abc import Callable

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

"""The webhook signature schemes by name, and a secret as the HMAC key its scheme uses.

Only the standard library: a TriggerConfig checks its secrets with this at load, before any web
server code is imported, so it sits beside the config rather than inside ``webhook/`` (the
webhook trigger imports the config, and a package may not be imported back)."""

from __future__ import annotations

import base64
import binascii

SCHEME_NAMES = ("promptui", "github", "stripe", "slack", "standard")

#: The header holding the signature, per scheme (``signature_header`` overrides it).
SIGNATURE_HEADERS = {
    "promptui": "X-Promptui-Signature",
    "github": "X-Hub-Signature-256",
    "stripe": "Stripe-Signature",
    "slack": "X-Slack-Signature",
    "standard": "webhook-signature",
}

STANDARD_PREFIX = "whsec_"

#: The longest ``signature_tolerance`` a webhook may set (3 days; Stripe, Slack and Standard
#: Webhooks use 5 minutes). A signed request is taken once: its delivery key is kept (the
#: journal's delivery index, 7 days) at least as long as its timestamp can pass, twice the
#: tolerance from when it is taken.
MAX_SIGNATURE_TOLERANCE = 3 * 24 * 3600


def hmac_key(scheme: str, secret: str) -> bytes:
    """The HMAC key for ``secret``: its UTF-8 bytes, except Standard Webhooks, whose secret is
    ``whsec_`` + base64 of the key. ValueError saying what is wrong (never the secret)."""
    if scheme != "standard":
        return secret.encode("utf-8")
    if not secret.startswith(STANDARD_PREFIX):
        raise ValueError("a Standard Webhooks secret starts with 'whsec_' followed by the "
                         "base64 key")
    encoded = secret[len(STANDARD_PREFIX):]
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a Standard Webhooks secret is 'whsec_' followed by base64, and what "
                         "follows 'whsec_' is not valid base64") from None
    if not key:
        raise ValueError("a Standard Webhooks secret needs a key after 'whsec_'")
    return key

"""Webhook signature schemes: how each sender signs a request, verified over the raw bytes.

``keys`` (names, secrets as HMAC keys; no web imports, so a config can check them at load),
``common`` (the request being verified and what verification yields), one module per scheme,
and ``table`` (scheme name -> verifier)."""

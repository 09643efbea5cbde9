"""Webhook signature schemes: how each sender signs a request, verified over the raw bytes.

``common`` (the request being verified and what verification yields), one module per scheme,
and ``table`` (scheme name -> verifier). The schemes' names and their secrets as HMAC keys live
in ``runtime_core.triggers.signing``, beside the config that checks them at load."""

"""The webhook trigger: HTTP POSTs become events, answered with what the process did with them.

``trigger`` (WebhookTrigger), ``server`` (one uvicorn server per host and port, a route per
path), ``request`` (a request's body and error answers), ``signature`` and ``signatures/`` (each
sender's scheme), ``deliveries`` (what a sender's delivery id has already brought).
Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

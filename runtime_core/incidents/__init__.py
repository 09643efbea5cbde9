"""Incidents: an application lifecycle over webhook and event triggers (open, recovered,
resolved, reopened as a new generation), its bookkeeping and the keeper that journals it.
Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

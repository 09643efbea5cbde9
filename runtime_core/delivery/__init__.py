"""Delivery: the per-process queue, its workers, retries with backoff, dead letters and
redelivery. Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

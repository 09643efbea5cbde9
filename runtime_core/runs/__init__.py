"""Runs: one bounded execution of the agent per event, driven step by step and journaled as it
goes; their budgets, identity, completion evidence, recovery and the runs that wait for an
operator. Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

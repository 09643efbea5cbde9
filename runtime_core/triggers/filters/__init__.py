"""``filter_expression``: a tiny, safe condition language deciding whether an event runs.

``parse`` (limits, parse, positions), ``evaluate`` (the compiler and its whitelist), ``values``
(what an expression can do to event data), ``expression`` (EventFilter and the compile
functions). Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

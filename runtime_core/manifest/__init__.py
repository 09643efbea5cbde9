"""``.agent`` manifests: YAML that declares a process, turned into a ProcessConfig.

``source`` reads the YAML (one safe pass, with limits and positions), ``env`` substitutes
``${VAR}``, ``errors`` words pydantic's errors as the author would say them, ``loader`` builds the
ProcessConfig, ``checks`` finds what would fail only at start, ``plugins`` imports what custom
triggers need, ``compat`` notes what a reference-runtime manifest says, ``save`` writes a config
back. Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

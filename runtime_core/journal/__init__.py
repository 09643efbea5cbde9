"""The journal: an append-only record of everything a process does, in SQLite by default.

Its names load on first use (PEP 562, the stub beside this file lists them), so a module that
needs one part of the journal does not pay for the others."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

"""AgentProcess, one long-running agent, and the parts it wires together (see process.py).
Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

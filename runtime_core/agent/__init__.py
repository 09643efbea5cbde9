"""The agent: models (echo, scripted, OpenAI-compatible) and tools (Python callables, MCP
servers). Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

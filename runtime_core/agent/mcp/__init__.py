"""Tools from MCP servers (stdio and streamable HTTP, with the ``mcp`` SDK).

``config`` (how a process names its servers), ``link`` (one live connection), ``reconnect``,
``probe``, ``tools`` and ``resources`` (what the model may call), ``content`` (what came back),
``notices`` (logs and list changes), ``asks`` and ``elicit_form`` (what a server asks back).
Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

"""runtime_core: the agent-process runtime behind promptui. It never imports the UI.

Every public name loads on first use (PEP 562; the stub beside this file lists them, so type
checkers see them too): ``import runtime_core`` costs nothing, and a command that needs one part
of the runtime does not pay for the rest."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

"""The control plane: the one road from the control room and the CLI to a runtime, in process
(LocalControl) or over HTTP (RemoteControl), and the views that cross it. Names load on first
use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

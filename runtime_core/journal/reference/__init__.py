"""The reference runtime's FileJournal (promptise), read and imported into one of our journals.

``reader`` (its ``<process>.jsonl`` files), ``state`` (its checkpoints in our shape),
``mapping`` (its entries as ours), ``importer`` (the import, planned then applied).
Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

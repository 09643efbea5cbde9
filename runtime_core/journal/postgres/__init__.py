"""The scale-out journal on PostgreSQL, with the SQLite journal's semantics.

``journal`` (PostgresJournal), ``writer`` (the task that owns the writing connection),
``commit``, ``schema``, ``dsn`` (a DSN as it may be shown), ``fencing`` (writes carry the lease's
epoch). Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

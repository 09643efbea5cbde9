"""The embedded journal: one SQLite file in WAL mode, one writer thread that group-commits.

``journal`` (SQLiteJournal), ``writer`` (the thread), ``commit`` (one group commit), ``schema``
(tables, migrations, checksums), ``queries`` (reads), ``check`` (damage found before a start),
``lock`` (one writer per file). Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

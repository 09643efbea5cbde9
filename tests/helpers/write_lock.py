"""Another program holding an SQLite journal's write lock (an outside ``BEGIN IMMEDIATE``):
nothing commits until it lets go, and the journal says it is degraded meanwhile."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def write_lock_held(path: Path) -> Iterator[sqlite3.Connection]:
    """Hold the write lock of the SQLite file at ``path`` for the ``with`` block (the
    connection that holds it is yielded)."""
    outside = sqlite3.connect(path, isolation_level=None, timeout=5)
    outside.execute("BEGIN IMMEDIATE")
    try:
        yield outside
    finally:
        with contextlib.suppress(sqlite3.Error):
            outside.execute("COMMIT")
        outside.close()

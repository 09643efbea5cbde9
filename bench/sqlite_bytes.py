"""The bytes an SQLite file's pages in use take (its WAL checkpointed into it first): the one
count the benchmarks use, promptui's journal and the peers' stores alike (no promptui import,
so a venv without it can use it too)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def used_bytes(path: Path) -> int:
    """The bytes of the pages of the SQLite file at ``path`` that hold data."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        conn.close()
    return int((pages - free) * size)
